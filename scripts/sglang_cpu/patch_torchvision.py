"""Guard torchvision 0.28.0's two fake-kernel registrations on its C++ extension having loaded.

The registry's torchvision wheel has no CPU extension beside the CPU torch, and at import its
``_meta_registrations.py`` registers fake kernels for ``torchvision::nms`` and ``torchvision::qnms``
unconditionally, which fails ("operator torchvision::nms does not exist") and with it every import
of transformers' image code that SGLang does. The file's other registrations already go through
``register_meta``, which checks ``torchvision.extension._has_ops()``; this patch routes those two
through the same check. Nothing else changes.

    python patch_torchvision.py SITE_PACKAGES

Idempotent: a file already patched is left alone. A file that is neither the reviewed original
nor the patched result (another torchvision version, a local edit) stops the set-up with exit 1.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

RELATIVE_PATH = Path("torchvision") / "_meta_registrations.py"
ORIGINAL_SHA256 = "7c55fdb854bb38899949edfa4e68c7bd69190ea1fed4ae51bf593277661fcbc3"  # torchvision 0.28.0
PATCHED_SHA256 = (
    "5709398c229b25acdb78a6aca1fa5e198bed113a2ea2475c194399464e7d7699"  # the same file after patched()
)
GUARD = """

def register_fake_if_ops(op_name):
    # recipe-ledger patch (scripts/sglang_cpu/patch_torchvision.py): without the C++ extension the
    # operator does not exist and torch.library.register_fake raises at import.
    def wrapper(fn):
        if torchvision.extension._has_ops():
            return torch.library.register_fake(op_name)(fn)
        return fn

    return wrapper
"""
ANCHOR = '\n\n@register_meta("roi_align")\n'
REPLACEMENTS = {
    '@torch.library.register_fake("torchvision::nms")\n': '@register_fake_if_ops("torchvision::nms")\n',
    '@torch.library.register_fake("torchvision::qnms")\n': '@register_fake_if_ops("torchvision::qnms")\n',
}


def patched(original: str) -> str:
    text = original.replace(ANCHOR, GUARD + ANCHOR, 1)
    for old, new in REPLACEMENTS.items():
        text = text.replace(old, new, 1)
    return text


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main(site_packages: Path) -> int:
    target = site_packages / RELATIVE_PATH
    text = target.read_text()
    if sha256(text) == ORIGINAL_SHA256:
        new_text = patched(text)
        if sha256(new_text) != PATCHED_SHA256:  # an anchor moved: never write a half-patched file
            print(f"the patch does not apply cleanly to {target}", file=sys.stderr)
            return 1
        target.write_text(new_text)
        print(f"patched {target}")
        return 0
    if sha256(text) == PATCHED_SHA256:
        print(f"already patched: {target}")
        return 0
    print(
        f"{target} is not torchvision 0.28.0's reviewed file (sha256 {sha256(text)}, expected "
        f"{ORIGINAL_SHA256}); review the patch in {Path(__file__).name} against it before changing the pin",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
