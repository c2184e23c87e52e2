#!/usr/bin/env bash
# The framework layer's Python install, shared by Dockerfile.framework and
# tests/integration/test_framework_install.py: both run these phases, in this order, with the
# pins of one profile of images/matrix.yaml. Keeping the steps here (not inline in the
# Dockerfile) is what lets CI test the image's Python layer without a Docker engine.
#
#   install-framework.sh wheels SRC OUT  build the hyperframe and hyperframe-runtime wheels from
#                                        the repository at SRC into OUT, plus OUT/requirements.txt
#                                        (their third-party dependencies, without torch)
#   install-framework.sh torch           create the venv and install the pinned torch, verified
#   install-framework.sh deps DIR        install DIR/requirements.txt, torch held at its pin
#   install-framework.sh app DIR         install the wheels in DIR (no dependencies), pip check
#   install-framework.sh verify          check Python, torch, its CUDA and NCCL against the pins
#
# The pins come from the environment (the Dockerfile maps its build args onto these names):
#   HF_PYTHON_VERSION   major.minor the interpreter must be            e.g. 3.12
#   HF_TORCH_VERSION    torch release                                  e.g. 2.13.0
#   HF_TORCH_VARIANT    local version label torch must report          e.g. cu130, cpu
#   HF_TORCH_CUDA       torch.version.cuda, or "none" for cpu          e.g. 13.0
#   HF_TORCH_INDEX_URL  index that serves this build; https://pypi.org/simple means "pip's
#                       configured index" so PIP_INDEX_URL / PIP_FIND_LINKS mirrors still apply
#   HF_NCCL_VERSION     NCCL the torch wheel ships, or "none"          e.g. 2.29.7
# Optional:
#   HF_VENV             the virtualenv to create and fill (default /opt/hyperframe/venv)
#   HF_PYTHON           interpreter that creates the venv (default python3)
#   HF_BUILD_PYTHON     interpreter that builds the wheels (default python3)
#   HF_BUILD_ISOLATION  0 builds the wheels with HF_BUILD_PYTHON's own setuptools, for offline
#                       builders (default 1: pip's isolated build environment)
set -euo pipefail

PYPI_SIMPLE="https://pypi.org/simple"
HF_VENV="${HF_VENV:-/opt/hyperframe/venv}"
HF_PYTHON="${HF_PYTHON:-python3}"
HF_BUILD_PYTHON="${HF_BUILD_PYTHON:-python3}"
HF_BUILD_ISOLATION="${HF_BUILD_ISOLATION:-1}"

die() {
    echo "install-framework: $*" >&2
    exit 1
}

need() {
    local name
    for name in "$@"; do
        [[ -n "${!name:-}" ]] || die "$name is not set; pass the pins of one images/matrix.yaml profile"
    done
}

pip_venv() {
    "$HF_VENV/bin/python" -m pip --disable-pip-version-check --no-input "$@"
}

phase_wheels() {
    local src="$1" out="$2"
    [[ -f "$src/operator/pyproject.toml" && -f "$src/runtime/pyproject.toml" ]] \
        || die "wheels: $src is not the HyperFrame repository (operator/ and runtime/ missing)"
    mkdir -p "$out"
    local isolation=()
    [[ "$HF_BUILD_ISOLATION" == "0" ]] && isolation=(--no-build-isolation)
    "$HF_BUILD_PYTHON" -m pip --disable-pip-version-check wheel --no-cache-dir --no-deps "${isolation[@]}" \
        --wheel-dir "$out" "$src/operator" "$src/runtime"
    # The third-party requirements get their own layer: it changes only when a dependency does,
    # not when runtime code does. torch has its own layer; hyperframe is installed as a wheel.
    "$HF_BUILD_PYTHON" - "$out" <<'PY'
import pathlib, re, sys, zipfile

out = pathlib.Path(sys.argv[1])
reqs = set()
for wheel in sorted(out.glob("hyperframe*.whl")):
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        for line in zf.read(meta).decode().splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            req = line.split(":", 1)[1].strip()
            name = re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-")
            if "extra ==" in req or name in ("torch", "hyperframe", "hyperframe-runtime"):
                continue
            reqs.add(req)
(out / "requirements.txt").write_text("".join(f"{r}\n" for r in sorted(reqs)))
PY
    echo "install-framework: built $(find "$out" -name '*.whl' | wc -l) wheels and requirements.txt in $out"
}

phase_torch() {
    need HF_TORCH_VERSION HF_TORCH_VARIANT HF_TORCH_INDEX_URL
    [[ -x "$HF_VENV/bin/python" ]] || "$HF_PYTHON" -m venv "$HF_VENV"
    local spec index=()
    if [[ "$HF_TORCH_INDEX_URL" == "$PYPI_SIMPLE" ]]; then
        # PyPI's linux wheel carries no local label in its file name (it reports +cuXYZ at run
        # time), so the requirement is the bare version; verify checks the label.
        spec="torch==${HF_TORCH_VERSION}"
    else
        spec="torch==${HF_TORCH_VERSION}+${HF_TORCH_VARIANT}"
        index=(--index-url "$HF_TORCH_INDEX_URL")
    fi
    pip_venv install --no-cache-dir "${index[@]}" "$spec"
    phase_verify
}

phase_deps() {
    local dir="$1"
    need HF_TORCH_VERSION
    [[ -f "$dir/requirements.txt" ]] || die "deps: $dir/requirements.txt is missing; run the wheels phase first"
    local constraints
    constraints="$(mktemp)"
    echo "torch==${HF_TORCH_VERSION}" >"$constraints"
    pip_venv install --no-cache-dir --requirement "$dir/requirements.txt" --constraint "$constraints"
    rm -f "$constraints"
}

phase_app() {
    local dir="$1" wheels
    mapfile -t wheels < <(find "$dir" -maxdepth 1 -name 'hyperframe*.whl' | sort)
    [[ ${#wheels[@]} -eq 2 ]] || die "app: expected the hyperframe and hyperframe-runtime wheels in $dir, found ${#wheels[@]}"
    pip_venv install --no-cache-dir --no-deps --no-index "${wheels[@]}"
    # Every dependency of every installed distribution must be satisfied by what the layers hold.
    pip_venv check
    local script
    for script in hyperframe hyperframe-launch hyperframe-smoke hyperframe-train hyperframe-sched; do
        [[ -x "$HF_VENV/bin/$script" ]] || die "app: console script $script is missing from $HF_VENV/bin"
    done
    pip_venv freeze --all >"$(dirname "$HF_VENV")/pip-freeze.txt"
}

phase_verify() {
    need HF_PYTHON_VERSION HF_TORCH_VERSION HF_TORCH_VARIANT HF_TORCH_CUDA HF_NCCL_VERSION
    "$HF_VENV/bin/python" - <<'PY'
import os, sys

import torch

env = os.environ
problems = []
python = f"{sys.version_info.major}.{sys.version_info.minor}"
if python != env["HF_PYTHON_VERSION"]:
    problems.append(f"python: the interpreter is {python}, the pin matrix says {env['HF_PYTHON_VERSION']}")
want_torch = f"{env['HF_TORCH_VERSION']}+{env['HF_TORCH_VARIANT']}"
if torch.__version__ != want_torch:
    problems.append(
        f"torch: installed {torch.__version__}, the pin matrix says {want_torch}; "
        "check torch.index_url of the profile (another index serves another CUDA build)"
    )
want_cuda = None if env["HF_TORCH_CUDA"] == "none" else env["HF_TORCH_CUDA"]
if torch.version.cuda != want_cuda:
    problems.append(f"torch.cuda: torch is built for CUDA {torch.version.cuda}, the pin matrix says {want_cuda}")
want_nccl = None if env["HF_NCCL_VERSION"] == "none" else env["HF_NCCL_VERSION"]
have_nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else None
if have_nccl != want_nccl:
    problems.append(f"torch.nccl: torch loads NCCL {have_nccl}, the pin matrix says {want_nccl}")
base_cuda = env.get("CUDA_VERSION")  # set by the nvidia/cuda base images
if base_cuda and torch.version.cuda:
    base = tuple(int(x) for x in base_cuda.split(".")[:2])
    built = tuple(int(x) for x in torch.version.cuda.split("."))
    if built[0] != base[0] or built[1] > base[1]:
        problems.append(f"torch.cuda: torch CUDA {torch.version.cuda} cannot run on the base image CUDA {base_cuda}")
if problems:
    sys.exit("install-framework: verify failed:\n  " + "\n  ".join(problems))
print(
    f"install-framework: verified python {python}, torch {torch.__version__}, "
    f"CUDA {torch.version.cuda or 'none'}, NCCL {have_nccl or 'none'}"
)
PY
}

main() {
    local phase="${1:-}"
    shift || true
    case "$phase" in
        wheels) [[ $# -eq 2 ]] || die "usage: wheels SRC OUT"; phase_wheels "$@" ;;
        torch) [[ $# -eq 0 ]] || die "usage: torch"; phase_torch ;;
        deps) [[ $# -eq 1 ]] || die "usage: deps DIR"; phase_deps "$@" ;;
        app) [[ $# -eq 1 ]] || die "usage: app DIR"; phase_app "$@" ;;
        verify) [[ $# -eq 0 ]] || die "usage: verify"; phase_verify ;;
        *) die "unknown phase '${phase}'; use wheels, torch, deps, app or verify (see the header of $0)" ;;
    esac
}

main "$@"
