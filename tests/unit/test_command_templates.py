"""Command templates take plain {name} fields only (issue 26, bounds at the door): a format spec,
a conversion, attribute or index access, or a field no arm fills is refused when the experiment file
loads, naming the instrument and the field, and filling never goes through str.format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipe_ledger.errors import SpecError
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.instruments import command
from recipe_ledger.instruments.base import InstrumentError, MeasureContext
from recipe_ledger.instruments.template import TemplateError, fields, pieces, render


def study(command_argv: list[str], **params: str) -> dict:
    return {
        "name": "templates",
        "hypothesis": "h",
        "box": "cpu-only",
        "engine": "none",
        "server": {"needs_server": False},
        "control": {"params": {"p": "a", **params}},
        "candidates": {"b": {"params": {"p": "b", **params}}},
        "instruments": [{"name": "probe", "kind": "command", "command": command_argv}],
        "points": [1],
        "repeats": 2,
        "bars": [{"metric": "m", "point": 1, "direction": "higher", "min_effect": 0.1}],
    }


def write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(spec, indent=1))
    return path


@pytest.mark.parametrize(
    ("part", "said"),
    [
        ("{arm:>1500000000}", "has a format spec; use plain {arm}"),
        ("{seed:,}", "has a format spec"),
        ("{arm!r}", "has a conversion"),
        ("{arm.__class__}", "is not a plain name"),
        ("{arm[0]}", "is not a plain name"),
        ("{0}", "is not a plain name"),
        ("{}", "is not a plain name"),
        ('{"method": "ngram"}', "write {{ and }} for literal braces"),
        ("x{", "Single '{'"),
        ("x}", "Single '}'"),
    ],
)
def test_a_template_part_that_is_not_plain_is_refused(part, said):
    with pytest.raises(TemplateError, match=None) as raised:
        pieces(part)
    assert said in str(raised.value)


def test_plain_fields_and_doubled_braces_render_without_format():
    assert fields("--arm={arm}-p{point}") == ["arm", "point"]
    assert render('{{"k": {seed}}}', {"seed": 7}) == '{"k": 7}'
    # A value that looks like a template is put in as text, never read again.
    assert render("{arm}", {"arm": "{seed:>99999999}"}) == "{seed:>99999999}"
    with pytest.raises(KeyError):
        render("{gpu}", {"arm": "a"})


def test_a_format_spec_bomb_is_refused_at_load_naming_instrument_and_field(tmp_path):
    path = write(tmp_path, study(["python3", "x.py", "{arm:>1500000000}"]))
    with pytest.raises(SpecError) as raised:
        load_experiment(path)
    text = raised.value.one_line()
    assert "instrument 'probe' command[2]" in text and "{arm:>1500000000}" in text
    instrument_line = _line_of(path, '"instruments"') + 1  # the "{" that opens the instrument
    assert raised.value.where == f"{path}:{instrument_line}"


def test_a_field_that_an_arm_does_not_fill_is_refused_at_load(tmp_path):
    spec = study(["python3", "x.py", "{p}", "{q}"])
    spec["candidates"]["b"]["params"]["q"] = "only here"
    with pytest.raises(SpecError, match=r"command\[3\] names \{q\}, which arm 'control' does not set"):
        load_experiment(write(tmp_path, spec))


def test_fields_every_arm_fills_load(tmp_path):
    experiment = load_experiment(write(tmp_path, study(["python3", "x.py", "{p}", "{arm}", "{{lit}}"])))
    assert experiment.instruments[0].template_fields() == [(2, "p"), (3, "arm")]


def test_filling_a_spec_that_skipped_the_check_is_an_instrument_error(tmp_path):
    ctx = MeasureContext(arm="a", point=1, repeat=1, seed=0, out_dir=tmp_path)
    with pytest.raises(InstrumentError, match="format spec"):
        command.fill_template(["{arm:>1500000000}"], ctx, tmp_path / "o.json")


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)
