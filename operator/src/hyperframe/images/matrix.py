"""The pin matrix as typed, immutable data, and the image references derived from it.

`images/matrix.yaml` is parsed and validated by `hyperframe.images.validate`; this module holds
the result, the value rules of each field (declared with it, as the job API's fields are, and
applied by the same codec) and the naming rules (tags, labels), so that the bake file, the runtime
profiles and the docs all derive an image name the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from hyperframe.api.fields import Format, value_rules

__all__ = [
    "DIGEST",
    "RELEASE",
    "BaseImage",
    "DebootstrapBase",
    "ImageUser",
    "Matrix",
    "OperatorPin",
    "Profile",
    "TorchPin",
]

_SEMVER3: Final = r"^\d+\.\d+\.\d+$"
_MAJOR_MINOR: Final = r"^\d+\.\d+$"
DIGEST: Final = Format(
    r"^sha256:[0-9a-f]{64}$",
    "a sha256 digest of 64 lowercase hex digits",
    "sha256:" + "0" * 64,
)
RELEASE: Final = Format(_SEMVER3, "an exact release major.minor.patch", "2.13.0")
IMAGE_TAG: Final = Format(
    r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$",
    "repository:tag, no digest (that has its own field)",
    "nvidia/cuda:13.0.3-base-ubuntu24.04",
)
PYTHON: Final = Format(_MAJOR_MINOR, "major.minor in quotes", '"3.12"')
DEB_PACKAGE: Final = Format(r"^[a-z0-9][a-z0-9+.-]+$", "a Debian package name", "python3")
_MIRROR: Final = Format(r"^https?://\S+$", "the archive URL apt uses here", "http://deb.debian.org/debian")
_VARIANT: Final = Format(r"^(cpu|cu\d{2}\d)$", "cpu or cu<major><minor>", "cu130")
_TORCH_CUDA: Final = Format(_MAJOR_MINOR, "torch.version.cuda in quotes", '"13.0"')
_INDEX_URL: Final = Format(r"^https://\S+$", "the https URL of the index", "https://pypi.org/simple")
_NCCL: Final = Format(_SEMVER3, "the nvidia-nccl-cu* version", "2.29.7")


@dataclass(frozen=True, kw_only=True, slots=True)
class BaseImage:
    """An upstream image pinned by digest."""

    image: str = field(metadata=value_rules(fmt=IMAGE_TAG))
    """`repository:tag`, for readers; the digest is what gets pulled."""
    digest: str = field(metadata=value_rules(fmt=DIGEST))
    """The multi-platform index digest."""
    source: str
    """Where the digest was read, so a reviewer can tell a verified pin from a copied one."""

    @property
    def pinned(self) -> str:
        """`repository:tag@sha256:...`: the reference every FROM uses."""
        return f"{self.image}@{self.digest}"


@dataclass(frozen=True, kw_only=True, slots=True)
class DebootstrapBase:
    """A Debian root filesystem that `make images` makes with debootstrap from Debian's archive.

    It is not pulled, so it has no registry digest: the build records the command below and the
    sha256 of the root filesystem tarball it produced (the image's base.name and base.digest labels).
    """

    suite: Literal["bookworm", "trixie"]
    """The Debian release."""
    variant: Literal["minbase", "buildd"]
    """debootstrap's --variant (`minbase`: essential and apt only)."""
    include: tuple[str, ...] = field(metadata=value_rules(fmt=DEB_PACKAGE))
    """Packages added to the root filesystem (Python and pip, which the operator image needs)."""
    mirror: str = field(metadata=value_rules(fmt=_MIRROR))
    """The archive, the same one apt uses on the build machine."""

    @property
    def command(self) -> str:
        """The exact debootstrap command line, recorded in the image labels."""
        include = f" --include={','.join(self.include)}" if self.include else ""
        return f"debootstrap --variant={self.variant}{include} {self.suite} ROOTFS {self.mirror}"


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchPin:
    """The torch build of a profile and what it brings with it."""

    version: str = field(metadata=value_rules(fmt=RELEASE))
    """The public version, e.g. `2.13.0`."""
    variant: str = field(metadata=value_rules(fmt=_VARIANT))
    """The local version label: `cu130`, `cu129` or `cpu`."""
    cuda: str | None = field(default=None, metadata=value_rules(fmt=_TORCH_CUDA))
    """`torch.version.cuda` (`major.minor`), None for the CPU build."""
    index_url: str = field(metadata=value_rules(fmt=_INDEX_URL))
    """The package index that serves this build."""
    nccl: str | None = field(default=None, metadata=value_rules(fmt=_NCCL))
    """The NCCL version the wheel depends on (nvidia-nccl-cu*), None for the CPU build."""
    nccl_source: str | None = None
    """Where the NCCL version was read."""

    @property
    def local_version(self) -> str:
        """What `torch.__version__` reports in the image, e.g. `2.13.0+cu130`."""
        return f"{self.version}+{self.variant}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """One supported combination: a base image, a Python and a torch build."""

    name: str
    """Also the name of the generated HyperFrameRuntime (a DNS-1123 label)."""
    description: str
    default: bool
    os: str
    """`ubuntu24.04` or `debian12`: the OS of the base image."""
    cuda: str | None
    """The base image's CUDA version (`major.minor.patch`), None for the CPU profile."""
    python: str
    """`major.minor`, checked against the base image's python3 at build time."""
    base: BaseImage | DebootstrapBase
    os_packages: tuple[str, ...]
    """Extra OS packages that float with the OS archive (Python on Ubuntu)."""
    rdma_packages: tuple[tuple[str, str], ...]
    """(package, exact version) pairs for the RDMA user-space stack."""
    torch: TorchPin
    release: bool = True
    """False for a profile built only for the development cluster (`make images` pushes it to the
    cluster's registry): it is not published, not a default runtime of the chart."""

    @property
    def nccl(self) -> str | None:
        return self.torch.nccl

    @property
    def from_wheelhouse(self) -> bool:
        """A debootstrap profile is built where nothing can be pulled: its pip steps read only the
        project's wheelhouse (filled from PyPI by `make venv`), mounted into the build."""
        return isinstance(self.base, DebootstrapBase)


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageUser:
    name: str = field(
        metadata=value_rules(fmt=Format(r"^[a-z_][a-z0-9_-]{0,31}$", "a POSIX user name", "hyperframe"))
    )
    uid: int = field(metadata=value_rules(minimum=1000, maximum=65533))
    """Not root, not a system user."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OperatorPin:
    python: str = field(metadata=value_rules(fmt=PYTHON))
    base: BaseImage


@dataclass(frozen=True, kw_only=True, slots=True)
class Matrix:
    """The whole matrix plus the release version (the `hyperframe` package version)."""

    version: str
    registry: str
    image_user: ImageUser
    operator: OperatorPin
    profiles: tuple[Profile, ...]

    @property
    def default_profile(self) -> Profile:
        return next(p for p in self.profiles if p.default)

    @property
    def released_profiles(self) -> tuple[Profile, ...]:
        """The profiles that are published and installed by the chart as default runtimes."""
        return tuple(p for p in self.profiles if p.release)

    @property
    def local_profiles(self) -> tuple[Profile, ...]:
        """The profiles `make images` builds here and pushes to the development cluster."""
        return tuple(p for p in self.profiles if not p.release)

    def profile(self, name: str) -> Profile:
        for p in self.profiles:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.profiles)
        raise KeyError(f"no profile {name!r} in the pin matrix (known: {known})")

    # --- image naming: the one place tags are made ---------------------------------------------

    def base_repository(self, registry: str | None = None) -> str:
        return f"{registry or self.registry}/hyperframe-base"

    def framework_repository(self, registry: str | None = None) -> str:
        return f"{registry or self.registry}/hyperframe-framework"

    def operator_repository(self, registry: str | None = None) -> str:
        return f"{registry or self.registry}/hyperframe-operator"

    def base_tag(self, profile: Profile) -> str:
        """E.g. `0.1.0-cuda13.0.3-ubuntu24.04-py3.12`, `0.1.0-debian12-py3.12`."""
        cuda = f"cuda{profile.cuda}-" if profile.cuda else ""
        return f"{self.version}-{cuda}{profile.os}-py{profile.python}"

    def framework_tag(self, profile: Profile) -> str:
        """E.g. `0.1.0-torch2.13.0-cu130-py3.12`."""
        return f"{self.version}-torch{profile.torch.version}-{profile.torch.variant}-py{profile.python}"

    def base_image(self, profile: Profile, registry: str | None = None) -> str:
        return f"{self.base_repository(registry)}:{self.base_tag(profile)}"

    def framework_image(self, profile: Profile, registry: str | None = None) -> str:
        return f"{self.framework_repository(registry)}:{self.framework_tag(profile)}"

    def operator_tag(self, profile: Profile | None = None) -> str:
        """The release version; `0.1.0-local` for the operator built on a local profile's base."""
        return self.version if profile is None else f"{self.version}-{profile.name}"

    def operator_image(self, registry: str | None = None, profile: Profile | None = None) -> str:
        return f"{self.operator_repository(registry)}:{self.operator_tag(profile)}"
