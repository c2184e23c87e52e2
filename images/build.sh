#!/usr/bin/env bash
# Build the HyperFrame images from the pin matrix with BuildKit (`make images`).
#
#   images/build.sh                       build the local profile's images (group `local` of
#                                         docker-bake.hcl: operator, base, framework), push them to
#                                         $HYPERFRAME_REGISTRY and write their digests for the
#                                         development cluster into $HYPERFRAME_IMAGES_DIR
#   images/build.sh --push [TARGET...]    build released targets (default group) and push them to
#                                         the matrix registry, then record the pushed digests in
#                                         images/published.yaml and regenerate the default runtimes
#   images/build.sh --print [TARGET...]   show the resolved bake configuration, build nothing
#   images/build.sh --resolve [--write]   re-read every base digest and torch NCCL pin from the
#                                         registries; --write rewrites images/matrix.yaml
#   images/build.sh --user-image CONTEXT DOCKERFILE NAME
#                                         build a job's own image (`hyperframe image build` writes
#                                         the Dockerfile: FROM a runtime's framework image plus
#                                         COPY of CONTEXT), push it to NAME and print the pushed
#                                         NAME@sha256:... as the last line on stdout
#
# The engine is this script's own buildkitd (BuildKit, built from the Go module proxy by
# `make cluster-build`), run as root with its OCI worker on Debian's runc, host networking for RUN
# steps (apt reaches Debian's archive), its state in a bounded cache and its socket private; buildx
# drives it through the remote driver (`buildx bake`). It is stopped when the script ends.
#
# Environment:
#   HYPERFRAME_REGISTRY    host:port of the development cluster's registry (plain HTTP on
#                          loopback); `python -m hyperframe_devcluster env` exports it. With
#                          --user-image it is spoken to over plain HTTP too, as is a NAME on
#                          127.0.0.1 or localhost
#   HYPERFRAME_IMAGES_DIR  where digests.json, values-local.yaml, runtimes-local.yaml go
#                          (default: <repo>/.cluster/images)
#   HYPERFRAME_IMAGES_CACHE  root filesystems, staged wheels, BuildKit state
#                          (default: ~/.cache/hyperframe/images)
#   HYPERFRAME_BUILDKIT_CACHE_GB  BuildKit's cache is pruned to this size after a build (default 20)
#   HYPERFRAME_WHEELHOUSE  the project's wheelhouse (default: ~/.cache/hyperframe/wheels)
# Exit codes: 0 done, 1 failed, 2 bad usage, stale generated files or no registry, 3 no engine can
# run here (1 when CI=true: CI must build the images).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHONPATH="$ROOT/operator/src:$ROOT/cluster/src${PYTHONPATH:+:$PYTHONPATH}"

mode=local
write=""
targets=()
for arg in "$@"; do
    case "$arg" in
        --push) mode=release ;;
        --print) mode=print ;;
        --resolve) mode=resolve ;;
        --user-image) mode=user ;;
        --write) write="--write" ;;
        -h | --help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "images/build.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
        *) targets+=("$arg") ;;
    esac
done

say() { printf '>> images: %s\n' "$*" >&2; }
images_cli() { "$PYTHON" -m hyperframe.images "$@"; }
started=$SECONDS
phase_start=$SECONDS
phase() {
    # Elapsed time of the previous phase, then the next one's name.
    if [[ -n "${phase_name:-}" ]]; then say "$phase_name: $((SECONDS - phase_start)) s"; fi
    phase_name="$1"
    phase_start=$SECONDS
}

if [[ "$mode" == resolve ]]; then
    images_cli resolve $write
    exit 0
fi
if [[ "$mode" == user ]]; then
    if ((${#targets[@]} != 3)); then
        echo "images/build.sh --user-image: expected CONTEXT DOCKERFILE NAME, got ${#targets[@]} argument(s)" >&2
        exit 2
    fi
    USER_CONTEXT="${targets[0]}"
    USER_DOCKERFILE="${targets[1]}"
    USER_NAME="${targets[2]}"
    [[ -d "$USER_CONTEXT" ]] || { echo "images/build.sh: $USER_CONTEXT is not a directory" >&2; exit 2; }
    [[ -f "$USER_DOCKERFILE" ]] || { echo "images/build.sh: $USER_DOCKERFILE is not a file" >&2; exit 2; }
fi
if [[ "$mode" == print ]]; then
    BUILDX_CONFIG="$(mktemp -d)"
    export BUILDX_CONFIG
    trap 'rm -rf "$BUILDX_CONFIG"' EXIT
    buildx="$("$PYTHON" -c 'from hyperframe_devcluster.paths import binary; print(binary("buildx"))')"
    "$buildx" bake --file docker-bake.hcl --print "${targets[@]}"
    exit 0
fi

# The bake file must say what the matrix says before anything is built from it.
if [[ "$mode" != user ]] && ! images_cli check; then
    echo "images/build.sh: run \`make generate\` first; the bake file must match images/matrix.yaml" >&2
    exit 2
fi

# --- can an engine run here? ------------------------------------------------------------------
no_engine() {
    echo "images/build.sh: cannot build images here: $1" >&2
    shift
    local line
    for line in "$@"; do echo "  $line" >&2; done
    if [[ "${CI:-}" == true ]]; then
        echo "  CI=true: building the images is part of CI, so this is a failure." >&2
        exit 1
    fi
    exit 3
}

tool() {
    "$PYTHON" -c 'import sys
from hyperframe_devcluster.paths import BinaryMissingError, binary
try:
    print(binary(sys.argv[1]))
except BinaryMissingError as err:
    sys.exit(str(err))' "$1"
}

if [[ "$(id -u)" != 0 ]]; then
    no_engine "buildkitd runs as root here (its OCI worker creates mounts and namespaces), and this is uid $(id -u)." \
        "Run \`make images\` as root, on a machine where root may run containers."
fi
RUNC="$(command -v runc || true)"
[[ -n "$RUNC" ]] || no_engine "runc is not installed (BuildKit's OCI worker runs every RUN step with it)." \
    "apt-get install runc"
for name in buildkitd buildctl buildx; do
    if ! path="$(tool "$name" 2>&1)"; then
        no_engine "$path"
    fi
    printf -v "BIN_${name^^}" '%s' "$path"
done

if [[ "$mode" == local ]]; then
    read -r -a local_profiles <<<"$(images_cli local-profiles)"
    ((${#local_profiles[@]})) || { echo "images/build.sh: images/matrix.yaml has no profile with release: false" >&2; exit 2; }
    command -v debootstrap >/dev/null || no_engine "debootstrap is not installed (the local profile's base is a debootstrap root filesystem)." \
        "apt-get install debootstrap"
    REGISTRY="${HYPERFRAME_REGISTRY:-}"
    if [[ -z "$REGISTRY" ]]; then
        echo "images/build.sh: HYPERFRAME_REGISTRY is not set: it names the registry (host:port) the images are pushed to." >&2
        echo "  Start the development cluster (make cluster-up) and export its environment:" >&2
        echo "  eval \"\$(python -m hyperframe_devcluster env)\"; or run a registry and set HYPERFRAME_REGISTRY=127.0.0.1:PORT." >&2
        exit 2
    fi
    if ! "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(f"http://{sys.argv[1]}/v2/", timeout=5)' "$REGISTRY" 2>/dev/null; then
        echo "images/build.sh: no registry answers at http://$REGISTRY/v2/ (HYPERFRAME_REGISTRY); start it and run again" >&2
        exit 2
    fi
    export REGISTRY
    ((${#targets[@]})) || targets=(local)
elif [[ "$mode" == release ]]; then
    if [[ -n "${REGISTRY:-}" ]]; then
        echo "images/build.sh --push: pushes go to the matrix registry; change registry: in images/matrix.yaml instead of REGISTRY" >&2
        exit 2
    fi
fi

# --- inputs of the local profiles: root filesystem and wheels ---------------------------------
allow=()
CACHE="${HYPERFRAME_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperframe/images}"
mkdir -p "$CACHE"
# One build at a time per cache: a second buildkitd cannot open the same state.
exec 9>"$CACHE/build.lock"
if ! flock --nonblock 9; then
    say "another images/build.sh uses $CACHE; waiting for it"
    flock 9
fi
if [[ "$mode" == local ]]; then
    for profile in "${local_profiles[@]}"; do
        phase "root filesystem of $profile"
        while IFS='=' read -r var value; do
            export "$var=$value"
            say "$var=$value"
            # bake reads build contexts outside the repository only when allowed, one by one.
            [[ "$var" == *_DIR ]] && allow+=("--allow=fs.read=$value")
        done < <(images_cli rootfs "$profile")
        phase "wheels of $profile"
        images_cli stage-wheels "$profile" "$CACHE/wheels-$profile" \
            --wheelhouse "${HYPERFRAME_WHEELHOUSE:-$HOME/.cache/hyperframe/wheels}"
        export WHEELHOUSE="$CACHE/wheels-$profile"
        allow+=("--allow=fs.read=$WHEELHOUSE")
    done
fi

# --- the private buildkitd --------------------------------------------------------------------
phase "start buildkitd"
RUN_DIR="$(mktemp -d /tmp/hyperframe-buildkit.XXXXXX)"
SOCKET="unix://$RUN_DIR/buildkitd.sock"
BUILDKIT_PID=""
KEEP_GB="${HYPERFRAME_BUILDKIT_CACHE_GB:-20}"
stop_engine() {
    local rc=$?
    if [[ -n "$BUILDKIT_PID" ]] && kill -0 "$BUILDKIT_PID" 2>/dev/null; then
        kill -TERM "$BUILDKIT_PID" 2>/dev/null || true
        for _ in $(seq 1 60); do kill -0 "$BUILDKIT_PID" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$BUILDKIT_PID" 2>/dev/null || true
        wait "$BUILDKIT_PID" 2>/dev/null || true
    fi
    if ((rc != 0)) && [[ -f "$RUN_DIR/buildkitd.log" ]]; then
        echo "images/build.sh: failed; the last lines of buildkitd's log:" >&2
        tail -n 20 "$RUN_DIR/buildkitd.log" >&2 || true
    fi
    rm -rf "$RUN_DIR"
    say "total: $((SECONDS - started)) s"
}
trap stop_engine EXIT
trap 'exit 130' INT TERM

{
    echo "root = \"$CACHE/buildkit\""
    echo "[grpc]"
    echo "  address = [\"$SOCKET\"]"
    echo "[worker.oci]"
    echo "  enabled = true"
    echo "  binary = \"$RUNC\""
    echo "  snapshotter = \"overlayfs\""
    # RUN steps share the host's network: apt reaches Debian's archive, nothing else is needed.
    echo "  networkMode = \"host\""
    echo "  gc = true"
    echo "  maxUsedSpace = \"${KEEP_GB}GB\""
    echo "[worker.containerd]"
    echo "  enabled = false"
    if [[ "$mode" == local ]]; then
        echo "[registry.\"$REGISTRY\"]"
        echo "  http = true"
    fi
    if [[ "$mode" == user ]]; then
        # The development registry (the framework image's and usually the push target's) and
        # any loopback one speak plain HTTP; every other registry is reached over HTTPS.
        declare -A http_hosts=()
        [[ -n "${HYPERFRAME_REGISTRY:-}" ]] && http_hosts["$HYPERFRAME_REGISTRY"]=1
        name_host="${USER_NAME%%/*}"
        [[ "$name_host" == 127.0.0.1* || "$name_host" == localhost* ]] && http_hosts["$name_host"]=1
        for host in "${!http_hosts[@]}"; do
            echo "[registry.\"$host\"]"
            echo "  http = true"
        done
    fi
} >"$RUN_DIR/buildkitd.toml"
"$BIN_BUILDKITD" --config "$RUN_DIR/buildkitd.toml" >"$RUN_DIR/buildkitd.log" 2>&1 &
BUILDKIT_PID=$!
for _ in $(seq 1 120); do
    "$BIN_BUILDCTL" --addr "$SOCKET" debug workers >/dev/null 2>&1 && break
    kill -0 "$BUILDKIT_PID" 2>/dev/null || { echo "images/build.sh: buildkitd exited at start" >&2; exit 1; }
    sleep 0.5
done
"$BIN_BUILDCTL" --addr "$SOCKET" debug workers >/dev/null

export BUILDX_CONFIG="$RUN_DIR/buildx"
# No provenance attestation: the pushed digest is then the image manifest itself, which every
# runtime pulls (containerd 1.6 included).
export BUILDX_NO_DEFAULT_ATTESTATIONS=1
"$BIN_BUILDX" create --name hyperframe --driver remote "$SOCKET" >/dev/null
bake=("$BIN_BUILDX" bake "${allow[@]}" --builder hyperframe --file docker-bake.hcl --progress "${BUILDX_PROGRESS:-plain}")

# Layers are zstd-compressed, not gzip: on this machine's 2 cores gzip -6 costs about 48 CPU-s per
# GB of torch libraries and zstd -3 about 6, for a smaller result (44 % of the input, gzip 50 %);
# docs/images.md has the measurement. containerd (1.5+) and the registry take zstd layers.
OUTPUT="type=image,push=true,compression=zstd,force-compression=true,oci-mediatypes=true"

case "$mode" in
    local)
        phase "build and push ${targets[*]} to $REGISTRY"
        "${bake[@]}" --set "*.output=$OUTPUT" --metadata-file "$RUN_DIR/metadata.json" "${targets[@]}"
        phase "record the digests"
        out="${HYPERFRAME_IMAGES_DIR:-$ROOT/.cluster/images}"
        for profile in "${local_profiles[@]}"; do
            images_cli write-local "$profile" "$REGISTRY" "$RUN_DIR/metadata.json" "$out"
        done
        ;;
    user)
        phase "build and push $USER_NAME"
        # The build log goes to stderr; stdout carries only the pushed reference.
        "$BIN_BUILDX" build --builder hyperframe --progress "${BUILDX_PROGRESS:-plain}" \
            --file "$USER_DOCKERFILE" \
            --output "type=image,name=$USER_NAME,push=true,compression=zstd,oci-mediatypes=true" \
            --metadata-file "$RUN_DIR/metadata.json" "$USER_CONTEXT" >&2
        digest="$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["containerimage.digest"])' "$RUN_DIR/metadata.json")"
        repo="$USER_NAME"
        last="${repo##*/}"
        [[ "$last" == *:* ]] && repo="${repo%:*}"  # the tag goes; the digest pins the image
        echo "$repo@$digest"
        ;;
    release)
        phase "build and push ${targets[*]:-default} to the matrix registry"
        "${bake[@]}" --set "*.output=$OUTPUT" --metadata-file "$RUN_DIR/metadata.json" "${targets[@]}"
        images_cli record-push "$RUN_DIR/metadata.json"
        echo "images/build.sh: pushed; commit images/published.yaml and the regenerated files" >&2
        ;;
esac

phase "prune BuildKit's cache to ${KEEP_GB} GB"
"$BIN_BUILDCTL" --addr "$SOCKET" prune --keep-storage "$((KEEP_GB * 1024))" | tail -n 1 >&2
phase ""
