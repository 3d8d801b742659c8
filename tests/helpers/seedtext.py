"""The seed documents kept as fixtures (tests/fixtures/seeds/), read the way the seed campaigns
cite them: lines numbered from 1 as an editor shows them, and the figures a line states."""

from __future__ import annotations

import re
from pathlib import Path

SEED_DOCUMENTS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"

_NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)(\s?s\b|K\b)?")
_WORDS = {"zero": 0, "one": 1, "two": 2, "twice": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def document_lines(document: str) -> list[str]:
    return (SEED_DOCUMENTS / document).read_text(encoding="utf-8").splitlines()


def line_numbers(cited: str) -> list[int]:
    """The line numbers ``cited`` names ("98-111", "42, 104, 111")."""
    numbers: list[int] = []
    for part in cited.split(","):
        first, _, last = part.strip().partition("-")
        numbers += range(int(first), int(last or first) + 1)
    return numbers


def seed_lines(document: str, cited: str) -> str:
    """The text of the lines ``cited`` names in ``document``."""
    lines = document_lines(document)
    numbers = line_numbers(cited)
    outside = [n for n in numbers if not 1 <= n <= len(lines)]
    if outside:
        raise ValueError(f"{document} has lines 1-{len(lines)}, not {outside}")
    return "\n".join(lines[number - 1] for number in numbers)


def numbers_in(text: str) -> set[float]:
    """Every figure the text states, as written and, for "0.291 s" or "25K", also times 1000 (the
    imports store seconds as ms and "25K" as 25000)."""
    found = {float(v) for w, v in _WORDS.items() if re.search(rf"\b{w}\b", text, re.IGNORECASE)}
    for match in _NUMBER.finditer(text):
        value = float(match[1].replace(",", ""))
        found.add(value)
        if match[2]:
            found.add(round(value * 1000, 6))
    return found
