"""Property-based fuzzing (issue 26, part 7): the YAML loaders (recipe, experiment, box), the spec
models behind them, the recipe lint, the command templates and the redactor, given what hypothesis
makes of real files (values replaced at any path, text inserted or cut) and of plain text, end in a
result or in the project's own error (LedgerError: InputError, SpecError, StateError), never in
another exception.

Bounded and deterministic for CI: every test is ``derandomize=True`` (the same examples on every
run: a failure names a case anyone can replay), ``deadline=None`` (a loaded CI box is not a
failure) and a fixed ``max_examples``; the whole file takes well under a minute on two cores.
benchmarks/fuzz_inputs.py is the large, seeded, process-isolated counterpart (CPU and memory
limits, thousands of cases through the CLI).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")  # a dev dependency (pyproject's dev extra)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from recipe_ledger.errors import LedgerError  # noqa: E402
from recipe_ledger.experiment.spec import load_experiment  # noqa: E402
from recipe_ledger.instruments.template import TemplateError, fields, pieces, render  # noqa: E402
from recipe_ledger.recipes.boxes import load_box_file  # noqa: E402
from recipe_ledger.recipes.catalog import LoadedRecipe, RecipeRoot  # noqa: E402
from recipe_ledger.recipes.lint import Vocabulary, lint_recipe  # noqa: E402
from recipe_ledger.recipes.models import Recipe  # noqa: E402
from recipe_ledger.redact import redact_env, redact_obj, redact_text  # noqa: E402
from recipe_ledger.spec.validate import validate_doc  # noqa: E402
from recipe_ledger.spec.yamlfile import load_yaml  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT_SEEDS = sorted((REPO / "experiments").rglob("*.yaml"))
RECIPE_SEEDS = sorted((REPO / "recipes" / "models").rglob("*.yaml"))
BOX_SEEDS = sorted((REPO / "recipes" / "boxes").glob("*.yaml"))

FUZZ = settings(
    derandomize=True,
    deadline=None,
    database=None,  # nothing written under .hypothesis/: the examples are derived, not remembered
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def fuzz(examples: int) -> settings:
    """FUZZ with this test's number of examples (what bounds its time)."""
    return settings(FUZZ, max_examples=examples)


# -- what hypothesis builds ----------------------------------------------------------------------

# Text that means something to YAML, to templates and to terminals, with plain letters between.
YAML_CHARS = st.sampled_from(
    list("abcxyz019 :-[]{},&*!|>'\"#%@`?\n\t\\.~_=")
    + ["\u2028", "\ufeff", "\x1b", "\x00", "\x85", "é", "\U0001f600"]
)
YAML_TOKENS = YAML_CHARS | st.sampled_from(["{arm:>99}", "<<: *a", "&a ", "*a", "!!binary ", "\n  - ", ": "])
TEXT = st.lists(YAML_TOKENS, max_size=30).map("".join)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
    st.text(max_size=30),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into ``node`` (the empty one included): where a value may be replaced."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


# Keys the readers look for wherever they are (the lint reads every arg list), beside random ones.
KEYS = (
    st.sampled_from(["extra_args", "args", "base_args", "vllm_args"])
    | st.sampled_from(["env", "sglang", "hardware_overrides", "<<", "kind"])
    | st.text(max_size=8)
)


# An arg list as a careless hand writes one: flags, values, and now and then a mapping or a list.
ARG_LISTS = st.lists(
    st.sampled_from(["--max-num-seqs", "8", "--x=1", "--x"])
    | SCALARS
    | st.dictionaries(TEXT, SCALARS, max_size=2),
    max_size=5,
)


def _at(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


def _added(node: Any, path: tuple, key: str, value: Any) -> Any:
    """``node`` with ``key: value`` added to the mapping at ``path`` (nothing when it is none)."""
    target = _at(node, path)
    if not isinstance(target, dict):
        return node
    return _replaced(node, path, {**target, key: value})


def _replaced(node: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {**node, head: _replaced(node[head], rest, value)}
    copy = list(node)
    copy[head] = _replaced(node[head], rest, value)
    return copy


@st.composite
def mutated_document(draw: st.DrawFn, seeds: list[Path]) -> str:
    """A real spec file, changed: values replaced or keys added at random paths (written as JSON,
    which YAML reads), or its text cut, doubled or with YAML-ish text inserted."""
    seed = draw(st.sampled_from(seeds))
    text = seed.read_text(encoding="utf-8")
    if draw(st.booleans()):
        data = load_yaml(seed).data
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                path = draw(st.sampled_from(_paths(data)))
                data = _replaced(data, path, draw(JSON_VALUES))
            else:
                mappings = [p for p in _paths(data) if isinstance(_at(data, p), dict)] or [()]
                key, value = draw(KEYS), draw(ARG_LISTS | JSON_VALUES)
                data = _added(data, draw(st.sampled_from(mappings)), key, value)
        return json.dumps(data, ensure_ascii=draw(st.booleans()), default=str)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "cut", "double"]))
        if action == "insert":
            text = text[:at] + draw(TEXT) + text[at:]
        elif action == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 200)) :]
        else:
            line_end = text.find("\n", at)
            line_start = text.rfind("\n", 0, at) + 1
            text = text[:line_end] + "\n" + text[line_start:line_end] + text[line_end:]
    return text


# -- the properties ------------------------------------------------------------------------------


def only_ledger_errors(load: Callable[[], object]) -> None:
    """``load()`` returns, or raises a LedgerError of one line with an exit code for bad input."""
    try:
        load()
    except LedgerError as error:
        assert error.exit_code in (2, 3), error
        assert "\n" not in error.one_line(), error.one_line()


@pytest.fixture(scope="module")
def case_file(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "case.yaml"


@fuzz(150)
@given(text=mutated_document(EXPERIMENT_SEEDS))
def test_mutated_experiments_load_or_fail_with_a_spec_error(case_file, text):
    case_file.write_text(text, encoding="utf-8", errors="surrogatepass")
    only_ledger_errors(lambda: load_experiment(case_file))


@pytest.fixture(scope="module")
def vocabulary() -> Vocabulary:
    root = RecipeRoot(REPO / "recipes")
    return Vocabulary.from_taxonomy(root.taxonomy, list(root.strategies))


@fuzz(120)
@given(text=mutated_document(RECIPE_SEEDS))
def test_mutated_recipes_load_and_lint_or_fail_with_a_spec_error(case_file, vocabulary, text):
    load_and_lint(case_file, vocabulary, text)


def load_and_lint(case_file: Path, vocabulary: Vocabulary, text: str) -> None:
    """The recipe in ``text`` loaded, validated and linted (the static checks), or a LedgerError."""
    case_file.write_text(text, encoding="utf-8", errors="surrogatepass")

    def load() -> None:
        doc = load_yaml(case_file)
        recipe = validate_doc(doc, Recipe, what="recipe")
        warnings = lint_recipe(LoadedRecipe(ref="models/org/case.yaml", doc=doc, recipe=recipe), vocabulary)
        assert all(isinstance(w.message, str) for w in warnings)

    only_ledger_errors(load)


@st.composite
def recipe_with_an_arg_list(draw: st.DrawFn) -> str:
    """A real recipe with an arg list added under one of its mappings (a known field or not)."""
    data = load_yaml(draw(st.sampled_from(RECIPE_SEEDS))).data
    mappings = [p for p in _paths(data) if isinstance(_at(data, p), dict)]
    key = draw(st.sampled_from(["extra_args", "args", "base_args", "vllm_args"]))
    return json.dumps(_added(data, draw(st.sampled_from(mappings)), key, draw(ARG_LISTS)), default=str)


@fuzz(80)
@given(text=recipe_with_an_arg_list())
def test_an_arg_list_anywhere_in_a_recipe_lints_or_fails_with_a_spec_error(case_file, vocabulary, text):
    # recipes/flags.py raised a TypeError on a mapping inside an arg list the model does not read.
    test_mutated_recipes_load_and_lint_or_fail_with_a_spec_error.hypothesis.inner_test(
        case_file, vocabulary, text
    )


@fuzz(100)
@given(text=mutated_document(BOX_SEEDS))
def test_mutated_boxes_load_or_fail_with_a_spec_error(case_file, text):
    case_file.write_text(text, encoding="utf-8", errors="surrogatepass")
    only_ledger_errors(lambda: load_box_file(case_file))


@fuzz(150)
@given(data=st.binary(max_size=300) | st.lists(YAML_TOKENS, max_size=150).map(lambda t: "".join(t).encode()))
def test_any_bytes_load_as_yaml_or_fail_with_a_spec_error(case_file, data):
    case_file.write_bytes(data)
    only_ledger_errors(lambda: load_yaml(case_file))


# -- templates -----------------------------------------------------------------------------------

TEMPLATE_CHARS = st.sampled_from(list("{}:!.[]0a_rm>,=x "))
TEMPLATE_TEXT = st.lists(TEMPLATE_CHARS | st.sampled_from(["{arm}", "{seed}", "{{", "}}"]), max_size=20).map(
    "".join
)
NAMES = st.sampled_from(["arm", "point", "seed", "out", "p", "_x"])


@fuzz(300)
@given(part=TEMPLATE_TEXT, values=st.dictionaries(NAMES, st.text(max_size=20)))
def test_a_template_renders_as_plain_format_would_or_is_refused(part, values):
    try:
        names = fields(part)
    except TemplateError:
        return  # refused: what the spec then reports at the instrument's line
    if not set(names) <= set(values):
        with pytest.raises(KeyError):
            render(part, values)
        return
    rendered = render(part, values)
    # Where str.format is safe (plain fields only), both agree; and the size is bounded by the
    # parts given: no padding, width or precision can grow it.
    assert rendered == part.format(**values)
    assert len(rendered) <= len(part) + sum(len(values[name]) for name in names)


NO_BRACES = st.characters(blacklist_characters="{}")


@fuzz(200)
@given(name=st.text(NO_BRACES, max_size=10), spec=st.text(NO_BRACES, min_size=1, max_size=12))
def test_a_field_with_a_format_spec_or_conversion_is_always_refused(name, spec):
    for part in (f"{{arm:{spec}}}", f"{{arm!{spec}}}", f"{{arm.{name}}}", f"{{arm[{name}]}}"):
        with pytest.raises(TemplateError):
            pieces(part)


# -- the redactor --------------------------------------------------------------------------------


@fuzz(300)
@given(text=st.text(max_size=300) | st.lists(YAML_TOKENS, max_size=150).map("".join))
def test_the_redactor_takes_any_text(text):
    out = redact_text(text, environ={})
    assert isinstance(out, str)


@fuzz(200)
@given(obj=JSON_VALUES, env=st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=8))
def test_the_redactor_keeps_the_shape_of_any_object(obj, env):
    out = redact_obj(obj, environ={})
    if isinstance(obj, (dict, list, str)):
        assert type(out) is type(obj)
    if isinstance(obj, list):
        assert len(out) == len(obj)
    redacted = redact_env(env, environ={})
    assert isinstance(redacted, dict) and all(isinstance(v, str) for v in redacted.values())


def test_the_seeds_are_there():
    """The mutated documents start from the project's own files: none may silently vanish."""
    assert EXPERIMENT_SEEDS and RECIPE_SEEDS and BOX_SEEDS
