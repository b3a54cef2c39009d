#!/usr/bin/env bash
# scripts/go-tools.sh SET [--dir]
#   Builds the Go programs the end-to-end tests run, each from a Go module of
#   ours that pins its versions in its go.mod and go.sum, into a cache outside
#   the checkout, shared by every checkout and run on the machine:
#
#     ${LOCKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockwarden}/SET/TAG/
#
#   where TAG names the pinned versions. The sets:
#
#     kube    kube-apiserver, etcd and helm (tests/kube/; tests/src/kube_apiserver.rs),
#             TAG k8s-1.37.2-etcd-3.7.3-helm-4.3.2; LOCKWARDEN_KUBE_TOOLS,
#             when set, names the directory instead. 10 to 15 minutes on 2
#             cores the first time (kube-apiserver most of it), about 1 GB of
#             module cache and 4 to 7 GB of build cache.
#     restic  restic (tests/restic/), TAG 0.19.0, the restic the end-to-end
#             suite runs beside Debian's (LOCKWARDEN_TEST_RESTIC); built with
#             upstream's build tags, and stamped with its version as upstream's
#             source is. About 3 minutes on 2 cores the first time.
#
#   A binary already there is kept; each is built to a temporary name and
#   moved into place, so a build cut short leaves nothing half-written.
#   Prints the directory when done; with --dir it only prints it (the
#   Makefile hands it to the tests). `go mod download` of the modules is
#   `SET --download`, so that a later build needs no network.
#
#   Go's module and build caches stay where `go env` puts them. Needs Go 1.26
#   or newer on PATH; the toolchain is never downloaded.
set -euo pipefail

die() { echo "go-tools.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${LOCKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockwarden}

# The version tests/MODULE/go.mod requires of $2.
pinned() {
    local version
    version=$(grep -Eo "^[[:space:]]*(require[[:space:]]+)?$2 v[^[:space:]]+" "$root/tests/$1/go.mod" \
        | awk '{print $NF}' | head -n 1)
    [ -n "$version" ] || die "tests/$1/go.mod requires no $2"
    echo "${version#v}"
}

set=${1:-}
case "$set" in
    kube)
        k8s=$(pinned kube/apiserver k8s.io/kubernetes)
        etcd=$(pinned kube/etcd go.etcd.io/etcd/server/v3)
        helm=$(pinned kube/helm helm.sh/helm/v4)
        dir=${LOCKWARDEN_KUBE_TOOLS:-$cache/kube/k8s-$k8s-etcd-$etcd-helm-$helm}
        modules=(kube/etcd kube/apiserver kube/helm) ;;
    restic)
        restic=$(pinned restic github.com/restic/restic)
        dir=$cache/restic/$restic
        modules=(restic) ;;
    *) die "usage: scripts/go-tools.sh kube|restic [--dir|--download]" ;;
esac

case "${2:-}" in
    --dir) echo "$dir"; exit 0 ;;
    --download | "") ;;
    *) die "usage: scripts/go-tools.sh kube|restic [--dir|--download]" ;;
esac

command -v go >/dev/null || die "Go is not on PATH: install Go 1.26 or newer"
# Never fetch a toolchain, never consult a go.work above the modules, never
# let the build change go.mod or go.sum; static binaries, as upstream ships them.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0

if [ "${2:-}" = --download ]; then
    for module in "${modules[@]}"; do
        (cd "$root/tests/$module" && timeout 1800 go mod download) || die "cannot download tests/$module's modules"
    done
    exit 0
fi

# build NAME MODULE PACKAGE TAGS LDFLAGS: builds PACKAGE in tests/MODULE into $dir/NAME.
build() {
    local name=$1 module=$2 package=$3 tags=$4 ldflags=$5
    if [ -x "$dir/$name" ]; then
        return 0
    fi
    mkdir -p "$dir"
    local tmp="$dir/.$name.tmp.$$" start=$SECONDS
    trap 'rm -f "$tmp"' EXIT
    echo "building $name (tests/$module) into $dir"
    (cd "$root/tests/$module" && timeout 3600 go build -mod=readonly -trimpath -buildvcs=false \
        -tags "$tags" -ldflags "$ldflags" -o "$tmp" "$package") || die "cannot build $name"
    mv -f "$tmp" "$dir/$name"
    trap - EXIT
    echo "built $name in $((SECONDS - start)) s"
}

case "$set" in
    kube)
        # How the upstream builds stamp their versions (what `--version` and
        # the API server's /version report).
        k8s_minor=${k8s#*.}; k8s_minor=${k8s_minor%%.*}
        apiserver_ldflags="-X k8s.io/component-base/version.gitVersion=v$k8s"
        apiserver_ldflags+=" -X k8s.io/component-base/version.gitMajor=${k8s%%.*}"
        apiserver_ldflags+=" -X k8s.io/component-base/version.gitMinor=$k8s_minor"
        build etcd kube/etcd . "" ""
        build kube-apiserver kube/apiserver . "" "$apiserver_ldflags"
        build helm kube/helm helm.sh/helm/v4/cmd/helm "" "-X helm.sh/helm/v4/internal/version.version=v$helm" ;;
    restic)
        # upstream's build.go: its default tags, symbols stripped; the version
        # is a constant in its source (internal/global), so nothing to stamp.
        build restic restic github.com/restic/restic/cmd/restic "selfupdate disable_grpc_modules" "-s -w"
        "$dir/restic" version | grep -q "^restic $restic " \
            || die "$dir/restic says $("$dir/restic" version), not $restic" ;;
esac
echo "$dir"
