"""The pin matrix: the shipped matrix is valid, and broken matrices are rejected with messages
that name the profile and the field (digest format, CUDA compatibility, missing fields, ...)."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hyperframe.images.matrix import DebootstrapBase
from hyperframe.images.repo import MATRIX_FILE, load_matrix, release_version
from hyperframe.images.validate import MatrixError, parse_matrix

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def raw() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / MATRIX_FILE).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def problems_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(MatrixError) as caught:
        parse_matrix(data, version="0.1.0")
    return caught.value.problems


def test_shipped_matrix_is_valid_with_a_cuda12_a_cuda13_and_a_cpu_line() -> None:
    m = load_matrix(ROOT)
    cuda_majors = {p.cuda.split(".")[0] for p in m.profiles if p.cuda}
    assert {"12", "13"} <= cuda_majors
    assert any(p.cuda is None for p in m.profiles)
    assert [p.name for p in m.profiles if p.default] == [m.default_profile.name]
    for p in m.profiles:
        if isinstance(p.base, DebootstrapBase):
            # Built here from Debian's archive: never released, no CUDA of its own, pip offline.
            assert not p.release and p.cuda is None and p.from_wheelhouse
            assert p.base.command.startswith(f"debootstrap --variant={p.base.variant} ")
            continue
        assert p.release and not p.from_wheelhouse
        assert p.base.pinned == f"{p.base.image}@{p.base.digest}"
        if p.cuda:
            assert p.base.image == f"nvidia/cuda:{p.cuda}-base-{p.os}"
            assert p.torch.nccl is not None and p.torch.cuda is not None
            assert p.torch.cuda.split(".")[0] == p.cuda.split(".")[0]


def test_release_version_is_the_hyperframe_package_version() -> None:
    m = load_matrix(ROOT)
    assert m.version == release_version(ROOT)
    assert m.framework_tag(m.default_profile).startswith(f"{m.version}-torch")


Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value

    return mutate


def _delete(path: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


def _all(*mutations: Mutation) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        for m in mutations:
            m(data)

    return mutate


BROKEN: list[tuple[str, Mutation, str, str]] = [
    (
        "digest too short",
        _set("profiles.cuda13.base.digest", "sha256:7c7413a5620048"),
        "profiles.cuda13.base.digest",
        "64 lowercase hex",
    ),
    (
        "digest without the sha256: algorithm",
        _set(
            "profiles.cuda12.base.digest", "29e5e3425e2e0f5a4e97c9fb4695ba4887cd78210a43cf94c3bcafc6ab01c5e6"
        ),
        "profiles.cuda12.base.digest",
        "sha256:",
    ),
    (
        "digest in upper case",
        _set("operator.base.digest", "sha256:" + "A" * 64),
        "operator.base.digest",
        "is not a sha256 digest of 64 lowercase hex digits",
    ),
    (
        "CUDA 13 torch on a CUDA 12 base",
        _all(_set("profiles.cuda12.torch.variant", "cu130"), _set("profiles.cuda12.torch.cuda", "13.0")),
        "profiles.cuda12.torch.cuda",
        "major 13 != 12",
    ),
    (
        "torch built for a newer CUDA minor than the base",
        _all(
            _set("profiles.cuda12.cuda", "12.8.1"),
            _set("profiles.cuda12.base.image", "nvidia/cuda:12.8.1-base-ubuntu24.04"),
        ),
        "profiles.cuda12.torch.cuda",
        "newer than the base image CUDA 12.8.1",
    ),
    (
        "variant label disagrees with torch's CUDA",
        _set("profiles.cuda13.torch.cuda", "12.9"),
        "profiles.cuda13.torch.cuda",
        "does not match variant cu130",
    ),
    (
        "missing NCCL version",
        _delete("profiles.cuda13.torch.nccl"),
        "profiles.cuda13.torch.nccl",
        "is required for variant cu130",
    ),
    (
        "missing base digest",
        _delete("profiles.cuda12.base.digest"),
        "profiles.cuda12.base.digest",
        "required field is missing",
    ),
    (
        "the runtime flavour instead of base",
        _set("profiles.cuda13.base.image", "nvidia/cuda:13.0.3-runtime-ubuntu24.04"),
        "profiles.cuda13.base.image",
        "ships CUDA libraries that torch's wheels already bring",
    ),
    (
        "base tag for another CUDA version",
        _set("profiles.cuda13.base.image", "nvidia/cuda:13.0.2-base-ubuntu24.04"),
        "profiles.cuda13.base.image",
        "'13.0.3-base-ubuntu24.04'",
    ),
    (
        "python written as a YAML float",
        _set("profiles.cpu.python", 3.12),
        "profiles.cpu.python",
        'expected a string, got number 3.12: use major.minor in quotes, e.g. "3.12"',
    ),
    (
        "a misspelt field",
        lambda d: d["profiles"]["cuda13"]["base"].__setitem__("digets", "x"),
        "profiles.cuda13.base.digets",
        "unknown field",
    ),
    (
        "a CPU profile that records an NCCL",
        _set("profiles.cpu.torch.nccl", "2.29.7"),
        "profiles.cpu.torch.nccl",
        "must be absent for the cpu variant",
    ),
    (
        "digest written into the image field",
        _set("profiles.cpu.base.image", "python:3.12-slim-bookworm@sha256:" + "a" * 64),
        "profiles.cpu.base.image",
        "is not repository:tag, no digest (that has its own field)",
    ),
    (
        "an RDMA package without an exact version",
        _set("profiles.cuda13.rdma_packages.rdma-core", None),
        "profiles.cuda13.rdma_packages.rdma-core",
        "exact version",
    ),
    (
        "two default profiles",
        _set("profiles.cpu.default", True),
        "profiles",
        "exactly one profile must be the default, found 2 (cuda13, cpu)",
    ),
    (
        "two profiles that would share a framework tag",
        lambda d: d["profiles"].__setitem__(
            "cuda13-copy", copy.deepcopy({**d["profiles"]["cuda13"], "default": False})
        ),
        "profiles.cuda13-copy.torch",
        "same framework image tag",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "field", "message"), BROKEN, ids=[c[0] for c in BROKEN])
def test_broken_matrix_is_rejected_naming_profile_and_field(
    raw: dict[str, Any], case: str, mutate: Mutation, field: str, message: str
) -> None:
    mutate(raw)
    problems = problems_of(raw)
    matching = [p for p in problems if p.startswith(f"{field}:")]
    assert matching, f"{case}: no problem names {field}; got {problems}"
    assert any(message in p for p in matching), f"{case}: {matching}"


def test_every_problem_is_reported_at_once(raw: dict[str, Any]) -> None:
    raw["profiles"]["cuda13"]["base"]["digest"] = "sha256:bad"
    del raw["profiles"]["cuda12"]["torch"]["nccl"]
    raw["profiles"]["cpu"]["python"] = 3.12
    problems = problems_of(raw)
    fields = {p.split(":")[0] for p in problems}
    assert {"profiles.cuda13.base.digest", "profiles.cuda12.torch.nccl", "profiles.cpu.python"} <= fields
    message = str(MatrixError(problems))
    assert message.startswith("images/matrix.yaml is invalid:")


def test_runtime_version_drift_is_rejected(tmp_path: Path) -> None:
    for rel in ("operator/pyproject.toml", "runtime/pyproject.toml", str(MATRIX_FILE)):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    runtime = tmp_path / "runtime/pyproject.toml"
    text = runtime.read_text(encoding="utf-8")
    version = release_version(ROOT)
    runtime.write_text(text.replace(f'version = "{version}"', 'version = "9.9.9"', 1), encoding="utf-8")
    with pytest.raises(MatrixError) as caught:
        load_matrix(tmp_path)
    assert any(p.startswith("runtime/pyproject.toml: version 9.9.9 differs") for p in caught.value.problems)


def test_a_bad_matrix_entry_reads_path_problem_fix(raw: dict[str, Any]) -> None:
    """Field rules (the codec's, as for the job API) and the rules between fields read alike."""
    raw["image_user"]["uid"] = 0
    raw["registry"] = "GHCR.io"
    raw["extra"] = 1
    raw["profiles"]["cuda13"]["os"] = "ubuntu20.04"
    raw["profiles"]["cuda13"]["os_packages"] = ["python3", "Bad_Name"]
    raw["profiles"]["cuda12"]["torch"]["variant"] = "cu128"
    raw["profiles"]["local"]["base"]["debootstrap"]["suite"] = "buster"
    raw["profiles"]["local"]["release"] = True
    raw["profiles"]["Bad"] = {}
    assert problems_of(raw) == [
        'registry: "GHCR.io" is not host/namespace: use host/namespace, e.g. ghcr.io/acme',
        "image_user.uid: 0 is below the minimum 1000: use a value >= 1000",
        "extra: unknown field: remove it or fix the spelling (known fields: schema_version, registry, "
        "image_user, operator, profiles)",
        'profiles.cuda13.os: unknown value string "ubuntu20.04": use one of ubuntu24.04, ubuntu22.04, debian12',
        'profiles.cuda13.os_packages[1]: "Bad_Name" is not a Debian package name: use a Debian package name, '
        "e.g. python3",
        "profiles.cuda12.torch.cuda: 12.9 does not match variant cu128 (which is CUDA 12.8): fix one of them",
        'profiles.local.base.debootstrap.suite: unknown value string "buster": use one of bookworm, trixie',
        "profiles.Bad: is not a DNS-1123 label: rename it: it names a HyperFrameRuntime",
    ]
    del raw["profiles"]["Bad"]
    raw["profiles"]["local"]["base"]["debootstrap"]["suite"] = "bookworm"
    assert (
        "profiles.local.release: must be false for a debootstrap base: such an image is built for the "
        "local cluster only; set release: false" in problems_of(raw)
    )


def test_every_shipped_problem_line_has_a_path_a_problem_and_a_fix(raw: dict[str, Any]) -> None:
    for case, mutate, _field, _message in BROKEN:
        data = copy.deepcopy(raw)
        mutate(data)
        for line in problems_of(data):
            path, problem, fix = line.split(": ", 2) if line.count(": ") >= 2 else (line, "", "")
            assert path and problem and fix and " " not in path and not fix.startswith(" "), f"{case}: {line}"


def test_a_matrix_that_is_not_a_mapping_is_named_as_a_whole() -> None:
    assert problems_of(["profiles"]) == ["expected an object, got a list: write a mapping of fields"]  # type: ignore[arg-type]
