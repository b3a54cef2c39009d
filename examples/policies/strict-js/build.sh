#!/bin/sh
# Builds a JavaScript policy into a component: ./build.sh [OUT [SOURCE_DIR]]
#
# OUT defaults to policy.wasm, SOURCE_DIR to this script's directory, which
# holds policy.js (the module exporting `policy`; it may import modules
# beside it). The contract is read from $LOCKWARDEN_WIT, by default the wit/
# directory beside policy.js. componentize-js comes from package.json
# (npm ci beside this script).
#
# --disable of every optional feature (stdio, random, clocks, http,
# fetch-event): the engine is built without them, so the component imports
# nothing but the contract and lockwarden's sandbox loads it
# (docs/writing-a-policy.md says what a JavaScript policy can and cannot do
# because of it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-policy.wasm}")
src=$(cd "${2:-$here}" && pwd)
wit=$(realpath -m "${LOCKWARDEN_WIT:-$src/wit}")
tool=$here/node_modules/.bin/componentize-js
[ -x "$tool" ] || { echo "componentize-js is missing: run npm ci in $here" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
cd "$src"
exec "$tool" policy.js --wit "$wit/policy.wit" --world-name stale-lock-policy \
    --disable stdio random clocks http fetch-event --out "$out"
