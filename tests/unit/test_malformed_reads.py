"""Hand-edited files that are JSON but not what a reader expects give one error naming the file
(and line), not a traceback: the cases the type narrowing of issue 11 made explicit."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipe_ledger import runs
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.ledger.store import Ledger


def test_a_chain_line_that_is_json_but_not_an_object_is_named_with_its_line(tmp_path: Path) -> None:
    ledger = Ledger.init(tmp_path)
    ledger.append("note", {"text": "kept"}, writer="box", git=None)
    chain = ledger.chain_path("box")
    with chain.open("a", encoding="utf-8") as handle:
        handle.write("[1, 2]\n")

    with pytest.raises(StateError) as raised:
        Ledger(tmp_path).entries()

    assert raised.value.where == "ledger/box.jsonl:2"
    assert "not a JSON object" in str(raised.value)


def test_read_json_names_the_file_for_a_number_python_refuses_to_parse(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"n": ' + "9" * 5000 + "}", encoding="utf-8")  # over int's digit limit

    with pytest.raises(InputError) as raised:
        runs.read_json(path)

    assert raised.value.where == str(path)
    assert "not JSON" in str(raised.value)


def test_read_json_names_the_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(b'{"a": "\xff"}')

    with pytest.raises(InputError) as raised:
        runs.read_json(path)

    assert raised.value.where == str(path)
