"""Everything generated from the pin matrix, as pure text functions, plus write and staleness check.

Generated wholly: docker-bake.hcl and images/generated/runtimes.yaml. Generated in part: the
versions table between markers in docs/images.md. The chart's generator
(charts/hyperframe-operator/hack/generate.py) reads the same matrix through `load_matrix` for
Chart.yaml (version, appVersion = the operator image tag) and copies runtimes.yaml into the chart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hyperframe.constants import API_VERSION, RUNTIME_KIND
from hyperframe.images.matrix import DebootstrapBase, Matrix, Profile
from hyperframe.images.published import UNPUBLISHED_DIGEST
from hyperframe.images.repo import BAKE_FILE, DOCS_FILE, RUNTIMES_FILE

__all__ = [
    "ANNOTATION_PUBLISHED",
    "DOCS_BEGIN",
    "DOCS_END",
    "LABEL_PROFILE",
    "ROOTFS_DOCKERFILE",
    "WHEELHOUSE_DIR",
    "bake_args",
    "expected_files",
    "render_bake",
    "render_runtimes",
    "render_versions_table",
    "rootfs_variables",
    "runtime_manifest",
    "splice_docs",
    "stale_files",
    "write_files",
]

GENERATED_NOTE = "Generated from images/matrix.yaml by `make generate` (python -m hyperframe.images generate); do not edit."
DOCS_BEGIN = "<!-- BEGIN GENERATED: versions table (make generate) -->"
DOCS_END = "<!-- END GENERATED: versions table -->"
LABEL_PROFILE = "hyperframe.dev/pin-matrix-profile"
ANNOTATION_PUBLISHED = "hyperframe.dev/images-published"
ANNOTATION_DEFAULT = "hyperframe.dev/default-runtime"
SOURCE_URL = "https://github.com/hyperframe-dev/hyperframe"
# The named build context every pip step mounts at /wheelhouse. The committed directory holds no
# wheels (profiles installing from a package index never read it); images/build.sh points the bake
# variable WHEELHOUSE at the wheels a wheelhouse profile needs, staged from the project's wheelhouse.
WHEELHOUSE_DIR = "images/wheelhouse"
WHEELHOUSE_MOUNT = "/wheelhouse"
# A debootstrap root filesystem becomes an image by extracting its tarball onto an empty one.
ROOTFS_DOCKERFILE = "FROM scratch\nADD rootfs.tar /\n"


# --- docker-bake.hcl -----------------------------------------------------------------------------


def _hcl(value: str) -> str:
    return json.dumps(value)  # HCL string literals share JSON's escapes for what we emit


def _hcl_map(entries: Mapping[str, str], indent: str) -> str:
    width = max(len(_hcl(k)) for k in entries)
    lines = [f"{indent}  {_hcl(k).ljust(width)} = {_hcl(v)}" for k, v in entries.items()]
    return "{\n" + "\n".join(lines) + f"\n{indent}}}"


def _target(name: str, body: Mapping[str, str | list[str] | Mapping[str, str]]) -> str:
    lines = [f'target "{name}" {{']
    for key, value in body.items():
        if isinstance(value, str):
            lines.append(f"  {key} = {value}")
        elif isinstance(value, list):
            lines.append(f"  {key} = [{', '.join(value)}]")
        else:
            lines.append(f"  {key} = {_hcl_map(value, '  ')}")
    lines.append("}")
    return "\n".join(lines)


def rootfs_variables(p: Profile) -> tuple[str, str]:
    """The bake variables images/build.sh sets for a debootstrap profile: the directory holding
    rootfs.tar, and the tarball's sha256 (recorded as the base digest)."""
    stem = "ROOTFS_" + p.name.upper().replace("-", "_")
    return f"{stem}_DIR", f"{stem}_SHA256"


def _from_image(p: Profile) -> str:
    """What FROM ${BASE_IMAGE} names: the pinned upstream image, or the rootfs target's context."""
    return f"hyperframe-rootfs-{p.name}" if isinstance(p.base, DebootstrapBase) else p.base.pinned


def _pip_args(p: Profile) -> dict[str, str]:
    """pip's own configuration for a wheelhouse profile: no index, only the mounted wheels."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELHOUSE_MOUNT} if p.from_wheelhouse else {}


def _base_args(m: Matrix, p: Profile) -> dict[str, str]:
    if isinstance(p.base, DebootstrapBase):
        name, digest = p.base.command, f"sha256:${{{rootfs_variables(p)[1]}}}"
    else:
        name, digest = p.base.image, p.base.digest
    return {
        "BASE_IMAGE": _from_image(p),
        "HF_BASE_NAME": name,
        "HF_BASE_DIGEST": digest,
        "HF_PROFILE": p.name,
        "HF_OS": p.os,
        "HF_CUDA": p.cuda or "none",
        "HF_PYTHON_VERSION": p.python,
        "HF_OS_PACKAGES": " ".join(p.os_packages),
        "HF_RDMA_PACKAGES": " ".join(f"{name}={version}" for name, version in p.rdma_packages),
        "HF_USER": m.image_user.name,
        "HF_UID": str(m.image_user.uid),
        "HF_VERSION": m.version,
    }


def _framework_args(m: Matrix, p: Profile) -> dict[str, str]:
    return {
        "BASE_IMAGE": "hyperframe-base",
        "HF_PROFILE": p.name,
        "HF_PYTHON_VERSION": p.python,
        "HF_TORCH_VERSION": p.torch.version,
        "HF_TORCH_VARIANT": p.torch.variant,
        "HF_TORCH_CUDA": p.torch.cuda or "none",
        "HF_TORCH_INDEX_URL": p.torch.index_url,
        "HF_NCCL_VERSION": p.torch.nccl or "none",
        "HF_UID": str(m.image_user.uid),
        "HF_VERSION": m.version,
        **_pip_args(p),
    }


def _operator_args(m: Matrix, p: Profile | None = None) -> dict[str, str]:
    """The released operator (p None) on the matrix's operator base, or a local profile's operator
    on that profile's root filesystem."""
    return {
        "BASE_IMAGE": m.operator.base.pinned if p is None else _from_image(p),
        "HF_PYTHON_VERSION": m.operator.python if p is None else p.python,
        "HF_USER": m.image_user.name,
        "HF_UID": str(m.image_user.uid),
        "HF_VERSION": m.version,
        **({} if p is None else _pip_args(p)),
    }


def bake_args(m: Matrix) -> dict[str, dict[str, str]]:
    """Bake target name -> its build args (the drift test compares them with each Dockerfile's ARGs)."""
    args = {"operator": _operator_args(m)}
    for p in m.local_profiles:
        args[f"operator-{p.name}"] = _operator_args(m, p)
    for p in m.profiles:
        args[f"base-{p.name}"] = _base_args(m, p)
        args[f"framework-{p.name}"] = _framework_args(m, p)
    return args


def _quoted(names: list[str]) -> str:
    return ", ".join(_hcl(n) for n in names)


def _tags(*refs: str) -> list[str]:
    return [_hcl(f"${{REGISTRY}}/{ref}") for ref in refs]


def render_bake(m: Matrix) -> str:
    """The buildx bake file: one base and one framework target per profile, plus the operator;
    a debootstrap profile adds its root filesystem target and its own operator (group `local`)."""
    released = m.released_profiles
    base_targets = [f"base-{p.name}" for p in released]
    framework_targets = [f"framework-{p.name}" for p in released]
    local_targets = [
        name
        for p in m.local_profiles
        for name in (f"operator-{p.name}", f"base-{p.name}", f"framework-{p.name}")
    ]
    rootfs_vars = [var for p in m.local_profiles for var in rootfs_variables(p)]
    blocks = [
        f"// {GENERATED_NOTE}\n// Build: make images (images/build.sh), or docker buildx bake [group or target].",
        f'variable "REGISTRY" {{\n  default = {_hcl(m.registry)}\n}}',
        f'variable "WHEELHOUSE" {{\n  default = {_hcl(WHEELHOUSE_DIR)}\n}}',
        *(f'variable "{var}" {{\n  default = ""\n}}' for var in rootfs_vars),
        f'group "default" {{\n  targets = [{_quoted(["operator", *framework_targets])}]\n}}',
        f'group "base" {{\n  targets = [{_quoted(base_targets)}]\n}}',
        f'group "framework" {{\n  targets = [{_quoted(framework_targets)}]\n}}',
        f'group "local" {{\n  targets = [{_quoted(local_targets)}]\n}}',
        _target(
            "_common",
            {
                "context": _hcl("."),
                "platforms": [_hcl("linux/amd64")],
                "labels": {
                    "org.opencontainers.image.source": SOURCE_URL,
                    "org.opencontainers.image.version": m.version,
                    "org.opencontainers.image.vendor": "HyperFrame",
                },
            },
        ),
        _target(
            "operator",
            {
                "inherits": [_hcl("_common")],
                "dockerfile": _hcl("images/operator.Dockerfile"),
                "contexts": {"wheelhouse": "${WHEELHOUSE}"},
                "args": _operator_args(m),
                "tags": _tags(f"hyperframe-operator:{m.operator_tag()}"),
            },
        ),
    ]
    for p in m.profiles:
        base_contexts: dict[str, str] = {}
        if isinstance(p.base, DebootstrapBase):
            dir_var = rootfs_variables(p)[0]
            blocks.append(
                _target(
                    f"rootfs-{p.name}",
                    {
                        "context": f"{dir_var}",
                        "dockerfile-inline": _hcl(ROOTFS_DOCKERFILE),
                        "platforms": [_hcl("linux/amd64")],
                    },
                )
            )
            base_contexts = {_from_image(p): f"target:rootfs-{p.name}"}
            blocks.append(
                _target(
                    f"operator-{p.name}",
                    {
                        "inherits": [_hcl("_common")],
                        "dockerfile": _hcl("images/operator.Dockerfile"),
                        "contexts": {**base_contexts, "wheelhouse": "${WHEELHOUSE}"},
                        "args": _operator_args(m, p),
                        "tags": _tags(f"hyperframe-operator:{m.operator_tag(p)}"),
                    },
                )
            )
        blocks.append(
            _target(
                f"base-{p.name}",
                {
                    "inherits": [_hcl("_common")],
                    "dockerfile": _hcl("Dockerfile.base"),
                    **({"contexts": base_contexts} if base_contexts else {}),
                    "args": _base_args(m, p),
                    "tags": _tags(f"hyperframe-base:{m.base_tag(p)}"),
                },
            )
        )
        blocks.append(
            _target(
                f"framework-{p.name}",
                {
                    "inherits": [_hcl("_common")],
                    "dockerfile": _hcl("Dockerfile.framework"),
                    "contexts": {"hyperframe-base": f"target:base-{p.name}", "wheelhouse": "${WHEELHOUSE}"},
                    "args": _framework_args(m, p),
                    "tags": _tags(f"hyperframe-framework:{m.framework_tag(p)}"),
                },
            )
        )
    return "\n\n".join(blocks) + "\n"


# --- default HyperFrameRuntime profiles ----------------------------------------------------------


def _pinned(ref: str, published: Mapping[str, str]) -> str:
    return f"{ref}@{published.get(ref, UNPUBLISHED_DIGEST)}"


def runtime_manifest(m: Matrix, p: Profile, published: Mapping[str, str]) -> dict[str, Any]:
    """The HyperFrameRuntime of one profile, images pinned to the pushed digests (if pushed)."""
    base, framework = m.base_image(p), m.framework_image(p)
    is_published = base in published and framework in published
    versions: dict[str, str] = {"torch": p.torch.local_version, "python": p.python}
    if p.cuda is not None:
        versions["cuda"] = p.cuda
    if p.torch.nccl is not None:
        versions["nccl"] = p.torch.nccl
    annotations = {ANNOTATION_PUBLISHED: "true" if is_published else "false"}
    if p.default:
        annotations[ANNOTATION_DEFAULT] = "true"
    return {
        "apiVersion": API_VERSION,
        "kind": RUNTIME_KIND,
        "metadata": {
            "name": p.name,
            "labels": {"app.kubernetes.io/part-of": "hyperframe", LABEL_PROFILE: p.name},
            "annotations": annotations,
        },
        "spec": {
            "accelerator": "cpu" if p.cuda is None else "nvidia-gpu",
            "images": {"base": _pinned(base, published), "framework": _pinned(framework, published)},
            "versions": versions,
            "pod": {"runAsUser": m.image_user.uid},
        },
    }


def render_runtimes(m: Matrix, published: Mapping[str, str]) -> str:
    header = (
        f"# {GENERATED_NOTE}\n"
        "# The default HyperFrameRuntime profiles; the chart installs them. Images whose digest is all\n"
        f'# zeros were not pushed yet ({ANNOTATION_PUBLISHED}: "false"): run images/build.sh --push.\n'
    )
    docs = [yaml.safe_dump(runtime_manifest(m, p, published), sort_keys=False) for p in m.released_profiles]
    return header + "---\n" + "---\n".join(docs)


# --- docs/images.md versions table ---------------------------------------------------------------


def _base_cell(p: Profile) -> str:
    if isinstance(p.base, DebootstrapBase):
        return f"debootstrap `{p.base.suite}` ({p.base.variant})<br>sha256 of the rootfs tarball"
    return f"`{p.base.image}`<br>`{p.base.digest[:19]}…`"


def _source_line(p: Profile) -> str:
    if isinstance(p.base, DebootstrapBase):
        return f"- `{p.name}`: `{p.base.command}`; torch from the project's wheelhouse (filled from {p.torch.index_url})"
    return f"- `{p.name}`: `{p.base.pinned}`; torch from {p.torch.index_url}"


def render_versions_table(m: Matrix) -> str:
    rows = [
        "| Profile (runtime) | Base image | OS | CUDA | Python | torch | NCCL | RDMA user space | Framework image tag |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in m.profiles:
        rdma = ", ".join(f"{n} {v}" for n, v in p.rdma_packages) or "none"
        name = f"`{p.name}` (default)" if p.default else f"`{p.name}`"
        if not p.release:
            name += " (local cluster only)"
        rows.append(
            f"| {name} | {_base_cell(p)} | {p.os} | {p.cuda or 'none'} | {p.python} "
            f"| {p.torch.local_version} | {p.torch.nccl or 'none'} | {rdma} | `{m.framework_tag(p)}` |"
        )
    rows.append("")
    rows.append(
        f"Operator image: `{m.operator_image()}` on `{m.operator.base.image}` "
        f"(`{m.operator.base.digest[:19]}…`), Python {m.operator.python}"
        + "".join(
            f"; `{m.operator_image(profile=p)}` on the `{p.name}` root filesystem, Python {p.python}"
            for p in m.local_profiles
        )
        + f". Images run as `{m.image_user.name}` (uid {m.image_user.uid})."
    )
    rows.append("")
    rows.append("Pinned upstream images and torch indexes:")
    rows.append("")
    rows.extend(_source_line(p) for p in m.profiles)
    rows.append(f"- operator: `{m.operator.base.pinned}`")
    return "\n".join(rows)


def splice_docs(doc: str, table: str) -> str:
    """Replace what lies between the markers; the markers must exist exactly once."""
    if doc.count(DOCS_BEGIN) != 1 or doc.count(DOCS_END) != 1:
        raise ValueError(f"{DOCS_FILE} must contain the markers {DOCS_BEGIN!r} and {DOCS_END!r} once each")
    head, rest = doc.split(DOCS_BEGIN)
    _, tail = rest.split(DOCS_END)
    return f"{head}{DOCS_BEGIN}\n{table}\n{DOCS_END}{tail}"


# --- write and check -----------------------------------------------------------------------------


def expected_files(root: Path, m: Matrix, published: Mapping[str, str]) -> dict[Path, str]:
    """Repository path -> the content it must have."""
    files = {BAKE_FILE: render_bake(m), RUNTIMES_FILE: render_runtimes(m, published)}
    docs = root / DOCS_FILE
    if docs.is_file():
        files[DOCS_FILE] = splice_docs(docs.read_text(encoding="utf-8"), render_versions_table(m))
    return files


def stale_files(root: Path, m: Matrix, published: Mapping[str, str]) -> list[Path]:
    """The generated files whose content differs from what the matrix gives (or that are missing)."""
    stale = []
    for rel, text in expected_files(root, m, published).items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    return stale


def write_files(root: Path, m: Matrix, published: Mapping[str, str]) -> list[Path]:
    """Write every generated file that changed; return those written."""
    written = []
    for rel, text in expected_files(root, m, published).items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(rel)
    return written
