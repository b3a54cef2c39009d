#!/usr/bin/env bash
# scripts/check-chart.sh HELM [--write]
#   Checks the Helm chart deploy/helm/lockwarden with HELM (built by
#   scripts/kube-tools.sh): `helm lint --strict`, `helm template` with the
#   default values and with every switch turned (each operator off in turn,
#   namespaces given, no leader, monitoring on), and that
#   deploy/kubernetes/discover/lockwarden.yaml is what the chart renders with
#   its defaults in namespace lockwarden: the plain manifests are generated
#   from the chart, never edited by hand. --write regenerates that file.
#   Ends within CHECK_CHART_TIMEOUT seconds (default 120).
set -euo pipefail

die() { echo "check-chart.sh: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: scripts/check-chart.sh HELM [--write]"
helm=$1
[ -x "$helm" ] || die "$helm is missing (make kube builds it)"
cd "$(dirname "$0")/.."
chart=deploy/helm/lockwarden
plain=deploy/kubernetes/discover/lockwarden.yaml
limit=${CHECK_CHART_TIMEOUT:-120}
# helm keeps no state of ours: its caches and configuration in a temporary home.
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
export HELM_CACHE_HOME=$home/cache HELM_CONFIG_HOME=$home/config HELM_DATA_HOME=$home/data

# helm says at every run that it follows files/lockwarden-rules.yaml, a link
# to deploy/monitoring's (the one copy of the rules): that line is dropped.
run() { timeout "$limit" "$helm" "$@" 2> >(grep -v 'found symbolic link in path' >&2); }

render() {
    {
        echo "# lockwarden in discovery mode (docs/kubernetes.md): GENERATED from the Helm"
        echo "# chart deploy/helm/lockwarden with its default values by"
        echo "# \`scripts/check-chart.sh HELM --write\`; do not edit. Install with helm, or:"
        echo "#   kubectl create namespace lockwarden && kubectl apply -f $plain"
        run template lockwarden "$chart" --namespace lockwarden
    }
}

run lint --strict "$chart" >/dev/null || { run lint --strict "$chart"; die "helm lint failed"; }
variants=(
    ""
    "--set operators.velero=false"
    "--set operators.stash=false --set operators.kubestash=false"
    "--set operators.k8up=false --set operators.volsync=false"
    "--set namespaces={team-a,team-b} --set singleTenant=true --set allowInsecureTls=true"
    "--set leader.enabled=false --set mode=report"
    "--set metrics.serviceMonitor=true --set metrics.prometheusRule=true"
    "--set image.digest=sha256:0000000000000000000000000000000000000000000000000000000000000000"
)
for variant in "${variants[@]}"; do
    # shellcheck disable=SC2086 # one word per flag
    run template lockwarden "$chart" --namespace lockwarden $variant >/dev/null \
        || die "helm template ${variant:-(defaults)} failed"
done
if run template lockwarden "$chart" --set mode=delete-everything >/dev/null 2>&1; then
    die "the chart took mode=delete-everything"
fi

if [ "${2:-}" = --write ]; then
    render >"$plain"
    echo "check-chart.sh: wrote $plain"
    exit 0
fi
diff -u "$plain" <(render) >/dev/null || {
    diff -u "$plain" <(render) | head -40
    die "$plain is not what the chart renders: run scripts/check-chart.sh HELM --write"
}
echo "check-chart.sh: the chart lints and renders ${#variants[@]} ways; $plain is current"
