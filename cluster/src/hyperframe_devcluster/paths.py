"""Where the pinned binaries, the state directory and the kubeconfig of the local cluster live.

Other code (operator tests, the chart's e2e tests, the demo) finds `kubectl`, `helm` and the
kubeconfig here rather than on PATH, so everyone uses the binaries pinned in
`cluster/versions.env`.

The binary cache formula is the same as in `cluster/build.sh` (a unit test checks that the two
agree): `${HYPERFRAME_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperframe/bin}/<name>-<version>`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

__all__ = [
    "BINARIES",
    "ENV_BIN_CACHE",
    "ENV_CLUSTER_DIR",
    "BinaryMissingError",
    "Pins",
    "bin_dir",
    "binary",
    "cluster_dir",
    "etcd",
    "helm",
    "kubeconfig",
    "kubectl",
    "kueue_manifests",
    "kwok",
    "kwok_stage_crd",
    "missing_binaries",
    "pins",
    "repo_root",
    "versions_file",
]

ENV_BIN_CACHE: Final = "HYPERFRAME_BIN_CACHE"
ENV_CLUSTER_DIR: Final = "HYPERFRAME_CLUSTER_DIR"

# Which pin of versions.env each binary is built at.
BINARIES: Final[dict[str, str]] = {
    "etcd": "ETCD_VERSION",
    "kube-apiserver": "KUBERNETES_VERSION",
    "kube-controller-manager": "KUBERNETES_VERSION",
    "kube-scheduler": "KUBERNETES_VERSION",
    "kubectl": "KUBERNETES_VERSION",
    "kubelet": "KUBERNETES_VERSION",
    "kube-proxy": "KUBERNETES_VERSION",
    "pause": "KUBERNETES_VERSION",
    "kwok": "KWOK_VERSION",
    "helm": "HELM_VERSION",
    "coredns": "COREDNS_VERSION",
    "buildkitd": "BUILDKIT_VERSION",
    "buildctl": "BUILDKIT_VERSION",
    "buildx": "BUILDX_VERSION",
    "kueue": "KUEUE_VERSION",
}

_PIN_LINE = re.compile(r"^([A-Z0-9_]+)=(\S+)")


class BinaryMissingError(RuntimeError):
    """A control-plane binary has not been built yet."""


@dataclass(frozen=True, slots=True)
class Pins:
    """The versions pinned in cluster/versions.env."""

    kubernetes: str
    etcd: str
    kwok: str
    helm: str
    go_min: str
    coredns: str
    buildkit: str
    buildx: str
    kueue: str

    def version_of(self, binary_name: str) -> str:
        """The pinned version the named binary is built at."""
        key = BINARIES[binary_name]
        return {
            "KUBERNETES_VERSION": self.kubernetes,
            "ETCD_VERSION": self.etcd,
            "KWOK_VERSION": self.kwok,
            "HELM_VERSION": self.helm,
            "COREDNS_VERSION": self.coredns,
            "BUILDKIT_VERSION": self.buildkit,
            "BUILDX_VERSION": self.buildx,
            "KUEUE_VERSION": self.kueue,
        }[key]


def repo_root() -> Path:
    """The repository checkout this (editable) package lives in."""
    return Path(__file__).resolve().parents[3]


def versions_file() -> Path:
    return repo_root() / "cluster" / "versions.env"


def parse_versions(text: str) -> dict[str, str]:
    """KEY=VALUE lines of versions.env (comments and blank lines ignored)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _PIN_LINE.match(line.strip())
        if match:
            values[match.group(1)] = match.group(2)
    return values


@cache
def pins() -> Pins:
    values = parse_versions(versions_file().read_text())
    try:
        return Pins(
            kubernetes=values["KUBERNETES_VERSION"],
            etcd=values["ETCD_VERSION"],
            kwok=values["KWOK_VERSION"],
            helm=values["HELM_VERSION"],
            go_min=values["GO_MIN_VERSION"],
            coredns=values["COREDNS_VERSION"],
            buildkit=values["BUILDKIT_VERSION"],
            buildx=values["BUILDX_VERSION"],
            kueue=values["KUEUE_VERSION"],
        )
    except KeyError as missing:
        raise RuntimeError(f"{versions_file()}: no {missing.args[0]}=... line") from None


def bin_dir() -> Path:
    """The per-user binary cache (same formula as cluster/build.sh)."""
    explicit = os.environ.get(ENV_BIN_CACHE)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "hyperframe" / "bin"


def _expected(name: str) -> Path:
    return bin_dir() / f"{name}-{pins().version_of(name)}"


def missing_binaries() -> list[str]:
    """Names of the pinned binaries (and the KWOK Stage CRD, Kueue's manifests) not built yet."""
    missing = [name for name in BINARIES if not os.access(_expected(name), os.X_OK)]
    missing += [p.name for p in (_stage_crd_path(), _kueue_manifests_path()) if not p.is_file()]
    return missing


def binary(name: str) -> Path:
    """Path of a pinned binary; raises BinaryMissingError naming the fix if it is not built."""
    if name not in BINARIES:
        raise KeyError(f"unknown control-plane binary {name!r}; known: {', '.join(BINARIES)}")
    path = _expected(name)
    if not os.access(path, os.X_OK):
        raise BinaryMissingError(
            f"{name} {pins().version_of(name)} is not built (expected {path}); run `make cluster-build`"
        )
    return path


def kubectl() -> Path:
    return binary("kubectl")


def helm() -> Path:
    return binary("helm")


def etcd() -> Path:
    return binary("etcd")


def kwok() -> Path:
    return binary("kwok")


def _stage_crd_path() -> Path:
    return bin_dir() / f"kwok-{pins().kwok}-stage-crd.yaml"


def kwok_stage_crd() -> Path:
    """The Stage CRD copied out of the pinned kwok module by build.sh."""
    path = _stage_crd_path()
    if not path.is_file():
        raise BinaryMissingError(f"the KWOK Stage CRD is missing (expected {path}); run `make cluster-build`")
    return path


def _kueue_manifests_path() -> Path:
    return bin_dir() / f"kueue-{pins().kueue}-manifests.yaml"


def kueue_manifests() -> Path:
    """Kueue's CRDs and webhook configurations, copied out of the pinned kueue module by build.sh."""
    path = _kueue_manifests_path()
    if not path.is_file():
        raise BinaryMissingError(f"Kueue's manifests are missing (expected {path}); run `make cluster-build`")
    return path


def cluster_dir() -> Path:
    """State directory of the cluster started by hand: $HYPERFRAME_CLUSTER_DIR or <repo>/.cluster/dev."""
    explicit = os.environ.get(ENV_CLUSTER_DIR)
    if explicit:
        return Path(explicit).resolve()
    return repo_root() / ".cluster" / "dev"


def kubeconfig(state_dir: Path | None = None) -> Path:
    """The admin kubeconfig (client certificate in group system:masters) of a cluster."""
    return (state_dir or cluster_dir()) / "kubeconfig"
