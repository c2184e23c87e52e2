"""What the real node needs from the machine, said exactly, and installed from Debian when allowed.

The real node runs containers, so it needs root (network and mount namespaces, cgroups) and
Debian's container packages. `check()` lists what is missing; `ensure()` installs the missing
packages with apt-get when running as root, and otherwise raises with the list and the command
that fixes it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["CNI_BIN_DIR", "PrerequisiteError", "check", "ensure"]

CNI_BIN_DIR: Final = "/usr/lib/cni"

# Command (or file) -> the Debian package that provides it.
_COMMANDS: Final = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "ip": "iproute2",
    "nsenter": "util-linux",
    "docker-registry": "docker-registry",
    "debootstrap": "debootstrap",
}
_CNI_PLUGINS: Final = ("bridge", "host-local", "loopback", "portmap")
_CNI_PACKAGE: Final = "containernetworking-plugins"


class PrerequisiteError(RuntimeError):
    """The real node cannot run on this machine (the message says what is missing and the fix)."""


@dataclass(frozen=True, slots=True)
class Missing:
    root: bool
    packages: tuple[str, ...]
    what: tuple[str, ...]

    def __bool__(self) -> bool:
        return self.root or bool(self.packages)

    def describe(self) -> str:
        parts = []
        if self.root:
            parts.append("root (it creates a network namespace, cgroups and mounts): run as root")
        if self.packages:
            parts.append(
                f"{', '.join(self.what)} (Debian packages: {' '.join(self.packages)}): "
                f"apt-get install {' '.join(self.packages)}"
            )
        return "the real node needs " + "; and ".join(parts)


def check() -> Missing:
    what: list[str] = []
    packages: list[str] = []
    for command, package in _COMMANDS.items():
        if shutil.which(command) is None and not Path("/usr/sbin", command).exists():
            what.append(command)
            if package not in packages:
                packages.append(package)
    for plugin in _CNI_PLUGINS:
        if not os.access(Path(CNI_BIN_DIR, plugin), os.X_OK):
            what.append(f"{CNI_BIN_DIR}/{plugin}")
            if _CNI_PACKAGE not in packages:
                packages.append(_CNI_PACKAGE)
    return Missing(root=os.geteuid() != 0, packages=tuple(packages), what=tuple(what))


def ensure() -> None:
    """Install missing Debian packages (as root); raise PrerequisiteError when that cannot work."""
    missing = check()
    if not missing:
        return
    if missing.root or shutil.which("apt-get") is None:
        raise PrerequisiteError(missing.describe())
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing.packages]):
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise PrerequisiteError(
                f"{missing.describe()}; `{' '.join(command)}` failed: {result.stderr.strip()[-500:]}"
            )
    still = check()
    if still:
        raise PrerequisiteError(f"{still.describe()} (still missing after apt-get install)")
