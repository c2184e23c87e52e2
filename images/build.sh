#!/usr/bin/env bash
# Build the HyperFrame images from the pin matrix with docker buildx bake (`make images`).
#
#   images/build.sh [TARGET...]        build (default group: operator + every framework image,
#                                      which builds its base first) into the local image store
#   images/build.sh --push [TARGET...] build and push to the matrix registry, then record the
#                                      pushed digests in images/published.yaml and regenerate the
#                                      default runtime profiles pinned to them
#   images/build.sh --print [TARGET...] show the resolved bake configuration, build nothing
#   images/build.sh --resolve [--write] re-read every base digest (docker buildx imagetools
#                                      inspect) and torch NCCL pin (pip download --no-deps) from
#                                      the registries; --write rewrites images/matrix.yaml
#
# Targets and groups are those of docker-bake.hcl: default, base, framework, operator,
# base-<profile>, framework-<profile>. REGISTRY=host/ns overrides the registry for a local build.
# Exit codes: 0 done, 1 failed, 2 bad usage or stale generated files, 3 no Docker engine.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

mode=build
write=""
targets=()
for arg in "$@"; do
    case "$arg" in
        --push) mode=push ;;
        --print) mode=print ;;
        --resolve) mode=resolve ;;
        --write) write="--write" ;;
        -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "images/build.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
        *) targets+=("$arg") ;;
    esac
done

images_cli() {
    "$PYTHON" -m hyperframe.images "$@"
}

if [[ "$mode" == resolve ]]; then
    command -v docker >/dev/null || { echo "images/build.sh --resolve: needs the docker CLI with buildx (imagetools)" >&2; exit 3; }
    images_cli resolve $write
    exit 0
fi

# The bake file must say what the matrix says before anything is built from it.
if ! images_cli check; then
    echo "images/build.sh: run \`make generate\` first; the bake file must match images/matrix.yaml" >&2
    exit 2
fi

if ! command -v docker >/dev/null 2>&1; then
    echo "images/build.sh: cannot build images here: the docker CLI is not installed." >&2
    echo "  Install Docker (Engine or Desktop, with buildx) and run \`make images\` again." >&2
    exit 3
fi
if ! engine_error="$(docker info --format '{{.ServerVersion}}' 2>&1 >/dev/null)"; then
    echo "images/build.sh: cannot build images here: the docker CLI is installed but no Docker engine answers." >&2
    echo "  docker info: $(printf '%s' "$engine_error" | head -n 1)" >&2
    echo "  Start a Docker engine (or point DOCKER_HOST at one) and run \`make images\` again." >&2
    echo "  Without an engine, CI still checks the images: hadolint, the matrix validation, the generated" >&2
    echo "  files and the framework install script (tests/unit/images, tests/integration/test_framework_install.py)." >&2
    exit 3
fi
if ! docker buildx version >/dev/null 2>&1; then
    echo "images/build.sh: the Docker engine has no buildx plugin; install docker-buildx and run again." >&2
    exit 3
fi

case "$mode" in
    print)
        exec docker buildx bake --file docker-bake.hcl --print "${targets[@]}"
        ;;
    build)
        docker buildx bake --file docker-bake.hcl --load "${targets[@]}"
        ;;
    push)
        if [[ -n "${REGISTRY:-}" ]]; then
            echo "images/build.sh --push: pushes go to the matrix registry; change registry: in images/matrix.yaml instead of REGISTRY" >&2
            exit 2
        fi
        metadata="$(mktemp)"
        trap 'rm -f "$metadata"' EXIT
        docker buildx bake --file docker-bake.hcl --push --metadata-file "$metadata" "${targets[@]}"
        images_cli record-push "$metadata"
        echo "images/build.sh: pushed; commit images/published.yaml and the regenerated files"
        ;;
esac
