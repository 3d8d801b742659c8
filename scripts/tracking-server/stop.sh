#!/usr/bin/env bash
# Stop what scripts/tracking-server/start.sh started (same TRACKING_SERVER_DIR), in reverse order.
# --purge also deletes the state folder: the database and the (moto) artifacts are gone.
set -uo pipefail
D="${TRACKING_SERVER_DIR:-${TMPDIR:-/tmp}/recipe-ledger-tracking-server}"
as_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
stop_group() {  # the process group start.sh made with setsid: the server and its workers
  local pidfile="$D/$1.pid"
  [[ -f "$pidfile" ]] || return 0
  local pid; pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null
  fi
  rm -f "$pidfile"
}
stop_group mlflow
stop_group s3
if [[ -f "$D/pg/data/PG_VERSION" ]]; then as_pg pg_ctl -D "$D/pg/data" -m fast -w stop >/dev/null 2>&1 || true; fi
if [[ "${1:-}" == "--purge" ]]; then rm -rf "$D"; fi
echo "== tracking server stopped${1:+ ($1)}"
