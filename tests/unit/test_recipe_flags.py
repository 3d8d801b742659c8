"""Reading a launch command for people: each flag's value as text, and the words no flag owns."""

from __future__ import annotations

import pytest

from recipe_ledger.recipes.flags import LaunchCommand
from recipe_ledger.site.pages.experiments import options_of


def test_option_texts_are_each_flags_values_the_last_occurrence_winning() -> None:
    command = LaunchCommand.parse(
        ["vllm", "serve", "m", "--max-num-seqs", "8", "--enforce-eager", "--x=", "--max-num-seqs=16"]
    )
    assert command.option_texts() == {"--max-num-seqs": "16", "--enforce-eager": "(set)", "--x": ""}


def test_a_flag_keeps_all_its_values_and_a_negative_number_is_a_value() -> None:
    command = LaunchCommand.parse(["vllm", "serve", "m", "--cpu-offload-params", "a", "b", "--seed", "-1"])
    assert command.option_texts() == {"--cpu-offload-params": "a b", "--seed": "-1"}
    assert command.positionals() == ("vllm", "serve", "m")


def test_positionals_are_the_program_then_words_after_a_joined_flag() -> None:
    command = LaunchCommand.parse(["python", "-m", "server", "--port=8000", "extra"])
    assert command.option_texts() == {"-m": "server", "--port": "8000"}
    assert command.positionals() == ("python", "extra")
    assert LaunchCommand.parse([]).positionals() == ()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["vllm", "serve", "m", "--dtype", "float32"], {"--dtype": "float32", "(command)": "vllm serve m"}),
        (["--only-a-flag"], {"--only-a-flag": "(set)"}),
    ],
)
def test_the_experiment_page_reads_argv_through_the_launch_command(argv, expected) -> None:
    assert options_of(argv) == expected
