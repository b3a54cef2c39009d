#!/usr/bin/env bash
# scripts/check-manifests.sh VENV
#   Validates every document of every YAML file under deploy/kubernetes
#   (recursively) against the Kubernetes API's schemas, strictly: a field
#   the API does not define is an error, as `kubectl apply` would refuse it.
#   VENV holds kubernetes-validate as deploy/requirements.txt pins it
#   (`make test` makes target/deploy-check). KUBERNETES_VERSION picks the
#   schemas (default 1.31.0; the pinned release bundles 1.25 to 1.37). The
#   check ends within CHECK_MANIFESTS_TIMEOUT seconds (default 120).
#
#   A kind with no schema fails the check when its API group is Kubernetes'
#   own (core, no dot, or *.k8s.io): a misspelt kind or a removed version
#   such as policy/v1beta1. A custom resource's (e.g. monitoring.coreos.com)
#   is skipped and listed: its schema is its CRD's, which is not bundled.
set -euo pipefail

die() { echo "check-manifests.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: scripts/check-manifests.sh VENV"
validate=$1/bin/kubernetes-validate
[ -x "$validate" ] || die "$validate is missing (make test installs it from deploy/requirements.txt)"
validate=$(cd "$1/bin" && pwd)/kubernetes-validate
cd "$(dirname "$0")/.."
version=${KUBERNETES_VERSION:-1.31.0}
limit=${CHECK_MANIFESTS_TIMEOUT:-120}

files=()
while IFS= read -r -d '' file; do
    files+=("$file")
done < <(find deploy/kubernetes -type f \( -name '*.yaml' -o -name '*.yml' \) -print0 | sort -z)
[ ${#files[@]} -gt 0 ] || die "no YAML files under deploy/kubernetes"

status=0
output=$(timeout "$limit" "$validate" --kubernetes-version "$version" --strict "${files[@]}" 2>&1) || status=$?
[ "$status" -ne 124 ] || die "kubernetes-validate took over ${limit}s"

failed=0 passed=0 skipped=""
while IFS= read -r line; do
    case "$line" in
        "INFO "*" passed for resource "*) passed=$((passed + 1)) ;;
        "WARN "*"Couldn't find schema for kind "*)
            kind=$(sed -n "s/.* kind \([^ ]*\) with api version \([^ ]*\) .*/\1 \2/p" <<<"$line")
            group=${kind#* }
            case "$group" in */*) group=${group%/*} ;; *) group="" ;; esac
            if [ -z "$group" ] || [[ "$group" != *.* ]] || [[ "$group" == *.k8s.io ]]; then
                echo "ERROR (no such kind or version in Kubernetes $version) ${line#WARN }"
                failed=1
            else
                skipped="$skipped ${kind% *}.$group"
            fi
            ;;
        "") ;;
        *) echo "$line" ;;
    esac
done <<<"$output"

if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
    die "FAILED: deploy/kubernetes does not validate against Kubernetes $version (strict)"
fi
echo "check-manifests.sh: $passed resources in ${#files[@]} files valid against Kubernetes $version (strict)${skipped:+; custom resources not checked:$skipped}"
