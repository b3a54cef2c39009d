#!/usr/bin/env bash
# scripts/check-monitoring.sh [PROMTOOL]
#   Checks deploy/monitoring/ against the code (`make test` runs it):
#   1. every lockwarden_* name in the rules, their tests and the dashboard
#      is a series lockwarden exports;
#   2. promtool check rules: the alerting rules parse;
#   3. promtool test rules: rules-test.yaml, every alert firing and not;
#   4. every query of grafana-dashboard.json parses as PromQL (promtool
#      check rules on them as recording rules, the dashboard's variables
#      replaced by sample values).
#   PROMTOOL defaults to the promtool on PATH. Each step ends within
#   CHECK_MONITORING_TIMEOUT seconds (default 60).
#
# The exported names come from host-harness/src/watch/metrics.rs, not from
# a running lockwarden (which needs a repository to check before it lists a
# series). Each `registry.register("NAME", help, m.FIELD.clone())` call
# gives a family NAME under the prefix of `Registry::with_prefix("P")`;
# FIELD's type in `struct Metrics` (`Family<Labels, TYPE>` or TYPE) gives the
# series, as prometheus_client writes them:
#   Counter              P_NAME_total
#   Gauge, FloatGauge    P_NAME
#   Histogram            P_NAME_bucket, P_NAME_sum, P_NAME_count
# A call or a type this does not understand is an error, never a skipped
# metric. Exported series that the dashboard does not show are listed as a
# warning.
set -euo pipefail

die() { echo "check-monitoring.sh: $*" >&2; exit 1; }

promtool=${1:-promtool}
case "$promtool" in
    */*) [ -x "$promtool" ] && promtool=$(cd "$(dirname "$promtool")" && pwd)/$(basename "$promtool") ;;
esac
cd "$(dirname "$0")/.."
limit=${CHECK_MONITORING_TIMEOUT:-60}
dir=deploy/monitoring
rules=$dir/lockwarden-rules.yaml
tests=$dir/rules-test.yaml
dashboard=$dir/grafana-dashboard.json
source=host-harness/src/watch/metrics.rs

command -v "$promtool" >/dev/null || die "no promtool ($promtool); make test unpacks one into target/"
for f in "$rules" "$tests" "$dashboard" "$source"; do
    [ -r "$f" ] || die "$f is missing"
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bounded() { timeout "$limit" "$@" || die "failed (or took over ${limit}s): $*"; }

# 1. The names lockwarden exports, and those deploy/monitoring/ uses.
prefix=$(sed -n 's/.*Registry::with_prefix("\([a-z_]*\)").*/\1/p' "$source")
[ "$(printf '%s\n' "$prefix" | wc -l)" = 1 ] && [ -n "$prefix" ] \
    || die "$source: expected exactly one Registry::with_prefix(\"...\")"
# FIELD TYPE for each field of struct Metrics.
awk '
    /^pub struct Metrics *\{/ { inside = 1; next }
    inside && /^\}/ { exit }
    inside && match($0, /^ *pub [a-z_0-9]+: /) {
        field = $0; sub(/^ *pub /, "", field); sub(/:.*/, "", field)
        type = $0; sub(/^ *pub [a-z_0-9]+: */, "", type); sub(/, *$/, "", type)
        if (type ~ /^Family</) { sub(/^Family<[A-Za-z_0-9]+, */, "", type); sub(/>$/, "", type) }
        sub(/<.*/, "", type)
        print field, type
    }
' "$source" >"$work/types"
[ -s "$work/types" ] || die "$source: no fields found in struct Metrics"
# NAME FIELD for each register call.
awk '
    BEGIN { RS = "register\\(" }
    NR > 1 {
        if (!match($0, /^[ \t\n]*"[a-z_0-9]+"/)) { print "UNPARSED", substr($0, 1, 60); next }
        name = substr($0, RSTART, RLENGTH); sub(/^[ \t\n]*"/, "", name); sub(/"$/, "", name)
        if (!match($0, /m\.[a-z_0-9]+\.clone\(\)/)) { print "UNPARSED", name; next }
        field = substr($0, RSTART + 2, RLENGTH - 10)
        print name, field
    }
' "$source" >"$work/registered"
[ -s "$work/registered" ] || die "$source: no registry.register(...) calls found"
if grep -q '^UNPARSED' "$work/registered"; then
    die "$source: a register call this script cannot read (not register(\"name\", help, m.field.clone())): $(grep '^UNPARSED' "$work/registered" | head -n 1)"
fi
while read -r name field; do
    type=$(awk -v f="$field" '$1 == f { print $2 }' "$work/types")
    case "$type" in
        Counter) echo "${prefix}_${name}_total" ;;
        Gauge | FloatGauge) echo "${prefix}_${name}" ;;
        Histogram) printf '%s\n' "${prefix}_${name}_bucket" "${prefix}_${name}_sum" "${prefix}_${name}_count" ;;
        "") die "$source: registered field m.$field is not a field of struct Metrics" ;;
        *) die "$source: metric $name has type $type: teach scripts/check-monitoring.sh its series names" ;;
    esac
done <"$work/registered" | sort -u >"$work/exported"

grep -oh "${prefix}_[a-z0-9_]*" "$rules" "$tests" "$dashboard" | sort -u >"$work/referenced"
unknown=$(comm -23 "$work/referenced" "$work/exported")
if [ -n "$unknown" ]; then
    {
        echo "check-monitoring.sh: FAILED: deploy/monitoring/ names series lockwarden does not export:"
        # shellcheck disable=SC2001 # indent each line
        echo "$unknown" | sed 's/^/    /'
        for name in $unknown; do
            grep -nw -- "$name" "$rules" "$tests" "$dashboard" | sed 's/^/      /' | cut -c 1-160
        done
        echo "  exported (from $source):"
        sed 's/^/    /' "$work/exported"
    } >&2
    exit 1
fi
# 2 and 3.
bounded "$promtool" check rules "$rules"
bounded "$promtool" test rules "$tests"

# 4. The dashboard's queries, as recording rules.
bounded python3 - "$dashboard" "$work/dashboard-rules.yaml" <<'EOF'
import json, sys

with open(sys.argv[1]) as f:
    dash = json.load(f)
values = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1d",
          "$window": "30m", "$repository": ".+"}
exprs = []

def walk(panels):
    for panel in panels:
        for t in panel.get("targets", []):
            exprs.append((panel.get("title", "?"), t["expr"]))
        walk(panel.get("panels", []))

walk(dash["panels"])
for v in dash["templating"]["list"]:
    if v["type"] == "query":
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        # label_values(METRIC, LABEL) is Grafana's, not PromQL: check METRIC.
        if q.startswith("label_values("):
            q = q[len("label_values("):].rsplit(",", 1)[0]
        exprs.append(("variable " + v["name"], q))
if not exprs:
    sys.exit("no queries found in the dashboard")
with open(sys.argv[2], "w") as out:
    out.write("groups:\n  - name: dashboard\n    rules:\n")
    for i, (title, expr) in enumerate(exprs):
        for name in sorted(values, key=len, reverse=True):
            expr = expr.replace(name, values[name])
        if "$" in expr:
            sys.exit(f"{title}: a dashboard variable this check does not know: {expr}")
        out.write(f"      # {title}\n      - record: dashboard_query_{i}\n        expr: {json.dumps(expr)}\n")
print(f"{len(exprs)} dashboard queries")
EOF
bounded "$promtool" check rules "$work/dashboard-rules.yaml" >/dev/null

unshown=$(grep -oh "${prefix}_[a-z0-9_]*" "$dashboard" | sort -u | comm -13 - "$work/exported")
if [ -n "$unshown" ]; then
    echo "check-monitoring.sh: warning: series the dashboard does not show:" $unshown >&2
fi
echo "check-monitoring.sh: rules, tests and dashboard name $(wc -l <"$work/referenced") series, all of the $(wc -l <"$work/exported") lockwarden exports"
