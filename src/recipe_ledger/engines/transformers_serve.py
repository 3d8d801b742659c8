"""``transformers``: Hugging Face ``transformers serve MODEL ...``, an OpenAI-compatible server.

The generic OpenAI server (``openai_server``) with what the tool knows of this one: the model is the
positional word after ``serve`` (the server loads it at start and answers every request with it;
a request naming another model is refused, so clients send that word as written); readiness is
``/health`` then one completion (its ``/v1/models`` lists the hub cache instead, and fails offline),
the program comes from its own venv (``.venv-tserve``: transformers 5.17, the version on the lent
GPU box, with its serving extras; ``./dev serve-setup``) or ``$RECIPE_LEDGER_TRANSFORMERS``, and
it has no /metrics: the plan names every server counter it cannot give. Its CLI is typer's (click's
words for a rejected flag: ``launch.failures`` knows them). It serves /v1/chat/completions and
/v1/completions (and /v1/responses), but refuses (422) any request field outside OpenAI's schema
(``openai_schema_only``): a client that adds its engine's own fields, as vllm bench serve does,
cannot measure it, and its kind refuses the arm before any launch.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from recipe_ledger.engines import openai_api
from recipe_ledger.engines.base import Command, Samples, ServerCommand
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
    if SERVE not in words[:4]:
        return None
    position = words.index(SERVE) + 1
    return position if position < len(words) and not words[position].startswith("-") else None


class TransformersServeEngine(OpenAIServerEngine):
    name = "transformers"
    # Its /v1/models lists the Hugging Face hub cache, not the model it serves, and answers 500
    # when there is no hub cache (an offline box: huggingface_hub's CacheNotFound). /health answers
    # 200 once the server (and its continuous-batching worker) is up.
    health_path = "/health"
    program_label = "transformers serve (its venv)"
    setup_hint = f"./dev serve-setup  # builds {VENV}"
    # 5.17's server (transformers/cli/serving/server.py) has no /metrics route.
    counter_metric_names = frozenset()
    counters_optional = False
    # Its handlers check every request's keys against OpenAI's params (``_validate_request``):
    # "Unexpected fields in the request" (422) for vLLM's ``repetition_penalty`` and ``ignore_eos``,
    # which vllm bench serve 0.32 sends on every random-dataset request (seen here on the tiny model).
    openai_schema_only = True

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

    def readiness_problem(self, base_url: str, timeout_s: float) -> str | None:
        # A request without ``model`` is served by the pinned one; naming any other is a 400.
        return openai_api.completion_problem(base_url, None, timeout_s)

    def counter_metrics(self, before: Samples, after: Samples) -> dict[str, float]:
        return {}  # no /metrics: nothing to read, whatever a scrape returned

    def with_local_program(self, command: Command, repo: Path) -> Command:
        if command.program[:1] == (PROGRAM,):
            return command.with_word(0, find_transformers_bin(repo))
        return command


ENGINE = TransformersServeEngine()
