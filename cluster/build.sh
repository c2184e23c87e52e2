#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, the KWOK controller and helm), the real node (kubelet, kube-proxy, CoreDNS) and the
# image toolchain (buildkitd, buildctl, buildx) and the Kueue controller from the Go module proxy,
# at the versions pinned in cluster/versions.env.
#
# Binaries go to a per-user cache keyed by version:
#   ${HYPERFRAME_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperframe/bin}/<name>-<version>
# A binary is rebuilt only when its pin changes, so a warm run takes well under a second.
#
# Usage: cluster/build.sh            build what is missing
#        cluster/build.sh --check    exit 1 (and say what is missing) instead of building
#        cluster/build.sh --gomod        only (re)generate the wrapper go.mod files from the pins
#        cluster/build.sh --print-bin-dir
#
# Build flags, chosen knowingly: `-ldflags "-s -w -X ..."` only affects the link step, so it
# reuses every compiled package in the Go build cache; `-trimpath` is NOT used because it changes
# every compile action id and would turn a warm Go cache cold for no functional gain.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSIONS_FILE="$HERE/versions.env"
GOMOD_DIR="$HERE/gomod"
BIN_DIR="${HYPERFRAME_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperframe/bin}"
TIMES_LOG="$BIN_DIR/build-times.tsv"

mode=build
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  --gomod) mode=gomod ;;
  --print-bin-dir) echo "$BIN_DIR"; exit 0 ;;
  -h|--help) sed -n "2,17p" "$0"; exit 0 ;;
  *) echo "build.sh: unknown argument '$1' (expected --check or --print-bin-dir)" >&2; exit 2 ;;
esac

# versions.env is KEY=VALUE lines; read it without executing it.
pin() {
  local value
  value="$(sed -n "s/^$1=\\([^[:space:]#]*\\).*/\\1/p" "$VERSIONS_FILE")"
  if [[ -z "$value" ]]; then
    echo "build.sh: $VERSIONS_FILE has no $1=... line" >&2
    exit 2
  fi
  echo "$value"
}
GO_MIN="$(pin GO_MIN_VERSION)"
K8S="$(pin KUBERNETES_VERSION)"
ETCD="$(pin ETCD_VERSION)"
KWOK="$(pin KWOK_VERSION)"
HELM="$(pin HELM_VERSION)"
COREDNS="$(pin COREDNS_VERSION)"
BUILDKIT="$(pin BUILDKIT_VERSION)"
BUILDX="$(pin BUILDX_VERSION)"
KUEUE="$(pin KUEUE_VERSION)"
# k8s.io/kubernetes v1.N.M pairs with staging modules v0.N.M.
K8S_STAGING="v0.${K8S#v1.}"
K8S_MINOR="$(echo "$K8S" | cut -d. -f2)"

log() { printf '>> %s\n' "$*"; }
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

target() { echo "$BIN_DIR/$1-$2"; }

missing=()
for spec in "etcd $ETCD" "kube-apiserver $K8S" "kube-controller-manager $K8S" "kube-scheduler $K8S" \
            "kubectl $K8S" "kubelet $K8S" "kube-proxy $K8S" "kwok $KWOK" "helm $HELM" "coredns $COREDNS" \
            "buildkitd $BUILDKIT" "buildctl $BUILDKIT" "buildx $BUILDX" "pause $K8S" "kueue $KUEUE"; do
  read -r name version <<<"$spec"
  [[ -x "$(target "$name" "$version")" ]] || missing+=("$name-$version")
done
[[ -f "$BIN_DIR/kwok-$KWOK-stage-crd.yaml" ]] || missing+=("kwok-$KWOK-stage-crd.yaml")
[[ -f "$BIN_DIR/kueue-$KUEUE-manifests.yaml" ]] || missing+=("kueue-$KUEUE-manifests.yaml")

if [[ "$mode" == check ]]; then
  if ((${#missing[@]})); then
    echo "missing in $BIN_DIR: ${missing[*]}; run 'make cluster-build'" >&2
    exit 1
  fi
  echo "all control-plane binaries present in $BIN_DIR"
  exit 0
fi

if [[ "$mode" == gomod ]]; then
  missing=(etcd- kube- kwok- helm- buildkitd- kueue-)
elif ((${#missing[@]} == 0)); then
  log "binaries up to date in $BIN_DIR (k8s $K8S, etcd $ETCD, kwok $KWOK, helm $HELM, coredns $COREDNS, buildkit $BUILDKIT, buildx $BUILDX, kueue $KUEUE)"
  exit 0
fi

command -v go >/dev/null || die "the Go toolchain (>= $GO_MIN) is needed to build the control plane; install it from https://go.dev/dl/"
GO_HAVE="$(go env GOVERSION | sed 's/^go//')"
if [[ "$(printf '%s\n%s\n' "$GO_MIN" "$GO_HAVE" | sort -V | head -1)" != "$GO_MIN" ]]; then
  die "go $GO_HAVE is too old: k8s.io/kubernetes $K8S needs go >= $GO_MIN (GO_MIN_VERSION in $VERSIONS_FILE)"
fi
mkdir -p "$BIN_DIR"
[[ -f "$TIMES_LOG" ]] || printf 'finished_utc\tbinary\tversion\tseconds\n' >"$TIMES_LOG"

# Prints the local path of a module file (.mod or unpacked dir) downloaded from the proxy.
module_field() { # <module@version> <GoMod|Dir|Info>
  (cd "$BIN_DIR" && go mod download -json "$1") | sed -n "s/^[[:space:]]*\"$2\": \"\\(.*\\)\",\\{0,1\\}$/\\1/p"
}
# The release time recorded by the module proxy: a reproducible build date.
module_time() { sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(module_field "$1" Info)"; }

# --- wrapper go.mod files, generated from the pins ----------------------------------------
# A wrapper is regenerated (and `go mod tidy`-ed, which needs the proxy) only when its pin line
# differs from versions.env; otherwise the committed go.mod/go.sum are used as they are.
write_wrapper() { # <dir> <module> <main-module> <version> <tools imports...> ; replaces on stdin
  local dir="$1" module="$2" main="$3" version="$4"
  shift 4
  local replaces
  replaces="$(cat)"
  mkdir -p "$dir"
  {
    echo "// Wrapper module generated by cluster/build.sh from cluster/versions.env; do not edit by hand."
    echo "module $module"
    echo
    echo "go $GO_MIN"
    echo
    echo "require $main $version"
    echo
    echo "replace ("
    printf '%s\n' "$replaces"
    echo ")"
  } >"$dir/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "// Package tools pins the commands built from this wrapper module."
    echo "package tools"
    echo
    echo "import ("
    for imp in "$@"; do printf '\t_ "%s"\n' "$imp"; done
    echo ")"
  } >"$dir/tools.go"
  rm -f "$dir/go.sum"
  log "regenerating $dir/go.mod for $main $version (go mod tidy)"
  (cd "$dir" && go mod tidy)
}

K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)

ensure_kubernetes_wrapper() {
  local dir="$GOMOD_DIR/kubernetes" cmd imports=()
  for cmd in "${K8S_COMMANDS[@]}"; do imports+=("k8s.io/kubernetes/cmd/$cmd"); done
  if grep -qx "require k8s.io/kubernetes $K8S" "$dir/go.mod" 2>/dev/null \
    && [[ "$(grep -c '_ "k8s.io/kubernetes/cmd/' "$dir/tools.go" 2>/dev/null)" == "${#K8S_COMMANDS[@]}" ]] \
    && ! grep -E '^\s+k8s\.io/\S+ => k8s\.io/\S+ v' "$dir/go.mod" | grep -vq " $K8S_STAGING\$"; then
    return
  fi
  local gomod
  gomod="$(module_field "k8s.io/kubernetes@$K8S" GoMod)"
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$K8S from the Go module proxy"
  sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*#\t\1 => \1 '"$K8S_STAGING"'#p' "$gomod" \
    | write_wrapper "$dir" hyperframe.dev/cluster/kubernetes k8s.io/kubernetes "$K8S" "${imports[@]}"
}

ensure_etcd_wrapper() {
  local dir="$GOMOD_DIR/etcd"
  if grep -qx "require go.etcd.io/etcd/server/v3 $ETCD" "$dir/go.mod" 2>/dev/null \
    && ! grep -E '^\s+go\.etcd\.io/\S+ => go\.etcd\.io/\S+ v' "$dir/go.mod" | grep -vq " $ETCD\$"; then
    return
  fi
  local gomod
  gomod="$(module_field "go.etcd.io/etcd/server/v3@$ETCD" GoMod)"
  [[ -f "$gomod" ]] || die "could not download go.etcd.io/etcd/server/v3@$ETCD from the Go module proxy"
  # etcd's own replaces point at sibling directories of its repository; pin each to the release.
  sed -n 's#^[[:space:]]*\(go\.etcd\.io/etcd/[^ ]*\) => \.\./.*#\t\1 => \1 '"$ETCD"'#p' "$gomod" \
    | write_wrapper "$dir" hyperframe.dev/cluster/etcd go.etcd.io/etcd/server/v3 "$ETCD" go.etcd.io/etcd/server/v3
}

# BuildKit's go.mod has `exclude` directives, which `go install pkg@version` also refuses.
ensure_buildkit_wrapper() {
  local dir="$GOMOD_DIR/buildkit"
  if grep -qx "require github.com/moby/buildkit $BUILDKIT" "$dir/go.mod" 2>/dev/null; then
    return
  fi
  write_wrapper "$dir" hyperframe.dev/cluster/buildkit github.com/moby/buildkit "$BUILDKIT" \
    github.com/moby/buildkit/cmd/buildkitd github.com/moby/buildkit/cmd/buildctl </dev/null
}

# --- building -------------------------------------------------------------------------------
build_one() { # <name> <version> <command that writes the binary to $out>
  local name="$1" version="$2"
  shift 2
  local dest
  dest="$(target "$name" "$version")"
  if [[ -x "$dest" ]]; then
    log "$name $version: cached"
    return
  fi
  log "$name $version: building (a cold build takes minutes) ..."
  local start=$SECONDS tmp
  tmp="$(mktemp -d "$BIN_DIR/.build-$name.XXXXXX")"
  out="$tmp/$name" "$@" || { rm -rf "$tmp"; die "building $name $version failed (see the go output above)"; }
  mv "$tmp/$name" "$dest"
  rm -rf "$tmp"
  local took=$((SECONDS - start))
  printf '%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$name" "$version" "$took" >>"$TIMES_LOG"
  log "$name $version: built in ${took}s -> $dest"
}

k8s_ldflags() {
  local date flags=(-s -w) pkg
  date="$(module_time "k8s.io/kubernetes@$K8S")"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=(-X "$pkg.gitVersion=$K8S" -X "$pkg.gitMajor=1" -X "$pkg.gitMinor=$K8S_MINOR"
      -X "$pkg.gitCommit=" -X "$pkg.gitTreeState=clean" -X "$pkg.buildDate=$date")
  done
  echo "${flags[*]}"
}

go_build_k8s() { (cd "$GOMOD_DIR/kubernetes" && go build -ldflags "$K8S_LDFLAGS" -o "$out" "k8s.io/kubernetes/cmd/$1"); }
go_build_etcd() {
  (cd "$GOMOD_DIR/etcd" && go build -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD" -o "$out" go.etcd.io/etcd/server/v3)
}
go_build_buildkit() { # <command>
  (cd "$GOMOD_DIR/buildkit" && go build -ldflags "-s -w -X github.com/moby/buildkit/version.Version=$BUILDKIT" \
    -o "$out" "github.com/moby/buildkit/cmd/$1")
}
go_install_to_out() { # <package@version> <ldflags>; modules without replace directives
  local gobin
  gobin="$(dirname "$out")"
  GOBIN="$gobin" go install -ldflags "$2" "$1"
}

need() { [[ " ${missing[*]} " == *" $1"* ]]; }

if [[ "$mode" == gomod ]]; then
  ensure_etcd_wrapper
  ensure_kubernetes_wrapper
  ensure_buildkit_wrapper
  ensure_kueue_wrapper
  log "wrapper modules match $VERSIONS_FILE"
  exit 0
fi

if need etcd-; then
  ensure_etcd_wrapper
  build_one etcd "$ETCD" go_build_etcd
fi

if need kube- || need kubectl- || need kubelet-; then
  ensure_kubernetes_wrapper
  K8S_LDFLAGS="$(k8s_ldflags)"
  for cmd in "${K8S_COMMANDS[@]}"; do
    build_one "$cmd" "$K8S" go_build_k8s "$cmd"
  done
fi

if need kwok-; then
  build_one kwok "$KWOK" go_install_to_out "sigs.k8s.io/kwok/cmd/kwok@$KWOK" "-s -w"
  # The Stage CRD ships in the kwok module; the cluster installs it so Stages are API objects.
  crd="$(module_field "sigs.k8s.io/kwok@$KWOK" Dir)/kustomize/crd/bases/kwok.x-k8s.io_stages.yaml"
  [[ -f "$crd" ]] || die "kwok $KWOK has no Stage CRD at $crd"
  cp "$crd" "$BIN_DIR/kwok-$KWOK-stage-crd.yaml"
  chmod 0644 "$BIN_DIR/kwok-$KWOK-stage-crd.yaml"
fi

if need helm-; then
  helm_client_go="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$(module_field "helm.sh/helm/v3@$HELM" GoMod)")"
  helm_flags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  helm_flags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$helm_client_go"
  helm_flags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$helm_client_go"
  build_one helm "$HELM" go_install_to_out "helm.sh/helm/v3/cmd/helm@$HELM" "$helm_flags"
fi

# The pod sandbox ("pause") process of the real node, compiled from the C source that ships in the
# pinned k8s.io/kubernetes module (build/pause/linux/pause.c), statically, as upstream does.
build_pause() {
  local src
  src="$(module_field "k8s.io/kubernetes@$K8S" Dir)/build/pause/linux/pause.c"
  [[ -f "$src" ]] || die "k8s.io/kubernetes $K8S has no $src"
  command -v gcc >/dev/null || die "gcc is needed to compile the pause binary (apt-get install gcc libc6-dev)"
  gcc -Os -Wall -Werror -static -DVERSION="$K8S" -o "$out" "$src"
}
if need pause-; then
  build_one pause "$K8S" build_pause
fi

# The real node's cluster DNS (modules without replace directives: plain `go install`).
if need coredns-; then
  build_one coredns "$COREDNS" go_install_to_out "github.com/coredns/coredns@$COREDNS" \
    "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS"
fi

# The image toolchain: BuildKit's daemon and client, and buildx for `buildx bake`.
if need buildkitd- || need buildctl-; then
  ensure_buildkit_wrapper
  for cmd in buildkitd buildctl; do
    build_one "$cmd" "$BUILDKIT" go_build_buildkit "$cmd"
  done
fi
if need buildx-; then
  build_one buildx "$BUILDX" go_install_to_out "github.com/docker/buildx/cmd/buildx@$BUILDX" \
    "-s -w -X github.com/docker/buildx/version.Version=$BUILDX"
fi

# Kueue, and its CRDs and webhook configurations from the same module, which the opt-in dev
# cluster installs. Kueue's main reads the metrics serving certificate from a fixed path
# (/etc/kueue/metrics/certs) unless it manages certificates in-cluster (for a Service DNS name, not
# the loopback address the dev cluster's webhooks use). So cmd/kueue (one main.go, no internal
# imports) is built from a copy with that one line reading $KUEUE_METRICS_CERT_DIR first, in a
# throw-away module with the wrapper's go.mod/go.sum (the module cache is read-only, and `-overlay`
# refuses files under it); every other package is the pinned module's own. build.sh fails if the
# line it patches is not there.
go_build_kueue() {
  local src tmp
  src="$(module_field "sigs.k8s.io/kueue@$KUEUE" Dir)/cmd/kueue/main.go"
  tmp="$(dirname "$out")/module"
  grep -q 'metricsCertPath := "/etc/kueue/metrics/certs"' "$src" \
    || die "kueue $KUEUE: cmd/kueue/main.go no longer has the metrics certificate path build.sh patches"
  mkdir -p "$tmp/cmd/kueue"
  cp "$GOMOD_DIR/kueue/go.mod" "$GOMOD_DIR/kueue/go.sum" "$tmp/"
  sed 's#metricsCertPath := "/etc/kueue/metrics/certs"#metricsCertPath := os.Getenv("KUEUE_METRICS_CERT_DIR"); if metricsCertPath == "" { metricsCertPath = "/etc/kueue/metrics/certs" }#' \
    "$src" >"$tmp/cmd/kueue/main.go"
  (cd "$tmp" && go build -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE" -o "$out" ./cmd/kueue)
}
ensure_kueue_wrapper() {
  local dir="$GOMOD_DIR/kueue"
  if grep -qx "require sigs.k8s.io/kueue $KUEUE" "$dir/go.mod" 2>/dev/null; then
    return
  fi
  write_wrapper "$dir" hyperframe.dev/cluster/kueue sigs.k8s.io/kueue "$KUEUE" sigs.k8s.io/kueue/cmd/kueue </dev/null
}
if need kueue-; then
  ensure_kueue_wrapper
  build_one kueue "$KUEUE" go_build_kueue
  kueue_dir="$(module_field "sigs.k8s.io/kueue@$KUEUE" Dir)/config/components"
  [[ -f "$kueue_dir/webhook/manifests.yaml" ]] || die "kueue $KUEUE has no webhook manifests in $kueue_dir"
  manifests="$BIN_DIR/kueue-$KUEUE-manifests.yaml"
  for doc in "$kueue_dir"/crd/bases/*.yaml "$kueue_dir/webhook/manifests.yaml"; do
    printf -- '---\n'
    cat "$doc"
  done >"$manifests.tmp"
  mv "$manifests.tmp" "$manifests"
  chmod 0644 "$manifests"
fi

log "binaries ready in $BIN_DIR"
