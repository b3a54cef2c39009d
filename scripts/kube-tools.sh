#!/usr/bin/env bash
# scripts/kube-tools.sh [--dir]
#   Builds the Kubernetes tools the end-to-end tests run (tests/src/kube_apiserver.rs):
#   kube-apiserver, etcd and helm, from the Go modules in tests/kube/ (each
#   pins its versions in its go.mod and go.sum), into a cache outside the
#   checkout, shared by every checkout and run on the machine:
#
#     ${LOCKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockwarden}/kube/TAG/
#
#   where TAG names the pinned versions (k8s-1.37.2-etcd-3.7.3-helm-4.3.2).
#   A binary already there is kept; each is built to a temporary name and
#   moved into place, so a build cut short leaves nothing half-written.
#   LOCKWARDEN_KUBE_TOOLS, when set, names the directory instead. Prints the
#   directory when done. With --dir it only prints the directory (the
#   Makefile hands it to the tests as LOCKWARDEN_KUBE_TOOLS; without it, the
#   tests run this script with --dir: tests/src/kube_apiserver.rs).
#
#   Go's module and build caches stay where `go env` puts them. The first
#   build takes 10 to 15 minutes on 2 cores (kube-apiserver most of it) and
#   adds about 1 GB to the module cache and 4 to 7 GB to the build cache; a
#   rebuild from a warm build cache takes about 25 seconds.
#   Needs Go 1.26 or newer on PATH; the toolchain is never downloaded.
set -euo pipefail

die() { echo "kube-tools.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
modules=$root/tests/kube

# The version a module's go.mod requires of $2.
pinned() {
    local version
    version=$(grep -Eo "^[[:space:]]*(require[[:space:]]+)?$2 v[^[:space:]]+" "$modules/$1/go.mod" \
        | awk '{print $NF}' | head -n 1)
    [ -n "$version" ] || die "tests/kube/$1/go.mod requires no $2"
    echo "${version#v}"
}

k8s=$(pinned apiserver k8s.io/kubernetes)
etcd=$(pinned etcd go.etcd.io/etcd/server/v3)
helm=$(pinned helm helm.sh/helm/v4)
cache=${LOCKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockwarden}
dir=${LOCKWARDEN_KUBE_TOOLS:-$cache/kube/k8s-$k8s-etcd-$etcd-helm-$helm}

case "${1:-}" in
    --dir) echo "$dir"; exit 0 ;;
    "") ;;
    *) die "usage: scripts/kube-tools.sh [--dir]" ;;
esac

# Never fetch a toolchain, never consult a go.work above the modules, never
# let the build change go.mod or go.sum; static binaries, as upstream ships them.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
# How the upstream builds stamp their versions (what `--version` and the API
# server's /version report).
k8s_minor=${k8s#*.}; k8s_minor=${k8s_minor%%.*}
apiserver_ldflags="-X k8s.io/component-base/version.gitVersion=v$k8s"
apiserver_ldflags+=" -X k8s.io/component-base/version.gitMajor=${k8s%%.*}"
apiserver_ldflags+=" -X k8s.io/component-base/version.gitMinor=$k8s_minor"
helm_ldflags="-X helm.sh/helm/v4/internal/version.version=v$helm"

# build NAME MODULE PACKAGE LDFLAGS: builds PACKAGE in tests/kube/MODULE into $dir/NAME.
build() {
    local name=$1 module=$2 package=$3 ldflags=$4
    if [ -x "$dir/$name" ]; then
        return 0
    fi
    command -v go >/dev/null || die "Go is not on PATH: install Go 1.26 or newer"
    mkdir -p "$dir"
    local tmp="$dir/.$name.tmp.$$" start=$SECONDS
    trap 'rm -f "$tmp"' EXIT
    echo "building $name (tests/kube/$module) into $dir"
    (cd "$modules/$module" && go build -mod=readonly -trimpath -buildvcs=false \
        -ldflags "$ldflags" -o "$tmp" "$package") || die "cannot build $name"
    mv -f "$tmp" "$dir/$name"
    trap - EXIT
    echo "built $name in $((SECONDS - start)) s"
}

build etcd etcd . ""
build kube-apiserver apiserver . "$apiserver_ldflags"
build helm helm helm.sh/helm/v4/cmd/helm "$helm_ldflags"
echo "$dir"
