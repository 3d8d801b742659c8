"""Verdicts explain themselves: the reason line every command prints beside an outcome, and the
rule a reproduction decides by (issue 29 item 5).

The reasons and numbers asserted are read from the verdicts and entries the tests build or copy,
never written into the expected text."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from recipe_ledger import verdict as verdicts
from recipe_ledger.cli import main, output
from recipe_ledger.cli.output import UNDECIDED, reason_lines, verdict_reasons
from recipe_ledger.ledger.models import ReleaseNumber, ReproductionPayload, current_version, load_payload
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.releases import reproduce

from helpers.projects import fixed_ledger

LONG = (
    "effect -19.7% [-81.0%, +240.5%] spans the bar (neither clear of zero nor inside +-20%; MDE "
    "930.1%): rerun with more repeats (about 166 per arm needed); a tighter instrument is cheaper"
)


def _words(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


# ------------------------------------------------------------------------------ the reason line


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        ("inconclusive", LONG),
        ("not-comparable", "not comparable: control repeat 1: flattered: the prefix cache served 10%"),
        ("not-shown", "difference -1.2 pt [-4.0 pt, +1.5 pt] reaches past the -2 pt margin"),
        ("faster, quality not shown", "no quality bar shown non-inferior"),
        ("win", "effect +4.1% [+2.2%, +6.0%] exceeds the 3% bar and the noise (MDE 1.8%)"),
        ("no-change", "effect +0.1% [-1.0%, +1.2%] lies inside the +-3% bar"),
        ("reproduced", "420.4 now vs 420.4 published, effect +0.0% [-8.2%, +8.4%] lies inside"),
    ],
)
@pytest.mark.parametrize("columns", [80, 120])
def test_a_reason_line_names_the_bar_and_outcome_and_keeps_every_word_within_the_width(
    outcome, reason, columns, monkeypatch
):
    monkeypatch.setenv("NO_COLOR", "1")
    lines = reason_lines("hbm moe_step_ms_b32@1", outcome, reason, columns)
    assert lines[0].startswith(f"  hbm moe_step_ms_b32@1: {outcome}: ")
    assert all(len(line) <= columns for line in lines)
    assert all(line.startswith("    ") for line in lines[1:])  # the rest hangs under the first line
    said = reason.removeprefix("not comparable: ")  # "not-comparable: not comparable:" says it twice
    assert _words(lines) == f"hbm moe_step_ms_b32@1: {outcome}: {said}"


def test_a_short_reason_stays_on_one_line_and_a_missing_one_says_so(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert reason_lines("a m@1", "inconclusive", "too few", 80) == ["  a m@1: inconclusive: too few"]
    assert reason_lines("a m@1", "inconclusive", "", 80) == ["  a m@1: inconclusive (no reason recorded)"]


def test_a_reason_never_carries_a_terminal_escape(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    (line,) = reason_lines("a m@1", "inconclusive", "see \x1b[31mred\x1b[0m", 200)
    assert "\x1b" not in line and "\\x1b" in line


def test_the_outcome_is_coloured_on_a_terminal(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    (line,) = reason_lines("a m@1", "inconclusive", "too few", 80)
    assert (
        output.paint(output.text("inconclusive"), True) in line and line != "  a m@1: inconclusive: too few"
    )


def test_only_undecided_outcomes_are_explained_unless_every_one_is_asked_for(capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    explained = [("a m@1", "win", "clear"), ("b m@1", "inconclusive", "spans"), ("c m@1", "not-shown", "x")]
    output.echo_reasons(explained, title="why undecided")
    shown = capsys.readouterr().out.splitlines()
    assert shown == ["why undecided", "  b m@1: inconclusive: spans", "  c m@1: not-shown: x"]
    output.echo_reasons(explained, every=True)
    assert len(capsys.readouterr().out.splitlines()) == len(explained)
    output.echo_reasons([("a m@1", "win", "clear")], title="why undecided")
    assert capsys.readouterr().out == ""  # nothing undecided: no title either


def test_verdict_reasons_reads_speed_then_quality_bars_from_a_result():
    entry = {
        "payload": {
            "experiment": {
                "bars": [{"candidate": "c", "metric": "tps", "point": 4, "outcome": "win", "reason": "r1"}],
                "quality": [{"candidate": "c", "metric": "gsm8k", "point": 1, "outcome": "not-shown"}],
            }
        }
    }
    assert verdict_reasons(entry) == [("c tps@4", "win", "r1"), ("c gsm8k@1 (quality)", "not-shown", "")]
    assert verdict_reasons({"payload": {"text": "a note"}}) == []


# --------------------------------------------------------------------------- the reproduce rule


def _verdict(
    effect: float, low: float, high: float, *, tolerance: float = 0.25, agree: bool = True
) -> verdicts.Verdict:
    """A verdict as ``verdicts.decide`` returns one, with the interval under test."""
    bar = verdicts.Bar(metric="output_tps_total", point=4, direction="higher", min_effect=tolerance)
    return verdicts.Verdict(
        outcome="inconclusive",
        reason="replicates disagree (9.0% > 5%, candidate arm): no win or regression on this data",
        bar=bar,
        thresholds=verdicts.Thresholds(
            alpha=0.05, confidence=0.95, power=0.8, min_effect=tolerance, agreement_threshold=0.05
        ),
        n_control=3,
        n_candidate=3,
        control_geomean=400.0,
        candidate_geomean=400.0 * (1 + effect),
        effect=effect,
        ci_low=low,
        ci_high=high,
        mde=0.08,
        agreement=verdicts.Agreement(
            checked=True,
            passed=agree,
            worst_spread=0.09 if not agree else 0.01,
            worst_arm="candidate",
            threshold=0.05,
        ),
    )


@pytest.mark.parametrize(
    ("effect", "low", "high", "expected"),
    [
        (-0.12, -0.249, 0.031, "reproduced"),  # 12% slower, the whole CI inside ±25%
        (0.051, -0.123, 0.259, "inconclusive"),  # within 5%, the CI reaches past +25%
        (-0.25, -0.30, -0.20, "inconclusive"),  # straddles the lower edge
        (-0.40, -0.45, -0.26, "not-reproduced"),  # wholly below -25%
        (0.40, 0.26, 0.55, "not-reproduced"),  # wholly above +25%: faster does not hold either
        (-0.30, -0.35, -0.25, "inconclusive"),  # touches the edge: not shown outside it
        (0.0, -0.25, 0.10, "inconclusive"),  # touches the edge: not shown inside it
    ],
)
def test_a_number_is_reproduced_only_inside_the_tolerance_and_departs_only_outside_it(
    effect, low, high, expected
):
    outcome, reason = reproduce.judge(_verdict(effect, low, high))
    assert outcome == expected
    interval = f"effect {effect * 100:+.1f}% [{low * 100:+.1f}%, {high * 100:+.1f}%]"
    assert interval in reason and "±25% tolerance" in reason
    says = {"reproduced": "lies inside", "not-reproduced": "lies outside", "inconclusive": "crosses the edge"}
    assert says[expected] in reason


def test_outside_the_tolerance_with_disagreeing_replicates_is_inconclusive_with_the_verdicts_reason():
    verdict = _verdict(-0.40, -0.45, -0.26, agree=False)
    outcome, reason = reproduce.judge(verdict)
    assert outcome == "inconclusive"
    assert "lies outside" in reason and verdict.reason in reason


def test_unknown_noise_is_inconclusive_and_says_the_verdicts_reason():
    bar = verdicts.Bar(metric="output_tps_total", point=4, direction="higher", min_effect=0.25)
    verdict = verdicts.decide([400.0], [399.0], bar, None)  # one sample each, no calibration
    assert reproduce.judge(verdict) == ("inconclusive", verdict.reason)


def test_judge_agrees_with_the_verdicts_no_change_on_real_samples():
    bar = verdicts.Bar(metric="output_tps_total", point=4, direction="higher", min_effect=0.25)
    verdict = verdicts.decide([420.0, 421.0, 419.0], [418.0, 420.0, 419.5], bar, None)
    assert verdict.outcome == "no-change"
    assert reproduce.judge(verdict)[0] == "reproduced"


def test_a_new_reproduction_records_its_rule_and_an_old_one_reads_with_its_words(tmp_path):
    assert current_version("reproduction") == 2
    old = load_payload("reproduction", {"schema_version": 1, "target": "a" * 64, "outcome": "not-reproduced"})
    assert isinstance(old, ReproductionPayload)
    assert old.outcome == "not-reproduced" and old.rule is None
    ledger = Ledger.init(tmp_path)
    target = ledger.append("note", {"text": "a published number stands here"}, writer="b", git=None)
    entry = ledger.append(
        "reproduction",
        {"target": target["id"], "outcome": "inconclusive", "rule": reproduce.RULE},
        writer="b",
        git=None,
    )
    assert entry["payload"]["schema_version"] == 2 and entry["payload"]["rule"] == reproduce.RULE


# ------------------------------------------------------------------------------ the CLI printing


def _cli(root: Path, *args: str, columns: int = 80) -> Result:
    env = {"COLUMNS": str(columns), "NO_COLOR": "1", "FORCE_COLOR": None}
    return CliRunner().invoke(main, [*args, "--root", str(root)], env=env)


def _undecided_result(root: Path) -> dict:
    """A result of the fixed ledger with both undecided and decided bars (the H200 study's)."""
    return next(
        e
        for e in Ledger.open(root).entries()
        if e["kind"] == "result" and {o in UNDECIDED for _, o, _ in verdict_reasons(e)} == {True, False}
    )


@pytest.mark.parametrize("columns", [80, 200])
def test_show_prints_each_undecided_bars_reason_beside_it_and_not_the_decided_ones(tmp_path, columns):
    root = fixed_ledger(tmp_path)
    result = _undecided_result(root)
    shown = _cli(root, "show", result["id"][:12], columns=columns)
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    start = lines.index("why undecided")
    block = lines[start + 1 :]
    block = block[: next(i for i, line in enumerate(block) if not line.startswith("  "))]
    assert all(len(line) <= columns for line in block)
    explained = verdict_reasons(result)
    undecided = [(label, o, r) for label, o, r in explained if o in UNDECIDED]
    assert _words(block) == " ".join(f"{label}: {o}: {r}" for label, o, r in undecided)
    decided = [label for label, o, _ in explained if o not in UNDECIDED]
    assert decided and not any(line.startswith(f"  {label}: ") for label in decided for line in block)


def test_show_of_a_result_that_decided_every_bar_prints_no_reason_block(tmp_path):
    root = fixed_ledger(tmp_path)
    decided = next(
        e
        for e in Ledger.open(root).entries()
        if e["kind"] == "result"
        and verdict_reasons(e)
        and all(o not in UNDECIDED for _, o, _ in verdict_reasons(e))
    )
    shown = _cli(root, "show", decided["id"][:12])
    assert shown.exit_code == 0, shown.output
    assert "why undecided" not in shown.output


def test_run_prints_every_bar_with_its_outcome_and_reason(tmp_path, capsys, monkeypatch):
    from recipe_ledger.cli.run import print_verdicts
    from recipe_ledger.pipeline.run import RunOutcome

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    result = _undecided_result(fixed_ledger(tmp_path))
    print_verdicts(RunOutcome("run", tmp_path, result, [], [], []))
    lines = capsys.readouterr().out.splitlines()
    block = lines[lines.index("why") + 1 :]
    block = block[: next((i for i, line in enumerate(block) if not line.startswith("  ")), len(block))]
    assert _words(block) == " ".join(f"{label}: {o}: {r}" for label, o, r in verdict_reasons(result))
    assert all(len(line) <= 80 for line in block)


def _number(name: str) -> ReleaseNumber:
    return ReleaseNumber.model_validate(
        {
            "name": name,
            "metric": "output_tps_total",
            "value": 400.0,
            "point": 4,
            "arm": "lane",
            "tolerance": 0.25,
        }
    )


def test_reproduce_prints_each_numbers_outcome_and_reason_and_exits_1_unless_reproduced(
    tmp_path, monkeypatch
):
    Ledger.init(tmp_path)
    cases = {"tps_c4": _verdict(-0.12, -0.249, 0.031), "tps_c1": _verdict(0.051, -0.123, 0.259)}
    outcomes = []
    for name, verdict in cases.items():
        outcome, reason = reproduce.judge(verdict)
        outcomes.append(reproduce.NumberOutcome(_number(name), verdict, outcome, [1.0], reason))
    entry = {"id": "f" * 64, "payload": {"outcome": reproduce.overall(outcomes)}}
    monkeypatch.setattr(reproduce, "reproduce", lambda *a, **k: (entry, outcomes))
    shown = _cli(tmp_path, "reproduce", "tiny-cpu@v2")
    assert shown.exit_code == 1, shown.output
    assert _words(shown.output.splitlines()).startswith(" ".join(reproduce.describe(o) for o in outcomes))
    assert all(len(line) <= 80 for line in shown.output.splitlines())
    assert f"reproduction {'f' * 12}: inconclusive" in shown.output
