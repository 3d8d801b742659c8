#!/usr/bin/env bash
# Here, after a device call: take what came back (ledger.tgz, runs.tgz) into the repository.
#
#   scripts/gpu_lane/ingest.sh FILES_AT EVIDENCE_DIR      e.g. ... /work/.device/xyz evidence/h200-tserve
#
# The ledger is append-only, so the box's ledger folder may only add: every chain file here must be
# a prefix of the one that came back (else exit 3, nothing copied); new files (the box's own chain,
# its signed head) are taken as they are, and allowed_signers gains the box's public key. The run
# folders go to runs/ and, without their server logs' bulk beyond the last 2,000 lines, to
# EVIDENCE_DIR/<run id>/. Then run `ledger verify` and commit (docs/gpu-lane.md).
set -euo pipefail
from=${1:?usage: ingest.sh FILES_AT EVIDENCE_DIR}
evidence=${2:?usage: ingest.sh FILES_AT EVIDENCE_DIR}
cd "$(dirname "$0")/../.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tar xzf "$from/ledger.tgz" -C "$scratch"
for here in ledger/*.jsonl ledger/allowed_signers; do
  there="$scratch/$here"
  [[ -f $there ]] || { echo "ingest.sh: $here is missing from what came back" >&2; exit 3; }
  size=$(stat -c %s "$here")
  if ! cmp -s -n "$size" "$here" "$there"; then
    echo "ingest.sh: $here is not a prefix of the box's copy: an append-only ledger never rewrites" >&2
    exit 3
  fi
done
cp -r "$scratch/ledger/." ledger/
if [[ -f $from/runs.tgz ]]; then
  mkdir -p runs "$evidence"
  tar xzf "$from/runs.tgz" -C "$scratch"
  for run in "$scratch"/runs/*/; do
    id=$(basename "$run")
    cp -r "$run" "runs/$id"
    rm -rf "${evidence:?}/$id"
    cp -r "$run" "$evidence/$id"
    for log in "$evidence/$id"/server-*.log; do
      [[ -f $log ]] || continue
      tail -n 2000 "$log" >"$log.tail" && mv "$log.tail" "$log"
    done
    echo "run $id -> runs/$id and $evidence/$id"
  done
fi
git status --short ledger "$evidence" 2>/dev/null || true
