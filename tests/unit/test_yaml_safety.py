"""Hostile YAML (issue 14, "YAML"): every repro is one line at its file:line (exit 2), never a
traceback, a runaway or a hang; the YAML semantics the recipes rely on are unchanged."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import InputError, SpecError
from recipe_ledger.experiment.spec import load_experiment
from recipe_ledger.releases.spec import load_release_spec
from recipe_ledger.spec.bounds import is_slug
from recipe_ledger.spec.yamlfile import (
    MAX_EXPANDED_NODES,
    MAX_FILE_BYTES,
    YamlDoc,
    load_yaml,
    parse_yaml_text,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "experiments" / "examples" / "tiny-engines.yaml"


def billion_laughs(levels: int = 9) -> str:
    """The 10-line prefix of the report: each level holds nine aliases of the one before."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as raised:
        parse_yaml_text(text, "f.yaml")
    assert "\n" not in str(raised.value)
    return raised.value


def cli(args: list[str], cwd: Path = REPO) -> tuple[int, str]:
    """Run ``ledger`` in-process from ``cwd``; (exit code, everything it printed)."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, args)
    finally:
        os.chdir(old)
    return result.exit_code, result.output


def assert_one_clean_line(code: int, output: str, expected: int = 2) -> str:
    assert code == expected, output
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    return lines[0]


def edited_example(tmp_path: Path, old: str, new: str) -> Path:
    text = EXAMPLE.read_text()
    assert old in text
    path = tmp_path / "experiment.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


# -- aliases ------------------------------------------------------------------------------------


def test_a_billion_laughs_prefix_is_refused_before_anything_expands_it():
    error = spec_error(billion_laughs() + "name: x\n")
    assert "alias" in error.message and f"{MAX_EXPANDED_NODES:,}" in error.message
    assert error.where is not None and re.fullmatch(r"f\.yaml:\d+", error.where)


def test_aliases_within_the_limit_still_load_and_share_their_value():
    data = parse_yaml_text(billion_laughs(levels=3), "f.yaml")  # 9**4 strings expanded
    assert data["l3"][0][0][0] == ["lol"] * 9


def test_looking_up_an_error_line_never_expands_an_alias():
    # A document built by hand (not through load_yaml): its line lookup composes it again, and the
    # bomb is refused there too instead of being walked key by key.
    doc = YamlDoc(path=Path("f.yaml"), text=billion_laughs(), data={})
    with pytest.raises(SpecError, match="alias"):
        doc.where(("l9", 0, 0, 0, 0, 0, 0, 0, 0, 0))


def test_a_line_through_an_alias_is_the_line_of_the_anchored_node():
    doc = YamlDoc(path=Path("f.yaml"), text="base: &b\n  x: 1\nother: *b\nmerged:\n  <<: *b\n", data={})
    assert doc.line_of(("other", "x")) == 2
    assert doc.line_of(("merged", "x")) == 2  # a merged key is found in the mapping it came from
    assert doc.line_of(("other", "nope")) == 3


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("x: &l [*l]\n", 1),
        ("x: &m {a: *m}\n", 1),
        ("a: &a\n  <<: *a\n", 1),
        ("a:\n  - b: &r\n      c: [*r]\n", 2),
    ],
)
def test_a_self_referencing_anchor_is_refused_at_the_anchor_line(text, line):
    error = spec_error(text)
    assert "recursive" in error.message and error.where == f"f.yaml:{line}"


def test_deep_nesting_is_refused_not_a_recursion_error():
    error = spec_error("[" * 900 + "]" * 900 + "\n")
    assert "levels deep" in error.message


# -- keys and scalars ---------------------------------------------------------------------------


def test_a_duplicate_key_is_refused_naming_both_lines():
    error = spec_error("a: 1\nb:\n  c: 2\n  c: 3\n")
    assert error.message == "duplicate key 'c' (lines 3 and 4)" and error.where == "f.yaml:4"


def test_a_second_repeats_in_an_experiment_is_refused_not_last_wins(tmp_path):
    path = edited_example(tmp_path, "points: [1, 4]\n", "points: [1, 4]\nrepeats: 2\nrepeats: 50\n")
    with pytest.raises(SpecError, match=r"duplicate key 'repeats' \(lines \d+ and \d+\)"):
        load_experiment(path)


def test_a_merged_key_may_still_be_overridden():
    data = parse_yaml_text("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 3\n", "f.yaml")
    assert data["c"] == {"x": 3, "y": 2}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("2024-02-30", "not a valid date"),  # a realistic date_added typo
        ("9" * 5000, "5000 digits"),  # over Python's int parsing limit
        ("!!int abc", "cannot read 'abc' as int"),
        ("!!float abc", "cannot read 'abc' as float"),
        ("!!bool maybe", "cannot read 'maybe' as bool"),
        ("!!timestamp soon", "cannot read 'soon' as timestamp"),
        ("!nope x", "could not determine a constructor for the tag '!nope'"),
    ],
)
def test_a_scalar_that_cannot_convert_is_reported_at_its_line(value, words):
    error = spec_error(f"a: 1\nmeta:\n  date_added: {value}\n")
    assert words in error.message and error.where == "f.yaml:3"
    assert len(str(error)) < 300


@pytest.mark.parametrize(("text", "expected"), [("0x_", "0x_"), ("1_", "1_"), ("0x1_f", 31), ("1_000", 1000)])
def test_numbers_keep_js_yaml_shapes(text, expected):
    # js-yaml 4: an integer needs a digit and may not end in "_"; anything else is a string.
    assert parse_yaml_text(f"v: {text}\n", "f.yaml")["v"] == expected


def test_a_control_character_is_one_line_at_its_line():
    error = spec_error("a: b\nc: \x07\n")
    assert error.where == "f.yaml:2"


# -- files that are not spec files --------------------------------------------------------------


def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "experiment.yaml"
    os.mkfifo(fifo)
    # In a child with a deadline: opening a FIFO with no writer would block this test forever.
    code = "from recipe_ledger.spec.yamlfile import load_yaml\nload_yaml(__import__('sys').argv[1])"
    done = subprocess.run(
        [sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=120, check=False
    )
    assert "not a regular file" in done.stderr


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused_without_reading_it(path):
    with pytest.raises(SpecError, match="not a regular file"):
        load_yaml(path)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(SpecError, match="is a directory"):
        load_yaml(tmp_path)


def test_an_oversized_file_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# pad\n" * (MAX_FILE_BYTES // 6 + 1))
    with pytest.raises(SpecError, match="limit for a spec"):
        load_yaml(path)


@pytest.mark.parametrize("name", ["x" * 10_000, "/".join(["y" * 250] * 40)])
def test_a_very_long_path_is_one_short_line(name):
    with pytest.raises(SpecError) as raised:
        load_yaml(name + ".yaml")
    assert len(str(raised.value)) < 300 and "\n" not in str(raised.value)


def test_a_very_long_path_on_the_command_line_is_one_line():
    for args in (
        ["recipe", "show", "x" * 10_000],
        ["fit", "recipe-ledger/tiny-qwen2", "--box", "b" * 10_000],
    ):
        line = assert_one_clean_line(*cli(args))
        assert len(line) < 600  # the name cut in the middle, however long it was


# -- locations and bounds in experiments ---------------------------------------------------------


def test_an_env_value_of_the_wrong_type_is_reported_at_its_own_line(tmp_path):
    # The report: VLLM_SERVER_DEV_MODE: ["1"] under overrides.env was named as control.recipe.
    path = edited_example(tmp_path, 'VLLM_SERVER_DEV_MODE: "1"', 'VLLM_SERVER_DEV_MODE: ["1"]')
    with pytest.raises(SpecError) as raised:
        load_experiment(path)
    expected_line = line_of(path.read_text(), "VLLM_SERVER_DEV_MODE")
    assert raised.value.where == f"{path}:{expected_line}"
    assert raised.value.message.startswith("control.overrides.env.VLLM_SERVER_DEV_MODE: expected a string")


def test_an_overlong_field_of_a_recipe_arm_is_named_not_its_recipe_key(tmp_path):
    path = edited_example(tmp_path, "    model_path: .cache/tiny-model", "    model_path: " + "m" * 10_000)
    with pytest.raises(SpecError) as raised:
        load_experiment(path)
    assert raised.value.message.startswith("candidates.sglang.model_path: String should have at most")
    assert len(str(raised.value)) < 300


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("points: [1, 4]\n", "points: [1, 4]\nrepeats: 100000000\n", "repeats"),
        ("points: [1, 4]", "points: [1, 400000000]", "points[1]"),
        ("points: [1, 4]", "points: [" + ", ".join(["1"] * 1000) + "]", "points"),
        ("  health_timeout_s: 300", "  health_timeout_s: 1e300", "server.health_timeout_s"),
        ("  port: 8126", "  port: 70000", "server.port"),
    ],
)
def test_numbers_that_size_work_are_bounded(tmp_path, old, new, field):
    path = edited_example(tmp_path, old, new)
    line = assert_one_clean_line(*cli(["run", "--plan", str(path)]))
    assert f"{path}:" in line and f" {field}: " in line


@pytest.mark.parametrize("name", ["../../../../X", "/abs", "Upper", "a b", "", "x" * 65, "-dash"])
def test_an_arm_name_that_could_become_a_path_is_refused(tmp_path, name):
    path = edited_example(tmp_path, "\n  sglang:\n", f'\n  "{name}":\n')
    with pytest.raises(InputError) as raised:
        load_experiment(path)
    assert raised.value.where == f"{path}:{line_of(path.read_text(), f'{chr(34)}{name}{chr(34)}:')}"


def test_the_slug_rule_is_one_rule():
    assert all(is_slug(name) for name in ("control", "tiny-cpu", "v2", "h200_x8", "a.b"))
    assert not any(is_slug(name) for name in ("..", "../x", "/x", "x/y", "X", "x\n", "", None, 5))


def test_a_release_lane_and_version_are_slugs(tmp_path):
    spec = REPO / "recipes" / "releases" / "tiny-cpu" / "v1.yaml"
    for old, new in (("lane: tiny-cpu", "lane: ../tiny"), ("version: v1", "version: /v1")):
        path = tmp_path / "v1.yaml"
        path.write_text(spec.read_text().replace(old, new, 1))
        with pytest.raises(InputError, match="expected a name of lower-case letters"):
            load_release_spec(path)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  - metric: output_tps_total", '  - metric: ""', "bars[0].metric"),  # found by the fuzz benchmark
        ("    min_effect: 0.25", "    min_effect: 5", "bars[0].min_effect"),  # the verdict takes < 1 only
    ],
)
def test_a_bar_the_verdict_cannot_take_is_refused_by_the_spec(tmp_path, old, new, field):
    path = edited_example(tmp_path, old, new)
    line = assert_one_clean_line(*cli(["run", "--plan", str(path)]))
    assert f" {field}: " in line


def test_every_bound_at_its_limit_still_plans(tmp_path):
    # The bounds refuse what no person means and nothing the later stages accept.
    # The fixed design: its repeats and calibration at their bounds (the sequential one's cap is
    # bounded by sequential.MAX_CAP, checked in test_experiment_design.py).
    extreme = "repeats: 100\ncalibration:\n  repeats: 100\nseed: 9223372036854775807\n"
    text = EXAMPLE.read_text().replace("points: [1, 4]\n", "points: [1, 4]\n" + extreme, 1)
    text = text.replace(
        "points: [1, 4]", "points: [" + ", ".join(str(10**6 - i) for i in range(62)) + ", 1, 4]"
    )
    text = re.sub(r"min_effect: [0-9.]+", "min_effect: 0.999", text)
    text = re.sub(r"agreement_threshold: [0-9.]+", "agreement_threshold: 0.999", text)
    text = text.replace("  health_timeout_s: 300", "  health_timeout_s: 604800").replace(
        "port: 8126", "port: 65535"
    )
    path = tmp_path / "extreme.yaml"
    path.write_text(text)
    code, output = cli(["run", "--plan", str(path)])
    assert code == 0, output
    assert "control#100" in output  # the hundredth launch of the control is scheduled
