#!/usr/bin/env bash
# Here, before a device call: everything the lent H200 needs that the working tree does not hold.
#
#   scripts/gpu_lane/prepare.sh            (in the repository root, on a clean, committed tree)
#
# The box has Python 3.12, PyTorch and transformers 5.17 but no network, no vLLM, no SGLang and no
# git: the call copies the working tree (64 MiB at most) and nothing else. This fills .whl/ (ignored
# through .git/info/exclude) with
#   - the wheels the box lacks: the tool's own needs (pydantic, orjson, cryptography, detect-secrets)
#     and transformers serve's (fastapi 0.120.0, starlette 0.48.0, uvicorn 0.54.0, openai 1.109.1;
#     newer fastapi imports opentelemetry and openai 2+ wants httpx2, neither there), for CPython
#     3.12 on x86-64;
#   - tree.manifest: HEAD's commit and `git ls-files -s` (mode, blob, path of every tracked file),
#     which scripts/gpu_lane/verify_tree.py checks file by file there before anything runs, so the
#     commit its entries state ($RECIPE_LEDGER_GIT_STATE) holds exactly what produced them.
# docs/gpu-lane.md says the whole procedure.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
  echo "prepare.sh: the tree differs from HEAD: commit first (a GPU entry names the commit it ran)" >&2
  exit 3
fi
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.whl/' >>.git/info/exclude; }
WHEELS=(
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  orjson==3.13.0 cryptography==50.0.2 cffi==2.1.1 pycparser==3.12 detect-secrets==1.5.0
  fastapi==0.120.0 starlette==0.48.0 uvicorn==0.54.0 openai==1.109.1 jiter==0.19.0 distro==1.9.0
  sniffio==1.3.1
)
mkdir -p .whl
rm -f .whl/*.whl
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "${WHEELS[@]}" 2>&1 \
  | grep -v "^WARNING: Location" || true
[[ $(ls .whl/*.whl | wc -l) -eq ${#WHEELS[@]} ]] || { echo "prepare.sh: expected ${#WHEELS[@]} wheels in .whl" >&2; exit 1; }
{ echo "commit $(git rev-parse HEAD)"; git ls-files -s; } >.whl/tree.manifest
echo "prepared .whl: ${#WHEELS[@]} wheels ($(du -sh .whl | cut -f1)), tree.manifest for $(git rev-parse --short=12 HEAD)"
