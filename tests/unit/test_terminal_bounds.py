"""What reaches the terminal is bounded (issue 26, bounds at the door): error lines carry no control
character or escape sequence from the input (cli.output.terminal_safe, the one place), `recipe lint`
prints the first 50 warnings and the count of the rest, and a mapping inside an arg list is a lint
warning at its line instead of a TypeError."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.cli.output import terminal_safe
from recipe_ledger.cli.recipe import LINT_LINE_CHARS, lint_line

PROJECT_RECIPES = Path(__file__).resolve().parents[2] / "recipes"

RECIPE = """\
meta:
  title: "T"
  slug: "t"
  provider: "P"
  description: "d"
model:
  model_id: "org/t"
  base_args: []
variants:
  default:
    precision: bf16
    vram_minimum_gb: 1
compatible_strategies:
  - single_node_tp
"""


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("a\x1b[31mred\x1b[0m b", "ared b"),  # CSI removed whole, no "[31m" left behind
        ("x\x1b]8;;https://evil.example\x07click\x1b]8;;\x07", "xclick"),  # an OSC 8 hyperlink
        ("x\x1b]0;title\x1b\\y", "xy"),  # a window title, ended by ST
        ("a\u2028b\u2029c\x85d", "a b c d"),  # line and paragraph separators, NEL
        ("\ufeffname", "name"),  # a BOM
        ("left\u202eright\u200b", "leftright"),  # a bidirectional override, a zero-width space
        ("c1\x9b2Jx\x90y\x7f\x00\x07", "c1xy"),  # C1 CSI, DCS, DEL, NUL, BEL
        ("tab\tand\nnewline", "tab and newline"),
        ("ünïcödé 😀 中文 [bold]", "ünïcödé 😀 中文 [bold]"),  # printable text is kept as it is
    ],
)
def test_terminal_safe_strips_what_a_terminal_would_obey(given, shown):
    assert terminal_safe(given) == shown


def test_an_error_line_from_hostile_input_holds_no_control_character(tmp_path):
    spec = tmp_path / "x.yaml"
    spec.write_bytes("name: x\nbox: \x1b[2J\u2028\ufeff\nhypothesis: [".encode())
    result = CliRunner().invoke(main, ["run", "--plan", str(spec)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1
    assert all(ch.isprintable() for ch in lines[0]) and "\x1b" not in result.output


@pytest.fixture()
def root(tmp_path) -> Path:
    shutil.copy(PROJECT_RECIPES / "taxonomy.yaml", tmp_path / "taxonomy.yaml")
    shutil.copytree(PROJECT_RECIPES / "strategies", tmp_path / "strategies")
    (tmp_path / "models" / "org").mkdir(parents=True)
    return tmp_path


def lint(root: Path, model_lines: str, *args: str):
    """Lint the recipe with ``model_lines`` added to its ``model:`` block."""
    path = root / "models" / "org" / "t.yaml"
    path.write_text(RECIPE.replace("  base_args: []\n", "  base_args: []\n" + model_lines))
    return CliRunner().invoke(main, ["recipe", "lint", str(path), "--recipes", str(root), *args])


def test_a_mapping_inside_extra_args_is_a_warning_at_its_line(root):
    result = lint(root, "  extra_args:\n    - --max-num-seqs\n    - {a: 1}\n    - [x]\n")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    found = [line for line in result.output.splitlines() if "arg-not-text" in line]
    assert [line.split(": ")[0].rsplit(":", 1)[1] for line in found] == ["11", "12"]
    assert "model.extra_args[1] is a mapping" in found[0] and "model.extra_args[2] is a list" in found[1]


def test_lint_prints_fifty_warnings_and_counts_the_rest(root):
    items = "".join(f"    - {{k{n}: 1}}\n" for n in range(300))
    result = lint(root, "  extra_args:\n" + items)
    warnings = [line for line in result.output.splitlines() if "arg-not-text" in line]
    assert len(warnings) == 50
    assert "... and 250 more (--limit 0 prints them all" in result.output
    assert "300 warning(s)" in result.output
    everything = lint(root, "  extra_args:\n" + items, "--limit", "0")
    assert sum("arg-not-text" in line for line in everything.output.splitlines()) == 300
    assert "more (" not in everything.output


def test_a_lint_line_is_cut_and_stripped(root):
    flag = "--x" + "y" * 5_000
    result = lint(root, f'  extra_args:\n    - "{flag}=1"\n    - "{flag}"\n    - "1"\n')
    lines = [line for line in result.output.splitlines() if "flag-written-two-ways" in line]
    assert lines and all(len(line) == LINT_LINE_CHARS and line.endswith("...") for line in lines)
    assert lint_line("at\x1b[2J once\u2028") == "at once "
