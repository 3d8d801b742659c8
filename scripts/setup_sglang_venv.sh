#!/usr/bin/env bash
# Create SGLang's serving virtual environment for this CPU-only machine, apart from the tool's venv
# and from vLLM's (the two engines' pins clash: compressed-tensors, openai, xgrammar, numba, torch).
#
#   scripts/setup_sglang_venv.sh [VENV_DIR]      (default: .venv-sglang at the repository root)
#
# Idempotent: a stamp file inside the venv records the sha256 of this script (which holds the pins)
# and of scripts/sglang_cpu/; when it matches, the script returns at once. Edit either (or delete the
# venv) to force a rebuild. Downloads are cached outside the clone, under
# ${RECIPE_LEDGER_CACHE:-~/.cache/recipe-ledger}/sglang/: the sglang wheel and a wheelhouse of its
# dependencies, so a reinstall (a fresh clone in CI) needs no network. Quiet on success; pip's output
# goes to VENV_DIR/setup-sglang.log, whose tail is printed on failure.
# See docs/serving-cpu.md ("SGLang on this CPU") and ../shared/notes/sglang-cpu.md for why each step.
set -euo pipefail

TORCH_VERSION=2.13.0       # the CPU wheel on the machine's disk; sglang pins 2.14.1, a CUDA build
TORCHVISION_VERSION=0.28.0 # the release paired with torch 2.13; patched below
SGLANG_VERSION=0.5.23
# sglang's dependencies left out: CUDA-only kernels and runtimes (no CPU build, or multi-GB CUDA
# wheels that fail to load here), and the torch family, which is installed apart under the pins above
# (torchaudio 2.11 / torchcodec pin other torch builds; SGLang's text-only CPU path imports neither).
EXCLUDED=(
  cuda-python flash-attn-4 flashinfer-python humming-kernels nvidia-cutlass-dsl nvidia-mathdx
  nvidia-ml-py nvshmem4py-cu13 quack-kernels sgl-deep-ep sgl-deep-gemm sgl-flash-mla sglang-kernel
  tilelang torch-memory-saver
  torch torchvision torchaudio torchcodec
)
PYTHON=${PYTHON:-python3}

script_path=$(readlink -f "${BASH_SOURCE[0]}")
repo_root=$(cd "$(dirname "$script_path")/.." && pwd)
cpu_dir=$repo_root/scripts/sglang_cpu
venv=${1:-$repo_root/.venv-sglang}
cache=${RECIPE_LEDGER_CACHE:-$HOME/.cache/recipe-ledger}/sglang
wheelhouse=$cache/wheelhouse
mkdir -p "$venv" "$cache"
venv=$(cd "$venv" && pwd)
stamp=$venv/.recipe-ledger-setup.stamp
log=$venv/setup-sglang.log
want=$( (sha256sum "$script_path"; cd "$cpu_dir" && find . -type f -not -path '*/__pycache__/*' -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1)

if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "sglang venv $venv is up to date (stamp $want)"
  exit 0
fi

start=$SECONDS
rm -f "$stamp"
: >"$log"
on_error() {
  local rc=$?
  echo "setup_sglang_venv.sh: FAILED (exit $rc) after $((SECONDS - start)) s; last lines of $log:" >&2
  tail -n 40 "$log" >&2 || true
  exit "$rc"
}
trap on_error ERR

step() { echo "== $*" >>"$log"; }

step "create venv with $PYTHON"
[[ -x $venv/bin/python ]] || "$PYTHON" -m venv "$venv" >>"$log" 2>&1
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# Every install below runs under these pins, so no dependency can pull the CUDA torch back in.
constraints=$venv/sglang-constraints.txt
printf 'torch==%s\ntorchvision==%s\n' "$TORCH_VERSION" "$TORCHVISION_VERSION" >"$constraints"

step "download sglang==$SGLANG_VERSION into $cache"
wheel=$(find "$cache" -maxdepth 1 -name "sglang-$SGLANG_VERSION-*.whl" | head -n 1)
if [[ -z $wheel ]]; then
  "${pip[@]}" download --no-deps --dest "$cache" "sglang==$SGLANG_VERSION" >>"$log" 2>&1
  wheel=$(find "$cache" -maxdepth 1 -name "sglang-$SGLANG_VERSION-*.whl" | head -n 1)
fi

# sglang's own Requires-Dist, markers evaluated for this machine, minus EXCLUDED, plus the CPU torch;
# written out so the list that was installed can be read back (VENV_DIR/sglang-requirements.txt).
# pip's vendored packaging parses it: the fresh venv has nothing else yet.
step "sglang's dependencies minus ${EXCLUDED[*]}"
requirements=$venv/sglang-requirements.txt
"$venv/bin/python" - "$wheel" "${EXCLUDED[@]}" >"$requirements" 2>>"$log" <<'PY'
import sys, zipfile
from email.parser import Parser
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

wheel, excluded = sys.argv[1], {canonicalize_name(name) for name in sys.argv[2:]}
with zipfile.ZipFile(wheel) as archive:
    metadata_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(archive.read(metadata_name).decode())
kept = []
for line in metadata.get_all("Requires-Dist") or []:
    requirement = Requirement(line)
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        continue  # an extra, or another platform
    if canonicalize_name(requirement.name) in excluded:
        continue
    requirement.marker = None
    kept.append(str(requirement))
print("\n".join(kept))
PY
echo "torch==$TORCH_VERSION" >>"$requirements"
cat "$requirements" >>"$log"

# The registry's proxy here forbids caching, so pip's own cache stays empty: a wheelhouse outside
# the clone makes a reinstall (a fresh CI clone) offline. Install from it alone; when it lacks
# something (first run, changed pins), fill it with `pip wheel` and install from it again.
step "install the dependencies from the wheelhouse $wheelhouse"
install_local=("${pip[@]}" install --no-index --find-links "$wheelhouse" -c "$constraints")
mkdir -p "$wheelhouse"
if ! "${install_local[@]}" -r "$requirements" >>"$log" 2>&1; then
  step "the wheelhouse lacks some of them (expected on a first run): pip wheel fills it"
  "${pip[@]}" wheel --wheel-dir "$wheelhouse" -c "$constraints" -r "$requirements" >>"$log" 2>&1
  "${install_local[@]}" -r "$requirements" >>"$log" 2>&1
fi
step "pip install --no-deps $wheel"
"${pip[@]}" install --no-deps "$wheel" >>"$log" 2>&1

# The registry's torchvision has no CPU extension; without the patch its import fails (see the
# patcher's docstring). --no-deps: its torch requirement is already met by the CPU wheel.
step "pip install --no-deps torchvision==$TORCHVISION_VERSION, then guard its two fake kernels"
"${install_local[@]}" --no-deps "torchvision==$TORCHVISION_VERSION" >>"$log" 2>&1
"$venv/bin/python" "$cpu_dir/patch_torchvision.py" "$site" >>"$log" 2>&1

# No CPU kernel package exists on the registry; SGLang's CPU path only imports sgl_kernel's names.
step "install the sgl_kernel stub from $cpu_dir/sgl_kernel"
rm -rf "$site/sgl_kernel"
cp -r "$cpu_dir/sgl_kernel" "$site/sgl_kernel"
find "$site/sgl_kernel" -name __pycache__ -prune -exec rm -rf {} +

step "smoke check: import sglang's server entry point and its benchmark client"
version=$(SGLANG_USE_CPU_ENGINE=1 HF_HUB_OFFLINE=1 "$venv/bin/python" -c \
  'import sglang, sglang.launch_server, sglang.bench_serving, torchvision; print(sglang.__version__)' \
  2>>"$log" | tail -n 1)
echo "sglang.__version__: $version" >>"$log"
[[ $version == "$SGLANG_VERSION" ]] || { echo "unexpected sglang version: '$version'" >>"$log"; false; }

trap - ERR
echo "$want" >"$stamp"
echo "sglang venv ready: $venv (sglang $version, torch $TORCH_VERSION, $(du -sh "$venv" | cut -f1)) in $((SECONDS - start)) s"
