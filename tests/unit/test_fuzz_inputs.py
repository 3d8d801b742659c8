"""Seeded fuzzing of the spec readers (issue 14, part 8): mutated real recipes and experiments end
in success or in one error line with exit 2 or 3, never a traceback; the bombs among them end
cleanly inside a child process with CPU and memory limits.

The mutator and the limited child runner live in benchmarks/fuzz_inputs.py, which runs thousands
of cases; this suite runs a few hundred, seeded, so a failure names a case that can be replayed.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from recipe_ledger.cli import main
from recipe_ledger.errors import LedgerError
from recipe_ledger.recipes.corpus import load_corpus
from recipe_ledger.recipes.models import Recipe
from recipe_ledger.spec.validate import validate_doc
from recipe_ledger.spec.yamlfile import load_yaml

from helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


fuzz = load_script("benchmarks/fuzz_inputs.py")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A scratch copy of recipes/ and experiments/ whose files the cases overwrite."""
    return fuzz.make_root(tmp_path_factory.mktemp("fuzz"), with_shared=False)


def cases(seeds: list[Path], count: int, seed: int):
    """(seed file, original text, mutated bytes, mutation names), ``count`` of them."""
    rng = random.Random(seed)
    for n in range(count):
        path = seeds[n % len(seeds)]
        original = path.read_text(encoding="utf-8")
        data, names = fuzz.mutated_bytes(original, rng)
        yield path, original, data, names


def assert_clean(code: int, output: str, exception: BaseException | None, context: str) -> None:
    assert exception is None or isinstance(exception, SystemExit), f"{context}: {exception!r}\n{output}"
    assert "Traceback" not in output, f"{context}\n{output}"
    assert code in (0, 2, 3), f"{context}: exit {code}\n{output}"
    if code != 0:
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, f"{context}: expected one error line\n{output}"


def test_the_mutator_is_seeded_and_mutates():
    text = (REPO / "experiments" / "examples" / "tiny-lane.yaml").read_text()
    first = [fuzz.mutate(text, random.Random(7)) for _ in range(2)]
    assert first[0] == first[1]
    changed = [fuzz.mutate(text, random.Random(seed))[0] != text for seed in range(50)]
    assert sum(changed) >= 45  # a deleted blank line or a comment's duplicate may change nothing


def test_mutated_recipes_load_or_fail_on_one_line(project, tmp_path):
    # The loader and the model directly: cheap enough for many cases.
    seeds = fuzz.recipe_seeds(project) + fuzz.experiment_seeds(project)
    outcomes = {"ok": 0, "error": 0}
    for n, (_, _, data, names) in enumerate(cases(seeds, 300, seed=11)):
        path = tmp_path / f"case-{n}.yaml"
        path.write_bytes(data)
        try:
            validate_doc(load_yaml(path), Recipe, what="recipe")
            outcomes["ok"] += 1
        except LedgerError as error:
            assert "\n" not in str(error), (n, names, str(error))
            assert error.exit_code in (2, 3), (n, names, str(error))
            outcomes["error"] += 1
    assert outcomes["ok"] and outcomes["error"]  # both paths were exercised


def _invoke(args: list[str], cwd: Path) -> tuple[int, str, BaseException | None]:
    load_corpus.cache_clear()  # a Corpus caches parsed files by root: each case must be read anew
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, args)
    finally:
        os.chdir(old)
    return result.exit_code, result.output, result.exception


@pytest.mark.filterwarnings("ignore")
def test_mutated_recipes_through_show_command_and_lint(project):
    for n, (path, original, data, names) in enumerate(cases(fuzz.recipe_seeds(project), 80, seed=12)):
        ref = str(path.relative_to(project / "recipes"))
        path.write_bytes(data)
        try:
            for args in fuzz.recipe_commands(project, ref, fuzz.hardware_of(original)):
                assert_clean(*_invoke(args, project), context=f"case {n} {names} {args[:2]}")
        finally:
            path.write_text(original, encoding="utf-8")


@pytest.mark.filterwarnings("ignore")
def test_mutated_experiments_through_run_plan(project):
    for n, (path, original, data, names) in enumerate(cases(fuzz.experiment_seeds(project), 60, seed=13)):
        path.write_bytes(data)
        try:
            args = ["run", "--plan", str(path), "--root", str(project)]
            assert_clean(*_invoke(args, project), context=f"case {n} {names}")
        finally:
            path.write_text(original, encoding="utf-8")


BOMBS = {
    "alias bomb": lambda text: fuzz.BILLION_LAUGHS + text,
    "recursive anchor": lambda text: text + "zz: &rec [*rec]\n",
    "deep nesting": lambda text: text + "zz: " + "[" * 999 + "]" * 999 + "\n",
    "huge repeats": lambda text: text.replace("repeats: 2\n", "repeats: 100000000\n", 1),
    "huge integer": lambda text: text.replace("repeats: 2\n", "repeats: " + "9" * 5000 + "\n", 1),
    "long model path": lambda text: text.replace(".cache/tiny-model", "m" * 100_000, 1),
}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_a_bomb_ends_cleanly_inside_cpu_and_memory_limits(project, bomb):
    # The limits, not a clock, stop a runaway: the child is killed by RLIMIT_CPU / RLIMIT_AS, and
    # a killed child is a "runaway" outcome, which fails here.
    experiment = project / "experiments" / "examples" / "tiny-engines.yaml"
    recipe = project / "recipes" / "models" / "recipe-ledger" / "tiny-qwen2.yaml"
    for path, args in (
        (experiment, ["run", "--plan", str(experiment), "--root", str(project)]),
        (recipe, ["recipe", "show", str(recipe), "--recipes", str(project / "recipes")]),
    ):
        original = path.read_text(encoding="utf-8")
        mutated = BOMBS[bomb](original)
        path.write_text(mutated, encoding="utf-8")
        try:
            outcome = fuzz.run_limited(args, cwd=project, cpu_s=20, extra_mem=512 << 20)
        finally:
            path.write_text(original, encoding="utf-8")
        if mutated == original:
            continue  # the bomb has no target in this file (a recipe has no repeats)
        assert outcome.kind == "clean", (bomb, args[:2], outcome)


def test_a_fifo_given_as_the_experiment_is_refused_in_a_limited_child(project, tmp_path):
    fifo = tmp_path / "experiment.yaml"
    os.mkfifo(fifo)
    outcome = fuzz.run_limited(["run", "--plan", str(fifo), "--root", str(project)], cwd=project, cpu_s=20)
    assert outcome.kind == "clean" and "not a regular file" in outcome.output, outcome


def test_outcomes_are_classified_from_the_wait_status_and_the_output():
    assert fuzz.classify(None, "").kind == "runaway"  # outlived the wall-clock deadline, killed
    assert fuzz.classify(9, "").kind == "runaway"  # the wait status of a child killed by SIGKILL
    assert fuzz.classify(137 << 8, "MemoryError\n").kind == "runaway"
    assert fuzz.classify(1 << 8, "Traceback (most recent call last):\n").kind == "traceback"
    assert fuzz.classify(1 << 8, "error: f.yaml:1: bad\n").kind == "traceback"  # exit 1 is no documented code
    assert fuzz.classify(2 << 8, "error: f.yaml:1: bad\nerror: again\n").kind == "traceback"
    assert fuzz.classify(2 << 8, "error: f.yaml:1: bad\n").kind == "clean"
    assert fuzz.classify(0, "fine\n").kind == "ok"
