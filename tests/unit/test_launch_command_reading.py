"""LaunchCommand read back as settings: the flags and program words an argv holds, as planning
reads it (the MLflow index's ``flag.*`` / ``command`` params of an arm come from here)."""

from __future__ import annotations

import pytest

from recipe_ledger.recipes.flags import LaunchCommand, parse_flags

ARGVS = [
    ["vllm", "serve", "m", "--max-num-seqs", "8", "--enforce-eager"],
    ["vllm", "serve", "m", "--a=1", "stray", "words", "--b", "x", "y", "--c"],
    ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--x", "1", "--x", "2"],
    ["vllm", "serve", "m", "--speculative-config", '{"k": 2}', "--max-num-seqs=4", "-O3"],
    ["--only", "flags", "--here=1"],
    ["vllm", "serve"],
    [],
]


def test_each_flag_has_the_values_of_its_last_occurrence_in_first_appearance_order():
    command = LaunchCommand.parse(
        ["vllm", "serve", "m", "--x", "1", "--on", "--many", "a", "b", "--x=2", "--on"]
    )

    assert command.settings() == {"--x": ("2",), "--on": (), "--many": ("a", "b")}
    assert list(command.settings()) == ["--x", "--on", "--many"]


def test_the_positional_words_are_the_program_and_the_words_after_a_joined_flag():
    command = LaunchCommand.parse(["vllm", "serve", "m", "--a=1", "stray", "words", "--b", "x", "--c=2", "y"])

    assert command.positionals() == ("vllm", "serve", "m", "stray", "words", "y")
    assert LaunchCommand.parse(["--only", "flags"]).positionals() == ()


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) or "empty" for a in ARGVS])
def test_the_settings_agree_with_parse_flags(argv):
    """The two readers of recipes.flags see the same flags with the same values (the last wins)."""
    assert LaunchCommand.parse(argv).settings() == {flag.name: flag.values for flag in parse_flags(argv)}


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) or "empty" for a in ARGVS])
def test_every_word_is_a_flag_a_flag_s_value_or_positional(argv):
    command = LaunchCommand.parse(argv)
    flags = [option for option in command.options if option.name is not None]
    # A joined flag's first value sits in its own token (--name=value).
    owned = sum(1 + len(option.values) - (1 if option.joined else 0) for option in flags)

    assert owned + len(command.positionals()) == len(argv)
