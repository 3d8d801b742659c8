#!/usr/bin/env python3
"""There, first: every tracked file of the copied tree is the blob HEAD holds; print HEAD's commit.

    python3 scripts/gpu_lane/verify_tree.py .whl/tree.manifest      -> prints the commit, exit 0

The lent box has no git, so the tool cannot see the commit it runs from; this check is what lets
the commit be stated ($RECIPE_LEDGER_GIT_STATE): a file that differs, or is missing, exits 3 naming
it. The blob id is git's (``sha1("blob <size>\\0" + bytes)``), computed here without git.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def main(argv: list[str]) -> int:
    manifest = Path(argv[1] if len(argv) > 1 else ".whl/tree.manifest")
    lines = manifest.read_text().splitlines()
    commit = lines[0].removeprefix("commit ").strip()
    wrong = []
    for line in lines[1:]:
        meta, path = line.split("\t", 1)
        mode, blob, _stage = meta.split()
        file = Path(path)
        if mode == "120000":  # a symlink's blob is its target
            data = str(file.readlink()).encode() if file.is_symlink() else None
        else:
            data = file.read_bytes() if file.is_file() else None
        if data is None or blob_id(data) != blob:
            wrong.append(path)
    if wrong:
        print(
            f"verify_tree: {len(wrong)} files differ from {commit[:12]}: {', '.join(wrong[:8])}",
            file=sys.stderr,
        )
        return 3
    print(commit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
