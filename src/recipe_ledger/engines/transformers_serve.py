"""``transformers``: Hugging Face ``transformers serve MODEL ...``, an OpenAI-compatible server.

The generic OpenAI server (``openai_server``) with what the tool knows of this one: the model is the
positional word after ``serve`` (the server loads it at start and answers every request with it),
the program comes from its own venv (``.venv-tserve``: transformers 5.17, the version on the lent
GPU box, with its serving extras; ``./dev serve-setup``) or ``$RECIPE_LEDGER_TRANSFORMERS``, and
it has no /metrics: the plan names every server counter it cannot give. Its CLI is typer's (click's
words for a rejected flag: ``launch.failures`` knows them). Clients reach it by chat completions.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import MappingProxyType

from recipe_ledger.engines.base import Command, ForeignClient, ServerCommand
from recipe_ledger.engines.openai_server import OpenAIServerEngine

PROGRAM = "transformers"
SERVE = "serve"
VENV = ".venv-tserve"


def find_transformers_bin(repo: Path) -> str:
    """``$RECIPE_LEDGER_TRANSFORMERS``, else the project's venv's CLI, else PATH's."""
    override = os.environ.get("RECIPE_LEDGER_TRANSFORMERS")
    if override:
        return override
    local = repo / VENV / "bin" / PROGRAM
    if local.is_file():
        return str(local)
    return shutil.which(PROGRAM) or PROGRAM


def model_position(command: ServerCommand) -> int | None:
    """Where the model word is: right after ``serve`` (``transformers serve MODEL``, also as
    ``python -m transformers.cli.transformers serve MODEL``), when it is not a flag."""
    words = command.render()
    for index, word in enumerate(words[:4]):
        if word == SERVE:
            model = command.word(index + 1)
            return index + 1 if model is not None and not model.startswith("-") else None
    return None


class TransformersServeEngine(OpenAIServerEngine):
    name = "transformers"
    program_label = "transformers serve (its venv)"
    setup_hint = f"./dev serve-setup  # builds {VENV}"
    # It serves /v1/chat/completions and /v1/responses, no legacy /v1/completions.
    foreign_clients = MappingProxyType(
        {
            "vllm_bench_serve": ForeignClient("openai-chat", frozenset({"openai-chat"})),
            "sglang_bench_serving": ForeignClient("vllm-chat", frozenset({"vllm-chat", "sglang-oai-chat"})),
        }
    )
    counter_metric_names = frozenset()  # no /metrics
    counters_optional = False

    def model_of(self, command: ServerCommand) -> str | None:
        position = model_position(command)
        return command.word(position) if position is not None else None

    def served_model(self, command: ServerCommand) -> str:
        return self.model_of(command) or "model"

    def with_model(self, command: Command, model_dir: str) -> Command:
        position = model_position(command)
        if position is None:
            return super().with_model(command, model_dir)
        return command.with_word(position, model_dir)

    def with_local_program(self, command: Command, repo: Path) -> Command:
        if command.program[:1] == (PROGRAM,):
            return command.with_word(0, find_transformers_bin(repo))
        return command


ENGINE = TransformersServeEngine()
