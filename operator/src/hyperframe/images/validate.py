"""Parse and validate `images/matrix.yaml` into a `Matrix`.

Every problem is reported at once, each as `path.to.field: what is wrong; how to fix it`, with
the profile named in the path (`profiles.cuda12.torch.cuda: ...`). The rules that matter for a
working image:

- every upstream image is pinned by a well-formed digest (`sha256:` + 64 lowercase hex);
- the CUDA profiles use the `base` flavour of nvidia/cuda (torch wheels bring their own CUDA
  libraries, so `runtime`/`cudnn` would ship CUDA twice) for the declared CUDA version and OS;
- torch's CUDA has the base image's CUDA major and a minor no newer than it, because the base
  image's NVIDIA_REQUIRE_CUDA is what the container runtime checks against the node's driver;
- the torch variant label agrees with torch's CUDA version (`cu129` <-> `12.9`);
- a CUDA profile records the NCCL its torch wheel ships; the CPU profile records none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hyperframe.images.matrix import (
    BaseImage,
    DebootstrapBase,
    ImageUser,
    Matrix,
    OperatorPin,
    Profile,
    TorchPin,
)

__all__ = ["MatrixError", "parse_matrix"]

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
SEMVER3_RE = re.compile(r"^\d+\.\d+\.\d+$")
MAJOR_MINOR_RE = re.compile(r"^\d+\.\d+$")
VARIANT_RE = re.compile(r"^(cpu|cu(\d{2})(\d))$")
DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DEB_PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
DEB_VERSION_RE = re.compile(r"^[0-9][A-Za-z0-9.+~:-]*$")
IMAGE_TAG_RE = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
REGISTRY_RE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
SUPPORTED_OS = ("ubuntu24.04", "ubuntu22.04", "debian12")
SCHEMA_VERSION = 1


class MatrixError(ValueError):
    """The matrix is invalid; `problems` lists every `field: problem; fix` line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("images/matrix.yaml is invalid:\n" + "\n".join(f"  - {p}" for p in problems))


class _Fields:
    """Reads typed fields of one mapping, recording a problem (and returning None) on error."""

    def __init__(self, path: str, data: object, problems: list[str], known: tuple[str, ...]) -> None:
        self.path = path
        self.problems = problems
        self.data: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        if not isinstance(data, Mapping):
            self.fail("", f"must be a mapping, got {type(data).__name__}")
            return
        for key in self.data:
            if key not in known:
                self.fail(str(key), f"unknown field; known fields are {', '.join(known)}")

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if key else self.path

    def fail(self, key: str, message: str) -> None:
        self.problems.append(f"{self.where(key)}: {message}")

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def text(self, key: str, *, pattern: re.Pattern[str] | None = None, hint: str = "") -> str | None:
        if key not in self.data or self.data[key] is None:
            self.fail(key, f"is required{'; ' + hint if hint else ''}")
            return None
        value = self.data[key]
        if not isinstance(value, str):
            self.fail(
                key, f"must be a quoted string, got {type(value).__name__} {value!r}; write it in quotes"
            )
            return None
        if pattern is not None and not pattern.match(value):
            self.fail(key, f"{value!r} is malformed{'; ' + hint if hint else ''}")
            return None
        return value

    def optional_text(
        self, key: str, *, pattern: re.Pattern[str] | None = None, hint: str = ""
    ) -> str | None:
        return self.text(key, pattern=pattern, hint=hint) if self.has(key) else None

    def flag(self, key: str) -> bool:
        value = self.data.get(key, False)
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, got {value!r}")
            return False
        return value


def _base_image(path: str, data: object, problems: list[str]) -> BaseImage | None:
    f = _Fields(path, data, problems, ("image", "digest", "source"))
    image = f.text(
        "image", pattern=IMAGE_TAG_RE, hint="write repository:tag, e.g. nvidia/cuda:13.0.3-base-ubuntu24.04"
    )
    if image is not None and "@" in image:
        f.fail("image", "must not carry a digest; put it in the digest field")
        image = None
    digest = f.text(
        "digest",
        pattern=DIGEST_RE,
        hint="write sha256: and 64 lowercase hex digits; refresh it with images/build.sh --resolve",
    )
    source = f.text("source", hint="say where the digest was read")
    if image is None or digest is None or source is None:
        return None
    return BaseImage(image=image, digest=digest, source=source)


DEBIAN_SUITES = ("bookworm", "trixie")
DEBOOTSTRAP_VARIANTS = ("minbase", "buildd")


def _debootstrap_base(path: str, data: object, problems: list[str]) -> DebootstrapBase | None:
    before = len(problems)
    f = _Fields(path, data, problems, ("suite", "variant", "include", "mirror"))
    suite = f.text("suite", hint=f"one of {', '.join(DEBIAN_SUITES)}")
    if suite is not None and suite not in DEBIAN_SUITES:
        f.fail("suite", f"{suite!r} is not supported; use one of {', '.join(DEBIAN_SUITES)}")
    variant = f.text("variant", hint=f"one of {', '.join(DEBOOTSTRAP_VARIANTS)}")
    if variant is not None and variant not in DEBOOTSTRAP_VARIANTS:
        f.fail("variant", f"{variant!r} is not supported; use one of {', '.join(DEBOOTSTRAP_VARIANTS)}")
    include = _package_list(f, "include")
    mirror = f.text(
        "mirror",
        pattern=re.compile(r"^https?://\S+$"),
        hint="write the archive URL apt uses on the build machine, e.g. http://deb.debian.org/debian",
    )
    if len(problems) > before or suite is None or variant is None or include is None or mirror is None:
        return None
    return DebootstrapBase(suite=suite, variant=variant, include=include, mirror=mirror)


def _torch(path: str, data: object, problems: list[str]) -> TorchPin | None:
    before = len(problems)
    f = _Fields(path, data, problems, ("version", "variant", "cuda", "index_url", "nccl", "nccl_source"))
    version = f.text("version", pattern=SEMVER3_RE, hint="write the exact release, e.g. 2.13.0")
    variant = f.text("variant", pattern=VARIANT_RE, hint="write cpu or cu<major><minor>, e.g. cu130")
    index_url = f.text(
        "index_url", pattern=re.compile(r"^https://\S+$"), hint="write the https URL of the index"
    )
    cuda = f.optional_text("cuda", pattern=MAJOR_MINOR_RE, hint='write torch.version.cuda, e.g. "13.0"')
    nccl = f.optional_text("nccl", pattern=SEMVER3_RE, hint="write the nvidia-nccl-cu* version, e.g. 2.29.7")
    nccl_source = f.optional_text("nccl_source")
    match = VARIANT_RE.match(variant or "")
    if match is not None and variant == "cpu":
        for key in ("cuda", "nccl", "nccl_source"):
            if f.has(key):
                f.fail(key, "must be absent for the cpu variant (the CPU build has no CUDA or NCCL)")
    elif match is not None:
        implied = f"{int(match.group(2))}.{match.group(3)}"
        if not f.has("cuda"):
            f.fail("cuda", f'is required for variant {variant}; write "{implied}"')
        elif cuda is not None and cuda != implied:
            f.fail(
                "cuda", f"{cuda} does not match variant {variant} (which is CUDA {implied}); fix one of them"
            )
        for key in ("nccl", "nccl_source"):
            if not f.has(key):
                f.fail(
                    key,
                    f"is required for variant {variant}; read it from the wheel's nvidia-nccl-cu* dependency",
                )
    if len(problems) > before or version is None or variant is None or index_url is None:
        return None
    return TorchPin(
        version=version, variant=variant, cuda=cuda, index_url=index_url, nccl=nccl, nccl_source=nccl_source
    )


def _package_map(f: _Fields, key: str) -> tuple[tuple[str, str], ...] | None:
    raw = f.data.get(key)
    if raw is None:
        f.fail(key, "is required (use {} for none)")
        return None
    if not isinstance(raw, Mapping):
        f.fail(key, "must map each package to its exact version")
        return None
    pairs: list[tuple[str, str]] = []
    for name, version in raw.items():
        if not isinstance(name, str) or not DEB_PACKAGE_RE.match(name):
            f.fail(f"{key}.{name}", "is not a valid package name")
        elif not isinstance(version, str) or not DEB_VERSION_RE.match(version):
            f.fail(f"{key}.{name}", f"needs an exact version string (got {version!r}), e.g. 50.0-2ubuntu0.2")
        else:
            pairs.append((name, version))
    return tuple(pairs) if len(pairs) == len(raw) else None


def _package_list(f: _Fields, key: str) -> tuple[str, ...] | None:
    raw = f.data.get(key)
    if not isinstance(raw, list) or not all(isinstance(n, str) and DEB_PACKAGE_RE.match(n) for n in raw):
        f.fail(key, "must be a list of package names (use [] for none)")
        return None
    return tuple(raw)


def _check_cuda(
    f: _Fields, os_name: str, cuda: str | None, base: BaseImage | DebootstrapBase, torch: TorchPin
) -> bool:
    """The cross-field rules between the base image, its CUDA and torch's CUDA."""
    ok = True
    if isinstance(base, DebootstrapBase):
        # A bare Debian root filesystem: no CUDA of its own, so torch's wheels (which bring their
        # CUDA libraries) run on the CPU here; such a profile is for the development cluster.
        if cuda is not None:
            f.fail("cuda", "must be absent for a debootstrap base (it ships no CUDA); drop it")
            ok = False
        if os_name != "debian12":
            f.fail("os", f"a debootstrap base is Debian; write debian12, not {os_name!r}")
            ok = False
        return ok
    repo, _, tag = base.image.partition(":")
    if torch.cuda is None:
        if cuda is not None:
            f.fail(
                "cuda", f"is set, but torch variant {torch.variant} has no CUDA; drop it or use a cu* torch"
            )
            ok = False
        if repo == "nvidia/cuda":
            f.fail("base.image", "a CPU profile must not start from nvidia/cuda; use a python slim image")
            ok = False
        return ok
    if cuda is None:
        f.fail(
            "cuda",
            f'is required because torch variant {torch.variant} is a CUDA build; write e.g. "{torch.cuda}.0"',
        )
        return False
    if repo != "nvidia/cuda":
        f.fail(
            "base.image", f"{base.image} is not an nvidia/cuda image; a CUDA profile starts from nvidia/cuda"
        )
        return False
    expected_tag = f"{cuda}-base-{os_name}"
    if tag != expected_tag:
        flavour = tag.split("-")[1] if tag.count("-") >= 2 else tag
        why = (
            f"the {flavour!r} flavour ships CUDA libraries that torch's wheels already bring; "
            if flavour in ("runtime", "devel", "cudnn")
            else ""
        )
        f.fail("base.image", f"tag {tag!r} should be {expected_tag!r} ({why}it must match cuda and os)")
        ok = False
    base_major, base_minor = (int(x) for x in cuda.split(".")[:2])
    torch_major, torch_minor = (int(x) for x in torch.cuda.split("."))
    if torch_major != base_major:
        f.fail(
            "torch.cuda",
            f"torch CUDA {torch.cuda} does not match the base image CUDA {cuda} (major {torch_major} != {base_major}); "
            f"use a torch build for CUDA {base_major} or an nvidia/cuda:{torch.cuda}.x base",
        )
        ok = False
    elif torch_minor > base_minor:
        f.fail(
            "torch.cuda",
            f"torch CUDA {torch.cuda} is newer than the base image CUDA {cuda}; the base image's driver "
            f"requirement would admit nodes too old for torch; raise cuda to {torch.cuda}.x or pick an older torch build",
        )
        ok = False
    return ok


def _profile(name: object, data: object, problems: list[str]) -> Profile | None:
    path = f"profiles.{name}"
    if not isinstance(name, str) or not DNS_LABEL_RE.match(name):
        problems.append(f"{path}: the profile name must be a DNS-1123 label (it names a HyperFrameRuntime)")
        return None
    before = len(problems)
    f = _Fields(
        path,
        data,
        problems,
        (
            "description",
            "default",
            "release",
            "os",
            "cuda",
            "python",
            "base",
            "os_packages",
            "rdma_packages",
            "torch",
        ),
    )
    description = f.text("description", hint="say who the profile is for")
    default = f.flag("default")
    release = f.flag("release") if f.has("release") else True
    os_name = f.text("os", hint=f"one of {', '.join(SUPPORTED_OS)}")
    if os_name is not None and os_name not in SUPPORTED_OS:
        f.fail("os", f"{os_name!r} is not supported; use one of {', '.join(SUPPORTED_OS)}")
    cuda = f.optional_text("cuda", pattern=SEMVER3_RE, hint="write the base image CUDA version, e.g. 13.0.3")
    python = f.text("python", pattern=MAJOR_MINOR_RE, hint='write major.minor in quotes, e.g. "3.12"')
    base: BaseImage | DebootstrapBase | None = None
    torch = None
    raw_base = f.data.get("base")
    if isinstance(raw_base, Mapping) and "debootstrap" in raw_base:
        if len(raw_base) != 1:
            f.fail("base", "a debootstrap base has only the debootstrap: mapping (no image or digest)")
        base = _debootstrap_base(f"{path}.base.debootstrap", raw_base["debootstrap"], problems)
        if base is not None and release:
            f.fail(
                "release",
                "must be false for a debootstrap base: such an image is built for the local cluster only",
            )
    elif "base" in f.data:
        base = _base_image(f"{path}.base", f.data["base"], problems)
    else:
        f.fail("base", "is required: the upstream image and its digest")
    if "torch" in f.data:
        torch = _torch(f"{path}.torch", f.data["torch"], problems)
    else:
        f.fail("torch", "is required: version, variant, index_url (and cuda, nccl for CUDA builds)")
    os_packages = _package_list(f, "os_packages")
    rdma_packages = _package_map(f, "rdma_packages")
    if torch is not None and torch.cuda is None and rdma_packages:
        f.fail("rdma_packages", "must be {} for a CPU profile (there is no NCCL to use them)")
    if len(problems) > before:
        return None
    assert description is not None and os_name is not None and python is not None
    assert base is not None and torch is not None and os_packages is not None and rdma_packages is not None
    if not _check_cuda(f, os_name, cuda, base, torch):
        return None
    return Profile(
        name=name,
        description=description,
        default=default,
        os=os_name,
        cuda=cuda,
        python=python,
        base=base,
        os_packages=os_packages,
        rdma_packages=rdma_packages,
        torch=torch,
        release=release,
    )


def parse_matrix(data: object, *, version: str) -> Matrix:
    """Validate the loaded YAML of the matrix; `version` is the `hyperframe` package version."""
    problems: list[str] = []
    top = _Fields(
        "matrix", data, problems, ("schema_version", "registry", "image_user", "operator", "profiles")
    )
    if top.data.get("schema_version") != SCHEMA_VERSION:
        top.fail("schema_version", f"must be {SCHEMA_VERSION}")
    registry = top.text("registry", pattern=REGISTRY_RE, hint="write host/namespace, e.g. ghcr.io/acme")
    user_f = _Fields("image_user", top.data.get("image_user"), problems, ("name", "uid"))
    user_name = user_f.text("name", pattern=re.compile(r"^[a-z_][a-z0-9_-]{0,31}$"), hint="a POSIX user name")
    uid = user_f.data.get("uid")
    if not isinstance(uid, int) or isinstance(uid, bool) or not 1000 <= uid <= 65533:
        user_f.fail("uid", f"must be an integer in 1000..65533 (a non-root, non-system uid), got {uid!r}")
        uid = None
    op_f = _Fields("operator", top.data.get("operator"), problems, ("python", "base"))
    op_python = op_f.text("python", pattern=MAJOR_MINOR_RE, hint='write major.minor in quotes, e.g. "3.12"')
    op_base = _base_image("operator.base", op_f.data.get("base"), problems)

    raw_profiles = top.data.get("profiles")
    profiles: list[Profile] = []
    if not isinstance(raw_profiles, Mapping) or not raw_profiles:
        top.fail("profiles", "must map at least one profile name to its pins")
        raw_profiles = {}
    for name, body in raw_profiles.items():
        profile = _profile(name, body, problems)
        if profile is not None:
            profiles.append(profile)

    for p in profiles:
        if p.default and not p.release:
            problems.append(f"profiles.{p.name}.default: a profile with release: false cannot be the default")
    defaults = [p.name for p in profiles if p.default]
    if len(profiles) == len(raw_profiles) and len(defaults) != 1:
        top.fail(
            "profiles",
            f"exactly one profile must have default: true, found {len(defaults)} ({', '.join(defaults)})",
        )
    seen: dict[tuple[str, str, str], str] = {}
    for p in profiles:
        key = (p.torch.version, p.torch.variant, p.python)
        if key in seen:
            problems.append(
                f"profiles.{p.name}.torch: same torch {p.torch.local_version} and python {p.python} as profile "
                f"{seen[key]}, so both would get the same framework image tag; merge or change one"
            )
        seen[key] = p.name

    if problems:
        raise MatrixError(problems)
    assert registry is not None and user_name is not None and uid is not None
    assert op_python is not None and op_base is not None
    return Matrix(
        version=version,
        registry=registry,
        image_user=ImageUser(name=user_name, uid=uid),
        operator=OperatorPin(python=op_python, base=op_base),
        profiles=tuple(profiles),
    )
