#!/usr/bin/env bash
# The demo: a scratch restic repository with one lock left by a backup that
# was kill -9'd and one held by a backup that is still running. lockwarden
# checks it, removes the dead holder's lock, keeps the live one, and restic
# works again. Needs restic (make setup installs it). The repository stays in
# target/demo/ for `lockwarden watch --config examples/watch.toml`.
set -euo pipefail
bin=$(realpath "${1:-target/x86_64-unknown-linux-musl/release/lockwarden}")
here=$(cd "$(dirname "$0")/.." && pwd)
work="$here/target/demo"
rm -rf "$work" && mkdir -p "$work"
live_pid=""
cleanup() {
  [ -n "${live_fd:-}" ] && exec {live_fd}>&- || true
  [ -n "$live_pid" ] && wait "$live_pid" 2>/dev/null || true
  rm -f "$work"/*.fifo
}
trap cleanup EXIT

printf 'demo password' > "$work/password"
export RESTIC_REPOSITORY="$work/repo" RESTIC_PASSWORD_FILE="$work/password" RESTIC_CACHE_DIR="$work/cache"
export LOCKWARDEN_CACHE_DIR="$work/lockwarden-cache"
locks() { ls "$RESTIC_REPOSITORY/locks" | wc -l; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# Starts `restic backup --stdin` reading from a fifo that this shell holds
# open, and waits until its lock file exists. Sets holder_pid and holder_fd.
start_holder() {
  local before; before=$(locks)
  mkfifo "$work/$1.fifo"
  restic backup --quiet --stdin --stdin-filename "$1" < "$work/$1.fifo" &
  holder_pid=$!
  exec {holder_fd}>"$work/$1.fifo"
  echo "data from $1" >&"$holder_fd"
  for _ in $(seq 200); do [ "$(locks)" -gt "$before" ] && return; sleep 0.1; done
  echo "restic wrote no lock" >&2; exit 1
}

say "restic init (in $work)"
restic init --quiet

say "a backup that gets kill -9'd: its lock stays behind"
start_holder killed
kill -9 "$holder_pid"; wait "$holder_pid" 2>/dev/null || true
exec {holder_fd}>&-
echo "restic backup (pid $holder_pid) killed"

say "a backup that is still running: its lock is live"
start_holder live
live_pid=$holder_pid live_fd=$holder_fd
echo "restic backup (pid $live_pid) running"

say "restic is blocked: restic check (needs an exclusive lock)"
restic check 2>&1 | head -3 || true

say "lockwarden check"
"$bin" check || echo "(exit $?: some locks would be removed)"

say "lockwarden unlock"
"$bin" unlock

say "what is left: the live holder's lock, and nothing else"
"$bin" check

say "stop the live backup; it removes its own lock; restic works again"
exec {live_fd}>&-; wait "$live_pid"; live_pid=""
restic check --quiet && echo "restic check: no errors"
echo
echo "The repository stays in target/demo/repo; watch it with:"
echo "  $bin watch --config examples/watch.toml    (metrics: curl 127.0.0.1:9567/metrics)"
