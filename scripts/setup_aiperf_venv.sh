#!/usr/bin/env bash
# Create AIPerf's virtual environment (the replay instrument's client), apart from the tool's venv and
# from the engines': AIPerf pins its own pydantic, numpy and zmq stack.
#
#   scripts/setup_aiperf_venv.sh [VENV_DIR]      (default: .venv-aiperf at the repository root)
#
# Idempotent: a stamp file inside the venv records the sha256 of this script (which holds the pin);
# when it matches, the script returns at once. Downloads are cached outside the clone, under
# ${RECIPE_LEDGER_CACHE:-~/.cache/recipe-ledger}/aiperf/wheelhouse, so a reinstall (a fresh CI
# clone) needs no network. Quiet on success; pip's output goes to VENV_DIR/setup-aiperf.log, whose
# tail is printed on failure. docs/instruments.md says what the replay instrument does with it.
set -euo pipefail

AIPERF_VERSION=0.13.0
PYTHON=${PYTHON:-python3}

script_path=$(readlink -f "${BASH_SOURCE[0]}")
repo_root=$(cd "$(dirname "$script_path")/.." && pwd)
venv=${1:-$repo_root/.venv-aiperf}
wheelhouse=${RECIPE_LEDGER_CACHE:-$HOME/.cache/recipe-ledger}/aiperf/wheelhouse
mkdir -p "$venv" "$wheelhouse"
venv=$(cd "$venv" && pwd)
stamp=$venv/.recipe-ledger-setup.stamp
log=$venv/setup-aiperf.log
want=$(sha256sum "$script_path" | cut -d' ' -f1)

if [[ -x $venv/bin/aiperf && -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "aiperf venv $venv is up to date (stamp $want)"
  exit 0
fi

start=$SECONDS
rm -f "$stamp"
: >"$log"
on_error() {
  local rc=$?
  echo "setup_aiperf_venv.sh: FAILED (exit $rc) after $((SECONDS - start)) s; last lines of $log:" >&2
  tail -n 40 "$log" >&2 || true
  exit "$rc"
}
trap on_error ERR

[[ -x $venv/bin/python ]] || "$PYTHON" -m venv "$venv" >>"$log" 2>&1
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
# The registry's proxy forbids caching, so pip's own cache stays empty: install from the wheelhouse
# alone, and fill it with `pip wheel` only when it lacks something (a first run, a changed pin).
install_local=("${pip[@]}" install --no-index --find-links "$wheelhouse" "aiperf==$AIPERF_VERSION")
if ! "${install_local[@]}" >>"$log" 2>&1; then
  echo "== the wheelhouse lacks some wheels (expected on a first run): pip wheel fills it" >>"$log"
  "${pip[@]}" wheel --wheel-dir "$wheelhouse" "aiperf==$AIPERF_VERSION" >>"$log" 2>&1
  "${install_local[@]}" >>"$log" 2>&1
fi
version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("aiperf"))' 2>>"$log")
[[ $version == "$AIPERF_VERSION" ]] || { echo "unexpected aiperf version: '$version'" >>"$log"; false; }
"$venv/bin/aiperf" --help >>"$log" 2>&1

trap - ERR
echo "$want" >"$stamp"
echo "aiperf venv ready: $venv (aiperf $version, $(du -sh "$venv" | cut -f1)) in $((SECONDS - start)) s"
