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
from hyperframe.images.matrix import Matrix, Profile
from hyperframe.images.published import UNPUBLISHED_DIGEST
from hyperframe.images.repo import BAKE_FILE, DOCS_FILE, RUNTIMES_FILE

__all__ = [
    "ANNOTATION_PUBLISHED",
    "DOCS_BEGIN",
    "DOCS_END",
    "LABEL_PROFILE",
    "bake_args",
    "expected_files",
    "render_bake",
    "render_runtimes",
    "render_versions_table",
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


def _base_args(m: Matrix, p: Profile) -> dict[str, str]:
    return {
        "BASE_IMAGE": p.base.pinned,
        "HF_BASE_NAME": p.base.image,
        "HF_BASE_DIGEST": p.base.digest,
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
    }


def _operator_args(m: Matrix) -> dict[str, str]:
    return {
        "BASE_IMAGE": m.operator.base.pinned,
        "HF_PYTHON_VERSION": m.operator.python,
        "HF_USER": m.image_user.name,
        "HF_UID": str(m.image_user.uid),
        "HF_VERSION": m.version,
    }


def bake_args(m: Matrix) -> dict[str, dict[str, str]]:
    """Bake target name -> its build args (the drift test compares them with each Dockerfile's ARGs)."""
    args = {"operator": _operator_args(m)}
    for p in m.profiles:
        args[f"base-{p.name}"] = _base_args(m, p)
        args[f"framework-{p.name}"] = _framework_args(m, p)
    return args


def _quoted(names: list[str]) -> str:
    return ", ".join(_hcl(n) for n in names)


def render_bake(m: Matrix) -> str:
    """The buildx bake file: one base and one framework target per profile, plus the operator."""
    base_targets = [f"base-{p.name}" for p in m.profiles]
    framework_targets = [f"framework-{p.name}" for p in m.profiles]
    blocks = [
        f"// {GENERATED_NOTE}\n// Build: make images (images/build.sh), or docker buildx bake [group or target].",
        f'variable "REGISTRY" {{\n  default = {_hcl(m.registry)}\n}}',
        f'group "default" {{\n  targets = [{_quoted(["operator", *framework_targets])}]\n}}',
        f'group "base" {{\n  targets = [{_quoted(base_targets)}]\n}}',
        f'group "framework" {{\n  targets = [{_quoted(framework_targets)}]\n}}',
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
                "args": _operator_args(m),
                "tags": [f'"${{REGISTRY}}/hyperframe-operator:{m.version}"'],
            },
        ),
    ]
    for p in m.profiles:
        blocks.append(
            _target(
                f"base-{p.name}",
                {
                    "inherits": [_hcl("_common")],
                    "dockerfile": _hcl("Dockerfile.base"),
                    "args": _base_args(m, p),
                    "tags": [f'"${{REGISTRY}}/hyperframe-base:{m.base_tag(p)}"'],
                },
            )
        )
        blocks.append(
            _target(
                f"framework-{p.name}",
                {
                    "inherits": [_hcl("_common")],
                    "dockerfile": _hcl("Dockerfile.framework"),
                    "contexts": {"hyperframe-base": f"target:base-{p.name}"},
                    "args": _framework_args(m, p),
                    "tags": [f'"${{REGISTRY}}/hyperframe-framework:{m.framework_tag(p)}"'],
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
    docs = [yaml.safe_dump(runtime_manifest(m, p, published), sort_keys=False) for p in m.profiles]
    return header + "---\n" + "---\n".join(docs)


# --- docs/images.md versions table ---------------------------------------------------------------


def render_versions_table(m: Matrix) -> str:
    rows = [
        "| Profile (runtime) | Base image | OS | CUDA | Python | torch | NCCL | RDMA user space | Framework image tag |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in m.profiles:
        rdma = ", ".join(f"{n} {v}" for n, v in p.rdma_packages) or "none"
        name = f"`{p.name}` (default)" if p.default else f"`{p.name}`"
        rows.append(
            f"| {name} | `{p.base.image}`<br>`{p.base.digest[:19]}…` | {p.os} | {p.cuda or 'none'} | {p.python} "
            f"| {p.torch.local_version} | {p.torch.nccl or 'none'} | {rdma} | `{m.framework_tag(p)}` |"
        )
    rows.append("")
    rows.append(
        f"Operator image: `{m.operator_image()}` on `{m.operator.base.image}` "
        f"(`{m.operator.base.digest[:19]}…`), Python {m.operator.python}. "
        f"Images run as `{m.image_user.name}` (uid {m.image_user.uid})."
    )
    rows.append("")
    rows.append("Pinned upstream images and torch indexes:")
    rows.append("")
    for p in m.profiles:
        rows.append(f"- `{p.name}`: `{p.base.pinned}`; torch from {p.torch.index_url}")
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
