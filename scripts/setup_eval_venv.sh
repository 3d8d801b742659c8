#!/usr/bin/env bash
# Create lm-evaluation-harness's virtual environment (the task-accuracy instrument's client, kind
# lm_eval), apart from the tool's venv and from the engines': lm-eval pulls datasets, pyarrow,
# pandas, scikit-learn and their pins, which must not move the tool's or vLLM's.
#
#   scripts/setup_eval_venv.sh [VENV_DIR]      (default: .venv-eval at the repository root)
#
# No transformers and no torch: the instrument sends text (tokenized_requests=False,
# tokenizer_backend=none) to generate_until tasks, so lm-eval never loads a tokenizer, and its API
# models import neither. Nothing reaches a hub at run time (the instrument sets HF_HUB_OFFLINE=1,
# HF_DATASETS_OFFLINE=1; the shipped tasks read local JSON lines).
#
# Idempotent: a stamp file inside the venv records the sha256 of this script (which holds the pin);
# when it matches, the script returns at once. Downloads are cached outside the clone, under
# ${RECIPE_LEDGER_CACHE:-~/.cache/recipe-ledger}/eval/wheelhouse, so a reinstall (a fresh CI
# clone) needs no network. Quiet on success; pip's output goes to VENV_DIR/setup-eval.log, whose
# tail is printed on failure. docs/instruments.md says what the lm_eval instrument does with it.
set -euo pipefail

LM_EVAL_VERSION=0.4.13
PYTHON=${PYTHON:-python3}

script_path=$(readlink -f "${BASH_SOURCE[0]}")
repo_root=$(cd "$(dirname "$script_path")/.." && pwd)
venv=${1:-$repo_root/.venv-eval}
wheelhouse=${RECIPE_LEDGER_CACHE:-$HOME/.cache/recipe-ledger}/eval/wheelhouse
mkdir -p "$venv" "$wheelhouse"
venv=$(cd "$venv" && pwd)
stamp=$venv/.recipe-ledger-setup.stamp
log=$venv/setup-eval.log
want=$(sha256sum "$script_path" | cut -d' ' -f1)

if [[ -x $venv/bin/lm_eval && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "eval venv $venv is up to date (stamp $want)"
  exit 0
fi

start=$SECONDS
rm -f "$stamp"
: >"$log"
on_error() {
  local rc=$?
  echo "setup_eval_venv.sh: FAILED (exit $rc) after $((SECONDS - start)) s; last lines of $log:" >&2
  tail -n 40 "$log" >&2 || true
  exit "$rc"
}
trap on_error ERR

[[ -x $venv/bin/python ]] || "$PYTHON" -m venv "$venv" >>"$log" 2>&1
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
requirement="lm-eval[api]==$LM_EVAL_VERSION"
# The registry's proxy forbids caching, so pip's own cache stays empty: install from the wheelhouse
# alone, and fill it with `pip wheel` only when it lacks something (a first run, a changed pin).
install_local=("${pip[@]}" install --no-index --find-links "$wheelhouse" "$requirement")
if ! "${install_local[@]}" >>"$log" 2>&1; then
  echo "== the wheelhouse lacks some wheels (expected on a first run): pip wheel fills it" >>"$log"
  "${pip[@]}" wheel --wheel-dir "$wheelhouse" "$requirement" >>"$log" 2>&1
  "${install_local[@]}" >>"$log" 2>&1
fi
version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("lm_eval"))' 2>>"$log")
[[ $version == "$LM_EVAL_VERSION" ]] || { echo "unexpected lm_eval version: '$version'" >>"$log"; false; }
# The client the instrument runs, and the API model it asks for, import without a hub or a GPU.
"$venv/bin/lm_eval" --help >>"$log" 2>&1
HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 "$venv/bin/python" -c \
  'from lm_eval.api.registry import get_model; get_model("local-completions")' >>"$log" 2>&1

trap - ERR
echo "$want" >"$stamp"
echo "eval venv ready: $venv (lm_eval $version, $(du -sh "$venv" | cut -f1)) in $((SECONDS - start)) s"
