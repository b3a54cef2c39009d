#!/usr/bin/env bash
# The demo: the default policy judging a recorded request with one lock of
# each kind (expired, fresh, dead holder, live holder, future-dated,
# unreadable).
set -euo pipefail
bin=${1:-target/release/lockwarden}
here=$(cd "$(dirname "$0")/.." && pwd)

echo "== lockwarden policy info"
"$bin" policy info
echo
echo "== lockwarden policy eval --request examples/request.json"
"$bin" policy eval --request "$here/examples/request.json"
