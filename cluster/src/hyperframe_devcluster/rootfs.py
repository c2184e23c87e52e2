"""Debian root filesystems made by debootstrap from Debian's archive, cached as tarballs.

Nothing can be pulled from a container registry here, so images start from a root filesystem
that debootstrap builds. A tarball is keyed by everything that decides its content (suite,
variant, packages, mirror) and built once per machine; concurrent callers wait on a lock
instead of building it twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

__all__ = ["DEFAULT_MIRROR", "cache_dir", "debian_mirror", "debian_rootfs"]

DEFAULT_MIRROR: Final = "http://deb.debian.org/debian"
_SOURCES: Final = Path("/etc/apt/sources.list.d/debian.sources")


def cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "hyperframe" / "rootfs"


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (so debootstrap reaches the same archive)."""
    try:
        match = re.search(r"^URIs:\s*(\S+/debian)\s*$", _SOURCES.read_text(), flags=re.MULTILINE)
    except OSError:
        match = None
    return match.group(1) if match else DEFAULT_MIRROR


def debian_rootfs(
    packages: Sequence[str] = ("python3", "ca-certificates"),
    *,
    suite: str = "bookworm",
    variant: str = "minbase",
    mirror: str | None = None,
) -> Path:
    """A cached tarball of `debootstrap --variant=<variant> --include=<packages> <suite>`."""
    mirror = mirror or debian_mirror()
    key = hashlib.sha256(f"{suite}|{variant}|{','.join(sorted(packages))}|{mirror}".encode()).hexdigest()[:16]
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"debian-{suite}-{variant}-{key}.tar"
    with (root / f".{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        if shutil.which("debootstrap") is None:
            raise RuntimeError("debootstrap is not installed: apt-get install debootstrap")
        work = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=root))
        try:
            command = ["debootstrap", f"--variant={variant}"]
            if packages:
                command.append(f"--include={','.join(packages)}")
            command += [suite, str(work / "rootfs"), mirror]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise RuntimeError(
                    f"`{' '.join(command)}` failed: {result.stdout[-800:]}{result.stderr[-800:]}"
                )
            # Caches and logs that only make the image bigger and non-reproducible.
            for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*", "var/log/*.log"):
                for junk in (work / "rootfs").glob(pattern):
                    junk.unlink()
            partial = target.with_suffix(".partial")
            subprocess.run(
                [
                    "tar",
                    "--numeric-owner",
                    "--sort=name",
                    "-C",
                    str(work / "rootfs"),
                    "-cf",
                    str(partial),
                    ".",
                ],
                check=True,
            )
            partial.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target
