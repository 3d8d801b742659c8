#!/usr/bin/env bash
# Make a local docker registry answer on 127.0.0.1:5000, so that an image built here gets a real
# repository digest (a registry computes it from the pushed manifest; a local-only image has none).
# Idempotent: installs Debian's docker-registry package only when missing, starts the registry
# only when its API does not answer, then waits for it. Needs no image from any hub.
#   scripts/ci/start_registry.sh          # exits 0 once http://127.0.0.1:5000/v2/ answers (~10 s at most)
# Settings: REGISTRY_ADDR (127.0.0.1:5000), REGISTRY_DATA (/var/lib/recipe-ledger-registry),
#           REGISTRY_LOG (/var/log/recipe-ledger-registry.log), REGISTRY_WAIT_S (30).
set -euo pipefail

ADDR=${REGISTRY_ADDR:-127.0.0.1:5000}
DATA=${REGISTRY_DATA:-/var/lib/recipe-ledger-registry}
LOG=${REGISTRY_LOG:-/var/log/recipe-ledger-registry.log}
WAIT_S=${REGISTRY_WAIT_S:-30}
CONFIG=${DATA}/config.yml

answers() { curl -fsS -m 2 "http://${ADDR}/v2/" >/dev/null 2>&1; }

if answers; then
  exit 0
fi

if ! command -v docker-registry >/dev/null 2>&1; then
  echo "installing: docker-registry" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
  # The package's own service (when an init system runs it) listens on :5000 of every interface
  # with htpasswd auth; ours is loopback-only and open. Stop theirs if it came up.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker-registry 2>/dev/null; then
    systemctl stop docker-registry || true
  fi
  answers && exit 0
fi

mkdir -p "$DATA/storage"
# Our own config, not the package's: loopback only, no auth (docker treats 127.0.0.0/8 as an
# insecure registry it may push to over plain HTTP), deletes allowed for test clean-up.
cat >"$CONFIG" <<EOF
version: 0.1
log:
  fields:
    service: recipe-ledger-registry
storage:
  filesystem:
    rootdirectory: ${DATA}/storage
  delete:
    enabled: true
http:
  addr: ${ADDR}
EOF

echo "starting docker-registry on ${ADDR} (data: ${DATA}, log: ${LOG})" >&2
# setsid + nohup: the registry outlives this script and the shell that called it.
setsid nohup docker-registry serve "$CONFIG" >>"$LOG" 2>&1 </dev/null &

for _ in $(seq 1 "$WAIT_S"); do
  if answers; then
    echo "registry answers on http://${ADDR}/v2/" >&2
    exit 0
  fi
  sleep 1
done
echo "the registry did not answer within ${WAIT_S} s; last lines of $LOG:" >&2
tail -n 30 "$LOG" >&2
exit 1
