#!/usr/bin/env bash
# scripts/need.sh COMMAND:PACKAGE ...
# Installs the Debian package of each command that is missing (apt-get, as
# root); otherwise says which to install and fails.
set -euo pipefail
missing=""
for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null || missing="$missing ${pair#*:}"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing$missing with apt-get"
    apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
else
    echo "missing:$missing; install them (e.g. sudo apt-get install$missing) and run make again" >&2
    exit 1
fi
