#!/usr/bin/env bash
# Make a docker daemon answer on this machine, for the docker launcher's integration tests.
# Idempotent: installs Debian's docker.io (and busybox-static, which the tests' image is built from)
# only when missing, starts dockerd only when `docker info` does not answer, then waits for it.
#   scripts/ci/start_docker.sh            # exits 0 once `docker info` answers (at most ~60 s)
set -euo pipefail

LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
WAIT_S=${DOCKERD_WAIT_S:-60}

need_install=()
command -v dockerd >/dev/null 2>&1 || need_install+=(docker.io)
command -v docker >/dev/null 2>&1 || need_install+=(docker.io)
[[ -x /bin/busybox ]] || need_install+=(busybox-static)
if (( ${#need_install[@]} )); then
  echo "installing: ${need_install[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_install[@]}" >/dev/null
fi

if docker info >/dev/null 2>&1; then
  exit 0
fi

echo "starting dockerd (log: $LOG)" >&2
# setsid + nohup: the daemon outlives this script and the shell that called it.
setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &

for _ in $(seq 1 "$WAIT_S"); do
  if docker info >/dev/null 2>&1; then
    echo "dockerd answers: $(docker version --format '{{.Server.Version}}')" >&2
    exit 0
  fi
  sleep 1
done
echo "dockerd did not answer within ${WAIT_S} s; last lines of $LOG:" >&2
tail -n 30 "$LOG" >&2
exit 1
