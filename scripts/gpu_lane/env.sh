# There (the lent H200), in the copied tree, sourced first:  source scripts/gpu_lane/env.sh WRITER
# Installs the carried wheels into /tmp/site, checks the tree against .whl/tree.manifest (exit 3 on
# any difference), states the commit for the tool ($RECIPE_LEDGER_GIT_STATE: the box has no git),
# finds transformers' CLI, makes the random MoE (.cache/random-moe; idempotent: kept on a warm box),
# and defines `ledger` (the tool from src/) and `pack` (what comes back, into $OUT).
# docs/gpu-lane.md says the whole procedure.
set -euo pipefail
writer=${1:?usage: source scripts/gpu_lane/env.sh WRITER}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
RECIPE_LEDGER_GIT_STATE=$(python3 scripts/gpu_lane/verify_tree.py .whl/tree.manifest)
export RECIPE_LEDGER_GIT_STATE RECIPE_LEDGER_WRITER=$writer
if ! command -v transformers >/dev/null; then
  mkdir -p /tmp/bin
  printf '#!/bin/sh\nexec python3 -m transformers.cli.transformers "$@"\n' >/tmp/bin/transformers
  chmod +x /tmp/bin/transformers
  export PATH=/tmp/bin:$PATH
fi
export RECIPE_LEDGER_TRANSFORMERS=$(command -v transformers)
mkdir -p "$OUT"
{
  echo "commit $RECIPE_LEDGER_GIT_STATE writer $writer"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__)'
} | tee "$OUT/box.txt"
model_started=$SECONDS
python3 scripts/make_random_moe.py .cache/random-moe --layers 4 --device cuda | tee -a "$OUT/box.txt"
echo "model ready in $((SECONDS - model_started)) s" | tee -a "$OUT/box.txt"
ledger() { python3 -m recipe_ledger.cli "$@"; }
# pack: the ledger folder and the run folders, as they are now (after each command, so that a call
# stopped at its limit still brings back what was written before).
pack() {
  tar czf "$OUT/ledger.tgz" ledger
  tar czf "$OUT/runs.tgz" runs 2>/dev/null || true
  ls -la "$OUT"
}
set +e  # the caller's commands decide; a failed one must still be packed
