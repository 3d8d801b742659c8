#!/usr/bin/env bash
# Create `transformers serve`'s virtual environment (the `transformers` engine), apart from the
# tool's venv and from vLLM's: transformers 5's serving extra pins fastapi/uvicorn/pydantic/openai
# versions that must not move vLLM's (which pins transformers 4.x), and the tool itself needs none.
#
#   scripts/setup_tserve_venv.sh [VENV_DIR]      (default: .venv-tserve at the repository root)
#
# The pins are the set the lent H200 runs (issue 27): transformers 5.17.0 with fastapi 0.120.0,
# starlette 0.48.0, uvicorn 0.54.0, pydantic 2.14.4 / pydantic-core 2.50.5 and openai 1.109.1
# (newer fastapi imports opentelemetry and openai 2+ wants httpx2, neither of which is on that box),
# so the CPU lane and the GPU lane serve with the same code. torch 2.13.0 is the CPU build on this
# machine's disk (with no torch, transformers' extra would pull a multi-GB CUDA build).
#
# Idempotent: a stamp inside the venv records the sha256 of this script (which holds the pins);
# when it matches, the script returns at once. Wheels are cached outside the clone, under
# ${RECIPE_LEDGER_CACHE:-~/.cache/recipe-ledger}/tserve/wheelhouse, so a fresh CI clone needs no
# network. Quiet on success; pip's output goes to VENV_DIR/setup-tserve.log, printed on failure.
# docs/launchers.md says how the engine runs it.
set -euo pipefail

TORCH_VERSION=2.13.0
TRANSFORMERS_VERSION=5.17.0
PINS=(
  "transformers==$TRANSFORMERS_VERSION"
  fastapi==0.120.0 starlette==0.48.0 uvicorn==0.54.0
  pydantic==2.14.4 pydantic-core==2.50.5 openai==1.109.1
  # Its CLI's own needs, pinned so that click's wording of a rejected flag (launch.failures) holds.
  typer==0.29.2 click==8.5.1 requests==2.34.2
  # `--device cpu` (or any device) loads through a device map, which needs accelerate.
  accelerate==1.15.0
)
PYTHON=${PYTHON:-python3}

script_path=$(readlink -f "${BASH_SOURCE[0]}")
repo_root=$(cd "$(dirname "$script_path")/.." && pwd)
venv=${1:-$repo_root/.venv-tserve}
wheelhouse=${RECIPE_LEDGER_CACHE:-$HOME/.cache/recipe-ledger}/tserve/wheelhouse
mkdir -p "$venv" "$wheelhouse"
venv=$(cd "$venv" && pwd)
stamp=$venv/.recipe-ledger-setup.stamp
log=$venv/setup-tserve.log
want=$(sha256sum "$script_path" | cut -d' ' -f1)

if [[ -x $venv/bin/transformers && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "tserve venv $venv is up to date (stamp $want)"
  exit 0
fi

start=$SECONDS
rm -f "$stamp"
: >"$log"
on_error() {
  local rc=$?
  echo "setup_tserve_venv.sh: FAILED (exit $rc) after $((SECONDS - start)) s; last lines of $log:" >&2
  tail -n 40 "$log" >&2 || true
  exit "$rc"
}
trap on_error ERR

[[ -x $venv/bin/python ]] || "$PYTHON" -m venv "$venv" >>"$log" 2>&1
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
# torch from the machine's own file (pip finds it; the wheelhouse would copy 200 MB for nothing).
"$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" \
  >>"$log" 2>&1 || "${pip[@]}" install "torch==$TORCH_VERSION" >>"$log" 2>&1
install_local=("${pip[@]}" install --no-index --find-links "$wheelhouse" "${PINS[@]}")
if ! "${install_local[@]}" >>"$log" 2>&1; then
  echo "== the wheelhouse lacks some wheels (expected on a first run): pip wheel fills it" >>"$log"
  "${pip[@]}" wheel --wheel-dir "$wheelhouse" "${PINS[@]}" "torch==$TORCH_VERSION" >>"$log" 2>&1
  "${install_local[@]}" >>"$log" 2>&1
fi
# torch's CUDA-only companions, if any package pulled them, break transformers imports on the CPU.
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec >>"$log" 2>&1 || true
version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("transformers"))' 2>>"$log")
[[ $version == "$TRANSFORMERS_VERSION" ]] || { echo "unexpected transformers version: '$version'" >>"$log"; false; }
# The serving CLI and its app import (fastapi, uvicorn, openai's types) without a hub or a GPU.
HF_HUB_OFFLINE=1 "$venv/bin/transformers" serve --help >>"$log" 2>&1
HF_HUB_OFFLINE=1 "$venv/bin/python" -c 'import transformers.cli.serving.server' >>"$log" 2>&1

trap - ERR
echo "$want" >"$stamp"
echo "tserve venv ready: $venv (transformers $version, torch $TORCH_VERSION, $(du -sh "$venv" | cut -f1)) in $((SECONDS - start)) s"
