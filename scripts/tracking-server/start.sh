#!/usr/bin/env bash
# Start a shared MLflow tracking server on this machine, all on loopback: PostgreSQL 15 as the
# backend store, an S3 API for artifacts (moto's server, standing in for a lab's S3 or MinIO), and
# `mlflow server` proxying the artifacts (--serve-artifacts), so that boxes that sync hold no
# storage keys. docs/scale-out.md has the same steps as bare commands, and what to change for a lab.
#
#   scripts/tracking-server/start.sh            # prints the MLFLOW_TRACKING_URI to use
#   scripts/tracking-server/stop.sh [--purge]
#
# Settings (environment; the defaults suit one machine and CI):
#   TRACKING_SERVER_DIR   state: PostgreSQL's data, logs, pids, tracking-server.env
#                         (default $TMPDIR/recipe-ledger-tracking-server; kept by stop.sh, so a
#                         restart skips initdb and MLflow's schema migrations: seconds, not a minute)
#   TRACKING_PG_PORT / TRACKING_S3_PORT / TRACKING_MLFLOW_PORT   (55439 / 55441 / 55440)
#   TRACKING_S3_BUCKET    (recipe-ledger-mlflow)   TRACKING_WORKERS (2)
#   AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY   the S3 keys the server uses (moto takes any; default
#                         "testing"); they reach the server's environment only, never a command line.
# Credentials never reach a command line (ps shows those): the database URL goes to the server as
# MLFLOW_BACKEND_STORE_URI, the S3 keys as AWS_* variables.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
D="${TRACKING_SERVER_DIR:-${TMPDIR:-/tmp}/recipe-ledger-tracking-server}"
PG_PORT="${TRACKING_PG_PORT:-55439}"
S3_PORT="${TRACKING_S3_PORT:-55441}"
MLFLOW_PORT="${TRACKING_MLFLOW_PORT:-55440}"
BUCKET="${TRACKING_S3_BUCKET:-recipe-ledger-mlflow}"
WORKERS="${TRACKING_WORKERS:-2}"
BIN="${TRACKING_VENV_BIN:-$repo/.venv/bin}"   # mlflow, moto_server, python (./dev setup's venv)
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-testing}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-testing}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
started=$(date +%s%N)
ms() { echo "$(( ($(date +%s%N) - started) / 1000000 )) ms"; }

for tool in initdb pg_ctl psql; do
  command -v "$tool" >/dev/null || { echo "start.sh: $tool is not on PATH (PostgreSQL 15: apt-get install postgresql)" >&2; exit 3; }
done
for tool in mlflow moto_server python; do
  [[ -x "$BIN/$tool" ]] || { echo "start.sh: $BIN/$tool is missing: pip install -e '.[dev]' (or set TRACKING_VENV_BIN)" >&2; exit 3; }
done
mkdir -p "$D"

# PostgreSQL refuses to run as root: as root, run it as the postgres user, in a folder it owns.
as_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [[ $(id -u) -eq 0 ]]; then  # the postgres user must reach its folder through $D
  chmod o+x "$D"; mkdir -p "$D/pg"; chown postgres "$D/pg"; chmod 700 "$D/pg"
fi

if [[ ! -f "$D/pg/data/PG_VERSION" ]]; then
  # trust on loopback only (listen_addresses below): a lab's server uses a password, see docs/scale-out.md.
  as_pg initdb -D "$D/pg/data" -A trust -U postgres >"$D/initdb.log" 2>&1
fi
if ! as_pg pg_ctl -D "$D/pg/data" status >/dev/null 2>&1; then
  as_pg pg_ctl -D "$D/pg/data" -l "$D/pg/postgres.log" -w \
    -o "-p $PG_PORT -k $D/pg -c listen_addresses=127.0.0.1" start >/dev/null
fi
if [[ -z $(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc "select 1 from pg_database where datname='mlflow'") ]]; then
  psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "create database mlflow"
fi
echo "== PostgreSQL on 127.0.0.1:$PG_PORT ($(ms))"

alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! alive "$D/s3.pid"; then
  setsid "$BIN/moto_server" -H 127.0.0.1 -p "$S3_PORT" >"$D/s3.log" 2>&1 &
  echo $! >"$D/s3.pid"
fi
"$BIN/python" - "$S3_PORT" "$BUCKET" <<'PY'
import sys, time, boto3, botocore.exceptions
port, bucket = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}")
for _ in range(100):
    try:
        if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
            s3.create_bucket(Bucket=bucket)
        break
    except botocore.exceptions.EndpointConnectionError:
        time.sleep(0.1)
else:
    sys.exit(f"start.sh: no S3 API answers on 127.0.0.1:{port}")
PY
echo "== S3 API (moto) on 127.0.0.1:$S3_PORT, bucket $BUCKET ($(ms))"

if ! alive "$D/mlflow.pid"; then
  MLFLOW_BACKEND_STORE_URI="postgresql://postgres@127.0.0.1:$PG_PORT/mlflow" \
  MLFLOW_S3_ENDPOINT_URL="http://127.0.0.1:$S3_PORT" \
  MLFLOW_DISABLE_TELEMETRY=true \
    setsid "$BIN/mlflow" server --artifacts-destination "s3://$BUCKET/artifacts" --serve-artifacts \
      --host 127.0.0.1 --port "$MLFLOW_PORT" --workers "$WORKERS" >"$D/mlflow.log" 2>&1 &
  echo $! >"$D/mlflow.pid"
fi
for _ in $(seq 1 600); do
  if curl -fsS "http://127.0.0.1:$MLFLOW_PORT/health" >/dev/null 2>&1; then break; fi
  alive "$D/mlflow.pid" || { echo "start.sh: mlflow server exited; last lines of $D/mlflow.log:" >&2; tail -20 "$D/mlflow.log" >&2; exit 3; }
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$MLFLOW_PORT/health" >/dev/null || { echo "start.sh: mlflow server did not answer /health in 120 s ($D/mlflow.log)" >&2; exit 3; }
cat >"$D/tracking-server.env" <<ENV
MLFLOW_TRACKING_URI=http://127.0.0.1:$MLFLOW_PORT
TRACKING_PG_URI=postgresql://postgres@127.0.0.1:$PG_PORT/mlflow
TRACKING_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
TRACKING_S3_BUCKET=$BUCKET
ENV
echo "== MLflow server on http://127.0.0.1:$MLFLOW_PORT (backend PostgreSQL, artifacts s3://$BUCKET/artifacts) ($(ms))"
echo "export MLFLOW_TRACKING_URI=http://127.0.0.1:$MLFLOW_PORT    # then: ledger mlflow sync"
