"""Parse and validate `images/matrix.yaml` into a `Matrix`.

The fields are read by the job API's codec (:func:`hyperframe.api.codec.parse`) from the rules
declared on them (:mod:`hyperframe.images.matrix`), so a problem reads like the job API's:
`path: problem: fix`, with the profile named in the path (`profiles.cuda12.torch.cuda: ...`),
and every problem is reported at once. This module adds the rules between fields that matter
for a working image:

- the CUDA profiles use the `base` flavour of nvidia/cuda (torch wheels bring their own CUDA
  libraries, so `runtime`/`cudnn` would ship CUDA twice) for the declared CUDA version and OS;
- torch's CUDA has the base image's CUDA major and a minor no newer than it, because the base
  image's NVIDIA_REQUIRE_CUDA is what the container runtime checks against the node's driver;
- the torch variant label agrees with torch's CUDA version (`cu129` <-> `12.9`);
- a CUDA profile records the NCCL its torch wheel ships; the CPU profile records none;
- one profile is the default, and no two profiles would get the same framework image tag.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from hyperframe.api.codec import parse
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.fields import Format, value_rules
from hyperframe.images.matrix import (
    DEB_PACKAGE,
    PYTHON,
    RELEASE,
    BaseImage,
    DebootstrapBase,
    ImageUser,
    Matrix,
    OperatorPin,
    Profile,
    TorchPin,
)

__all__ = ["MatrixError", "parse_matrix"]

SCHEMA_VERSION = 1
_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_VARIANT: Final = re.compile(r"^cu(\d{2})(\d)$")

T = TypeVar("T")


class MatrixError(ValueError):
    """The matrix is invalid; `problems` lists every `path: problem: fix` line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("images/matrix.yaml is invalid:\n" + "\n".join(f"  - {p}" for p in problems))


_REGISTRY: Final = Format(
    r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$",
    "host/namespace",
    "ghcr.io/acme",
)
_BASE_CUDA: Final = Format(RELEASE.pattern, "the base image's CUDA version major.minor.patch", "13.0.3")
_DEB_VERSION: Final = Format(r"^[0-9][A-Za-z0-9.+~:-]*$", "an exact version string", "50.0-2ubuntu0.2")


@dataclass(frozen=True, slots=True, kw_only=True)
class _ProfileDoc:
    """One profile as written (its name is the key above it); see `Profile`."""

    description: str
    default: bool = False
    release: bool = True
    os: Literal["ubuntu24.04", "ubuntu22.04", "debian12"]
    cuda: str | None = field(default=None, metadata=value_rules(fmt=_BASE_CUDA))
    python: str = field(metadata=value_rules(fmt=PYTHON))
    base: Mapping[str, Any]
    """image, digest and source; or debootstrap: (each read by `_base`)."""
    os_packages: tuple[str, ...] = field(metadata=value_rules(fmt=DEB_PACKAGE))
    rdma_packages: Mapping[str, str] = field(metadata=value_rules(fmt=_DEB_VERSION))
    torch: TorchPin


@dataclass(frozen=True, slots=True, kw_only=True)
class _Debootstrap:
    debootstrap: DebootstrapBase


@dataclass(frozen=True, slots=True, kw_only=True)
class _MatrixDoc:
    schema_version: int = field(metadata=value_rules(minimum=SCHEMA_VERSION, maximum=SCHEMA_VERSION))
    registry: str = field(metadata=value_rules(fmt=_REGISTRY))
    """Where `make images` pushes."""
    image_user: ImageUser
    operator: OperatorPin
    profiles: Mapping[str, Any]
    """Profile name -> its pins (each read by `_profile`, so that every profile's problems show)."""


def _parsed(cls: type[T], data: object, path: str, errors: list[FieldError]) -> T | None:
    try:
        return parse(cls, data, path=path)
    except SpecError as exc:
        errors.extend(exc.errors)
        return None


def _base(raw: object, path: str, errors: list[FieldError]) -> BaseImage | DebootstrapBase | None:
    if isinstance(raw, Mapping) and "debootstrap" in raw:
        doc = _parsed(_Debootstrap, raw, path, errors)
        return None if doc is None else doc.debootstrap
    return _parsed(BaseImage, raw, path, errors)


def _torch_rules(torch: TorchPin) -> Iterator[FieldError]:
    """What the torch variant says about torch's CUDA and NCCL fields."""
    match = _VARIANT.match(torch.variant)
    if match is None:  # cpu
        for key, value in (("cuda", torch.cuda), ("nccl", torch.nccl), ("nccl_source", torch.nccl_source)):
            if value is not None:
                yield FieldError(
                    f"torch.{key}",
                    "must be absent for the cpu variant",
                    "the CPU build has no CUDA or NCCL; drop it",
                )
        return
    implied = f"{int(match.group(1))}.{match.group(2)}"
    if torch.cuda is None:
        yield FieldError("torch.cuda", f"is required for variant {torch.variant}", f'write "{implied}"')
    elif torch.cuda != implied:
        yield FieldError(
            "torch.cuda",
            f"{torch.cuda} does not match variant {torch.variant} (which is CUDA {implied})",
            "fix one of them",
        )
    for key, value in (("nccl", torch.nccl), ("nccl_source", torch.nccl_source)):
        if value is None:
            yield FieldError(
                f"torch.{key}",
                f"is required for variant {torch.variant}",
                "read it from the wheel's nvidia-nccl-cu* dependency",
            )


def _profile_rules(doc: _ProfileDoc, base: BaseImage | DebootstrapBase) -> Iterator[FieldError]:
    """The rules between a profile's own fields (paths relative to the profile)."""
    yield from _torch_rules(doc.torch)
    for name in doc.rdma_packages:
        if not DEB_PACKAGE.matches(name):
            yield FieldError(f"rdma_packages.{name}", "is not a Debian package name", "fix the name")
    if doc.torch.cuda is None and doc.rdma_packages:
        yield FieldError(
            "rdma_packages", "must be {} for a CPU profile", "drop them: there is no NCCL to use them"
        )
    if doc.default and not doc.release:
        yield FieldError(
            "default",
            "a profile that is not released cannot be the default",
            "make another profile the default or set release: true",
        )
    if isinstance(base, DebootstrapBase):
        # A bare Debian root filesystem: no CUDA of its own, so torch's wheels (which bring their
        # CUDA libraries) run on the CPU here; such a profile is for the development cluster.
        if doc.release:
            yield FieldError(
                "release",
                "must be false for a debootstrap base",
                "such an image is built for the local cluster only; set release: false",
            )
        if doc.cuda is not None:
            yield FieldError("cuda", "must be absent for a debootstrap base (it ships no CUDA)", "drop it")
        if doc.os != "debian12":
            yield FieldError("os", f"a debootstrap base is Debian, not {doc.os!r}", "write debian12")


def _cuda_rules(doc: _ProfileDoc, base: BaseImage) -> Iterator[FieldError]:
    """The rules between the base image, its CUDA and torch's CUDA."""
    cuda, torch = doc.cuda, doc.torch
    repo, _, tag = base.image.partition(":")
    if torch.cuda is None:
        if cuda is not None:
            yield FieldError(
                "cuda", f"is set, but torch variant {torch.variant} has no CUDA", "drop it or use a cu* torch"
            )
        if repo == "nvidia/cuda":
            yield FieldError(
                "base.image", "a CPU profile must not start from nvidia/cuda", "use a python slim image"
            )
        return
    if cuda is None:
        yield FieldError(
            "cuda",
            f"is required because torch variant {torch.variant} is a CUDA build",
            f'write e.g. "{torch.cuda}.0"',
        )
        return
    if repo != "nvidia/cuda":
        yield FieldError(
            "base.image",
            f"{base.image} is not an nvidia/cuda image",
            "a CUDA profile starts from nvidia/cuda",
        )
        return
    expected_tag = f"{cuda}-base-{doc.os}"
    if tag != expected_tag:
        flavour = tag.split("-")[1] if tag.count("-") >= 2 else tag
        why = (
            f"the {flavour!r} flavour ships CUDA libraries that torch's wheels already bring; "
            if flavour in ("runtime", "devel", "cudnn")
            else ""
        )
        yield FieldError(
            "base.image", f"tag {tag!r} should be {expected_tag!r}", f"{why}it must match cuda and os"
        )
    base_major, base_minor = (int(x) for x in cuda.split(".")[:2])
    torch_major, torch_minor = (int(x) for x in torch.cuda.split("."))
    if torch_major != base_major:
        yield FieldError(
            "torch.cuda",
            f"torch CUDA {torch.cuda} does not match the base image CUDA {cuda} (major {torch_major} != {base_major})",
            f"use a torch build for CUDA {base_major} or an nvidia/cuda:{torch.cuda}.x base",
        )
    elif torch_minor > base_minor:
        yield FieldError(
            "torch.cuda",
            f"torch CUDA {torch.cuda} is newer than the base image CUDA {cuda}; the base image's driver "
            "requirement would admit nodes too old for torch",
            f"raise cuda to {torch.cuda}.x or pick an older torch build",
        )


def _profile(name: object, body: object, errors: list[FieldError]) -> Profile | None:
    path = f"profiles.{name}"
    if not isinstance(name, str) or not _DNS_LABEL.match(name):
        errors.append(FieldError(path, "is not a DNS-1123 label", "rename it: it names a HyperFrameRuntime"))
        return None
    before = len(errors)
    doc = _parsed(_ProfileDoc, body, path, errors)
    raw_base = body.get("base") if isinstance(body, Mapping) else None
    base = _base(raw_base, f"{path}.base", errors) if isinstance(raw_base, Mapping) else None
    if doc is None or base is None:
        return None
    rules = list(_profile_rules(doc, base))
    if not rules and isinstance(base, BaseImage):
        rules = list(_cuda_rules(doc, base))
    errors.extend(FieldError(f"{path}.{e.path}", e.problem, e.fix) for e in rules)
    if len(errors) > before:
        return None
    return Profile(
        name=name,
        description=doc.description,
        default=doc.default,
        os=doc.os,
        cuda=doc.cuda,
        python=doc.python,
        base=base,
        os_packages=doc.os_packages,
        rdma_packages=tuple(doc.rdma_packages.items()),
        torch=doc.torch,
        release=doc.release,
    )


def _across_profiles(profiles: list[Profile], complete: bool) -> Iterator[FieldError]:
    """One default (when every profile parsed), and one framework image tag per profile."""
    defaults = [p.name for p in profiles if p.default]
    if complete and len(defaults) != 1:
        yield FieldError(
            "profiles",
            f"exactly one profile must be the default, found {len(defaults)} ({', '.join(defaults)})",
            "set default: true on one profile only",
        )
    seen: dict[tuple[str, str, str], str] = {}
    for p in profiles:
        key = (p.torch.version, p.torch.variant, p.python)
        if key in seen:
            yield FieldError(
                f"profiles.{p.name}.torch",
                f"same torch {p.torch.local_version} and python {p.python} as profile {seen[key]}, so both "
                "would get the same framework image tag",
                "merge or change one",
            )
        seen[key] = p.name


def parse_matrix(data: object, *, version: str) -> Matrix:
    """Validate the loaded YAML of the matrix; `version` is the `hyperframe` package version."""
    errors: list[FieldError] = []
    top = _parsed(_MatrixDoc, data, "", errors)
    raw = data.get("profiles") if isinstance(data, Mapping) else None
    raw_profiles: Mapping[Any, Any] = raw if isinstance(raw, Mapping) else {}
    if top is not None and not raw_profiles:
        errors.append(FieldError("profiles", "is empty", "map at least one profile name to its pins"))
    profiles = [p for name, body in raw_profiles.items() if (p := _profile(name, body, errors)) is not None]
    errors.extend(_across_profiles(profiles, complete=0 < len(profiles) == len(raw_profiles)))
    if errors or top is None:
        raise MatrixError([str(e) for e in errors])
    return Matrix(
        version=version,
        registry=top.registry,
        image_user=top.image_user,
        operator=top.operator,
        profiles=tuple(profiles),
    )
