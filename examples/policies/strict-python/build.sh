#!/bin/sh
# Builds a Python policy into a component: ./build.sh [OUT [SOURCE_DIR]]
#
# OUT defaults to policy.wasm, SOURCE_DIR to this script's directory, which
# holds app.py (the module with the exported Policy class). The contract is
# read from $LOCKWARDEN_WIT, by default the wit/ directory beside app.py.
# componentize-py (requirements.txt) comes from $COMPONENTIZE_PY, by default
# .venv/bin/componentize-py beside this script, or else the PATH's.
#
# --stub-wasi: every WASI import is replaced, inside the component, by a stub
# that traps, so the component imports nothing but the contract and
# lockwarden's sandbox loads it (docs/writing-a-policy.md says what a Python
# policy can and cannot do because of it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-policy.wasm}")
src=$(cd "${2:-$here}" && pwd)
wit=$(realpath -m "${LOCKWARDEN_WIT:-$src/wit}")
tool=${COMPONENTIZE_PY:-}
if [ -z "$tool" ]; then
    if [ -x "$here/.venv/bin/componentize-py" ]; then tool=$here/.venv/bin/componentize-py; else tool=componentize-py; fi
fi
command -v "$tool" >/dev/null 2>&1 || {
    echo "componentize-py is missing: run python3 -m venv .venv && .venv/bin/pip install -r requirements.txt in $here" >&2
    exit 1
}
mkdir -p "$(dirname "$out")"
cd "$src"
exec "$tool" --quiet -d "$wit" -w stale-lock-policy \
    componentize app --stub-wasi -o "$out"
