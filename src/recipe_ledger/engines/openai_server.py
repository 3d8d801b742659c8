"""``openai``: any OpenAI-compatible server, launched by the arm's own command.

For the servers the tool has no module for (llama.cpp's ``llama-server``, TGI, ``trtllm-serve``,
a user's own): an arm writes its command (``argv:``) and the tool adds ``--host``/``--port``.
Readiness is ``GET /v1/models`` answering 200 (the launch's health path) and then one real
completion (``openai_api``): a server that lists models but completes nothing fails as
``bad-output``. The tool knows none of its flags, so it swaps in no program, empties no prefix
cache and adds no metrics switch; /metrics is still read around each point, and a server that
exposes vLLM's counter names (vLLM forks, servers that copied them) gives their metrics, which the
plan says are conditional.

What a request's ``model`` must say is the server's business: the arm's ``--served-model-name``
(or llama.cpp's ``--alias``), else the value of its model flag (``--model``, ``--model-path``,
``--model-id``, ``-m``), else ``model``.
"""

from __future__ import annotations

from types import MappingProxyType

from recipe_ledger.engines import openai_api, vllm
from recipe_ledger.engines.base import Command, Engine, ForeignClient, Samples, ServerCommand
from recipe_ledger.errors import InputError

MODEL_FLAGS = ("--model", "--model-path", "--model-id", "-m")
NAME_FLAGS = ("--served-model-name", "--alias")
# Backends of each client that post to the OpenAI endpoints (not vLLM's or SGLang's own).
OPENAI_CLIENTS = MappingProxyType(
    {
        "vllm_bench_serve": ForeignClient("openai-chat", frozenset({"openai", "openai-chat"})),
        "sglang_bench_serving": ForeignClient(
            "vllm-chat", frozenset({"vllm", "vllm-chat", "sglang-oai", "sglang-oai-chat"})
        ),
    }
)


def first_of(command: ServerCommand, flags: tuple[str, ...]) -> str | None:
    for flag in flags:
        value = command.first_value(flag)
        if value is not None:
            return value
    return None


class OpenAIServerEngine(Engine):
    name = "openai"
    health_path = openai_api.MODELS_PATH
    program_label = "the server's program"
    setup_hint = "install the server, or write the arm's argv with the program's full path"
    foreign_clients = OPENAI_CLIENTS
    counter_metric_names = vllm.VllmEngine.counter_metric_names
    counters_optional = True

    def model_of(self, command: ServerCommand) -> str | None:
        return first_of(command, MODEL_FLAGS)

    def served_model(self, command: ServerCommand) -> str:
        return first_of(command, NAME_FLAGS) or self.model_of(command) or "model"

    def with_model(self, command: Command, model_dir: str) -> Command:
        for flag in MODEL_FLAGS:
            if command.has(flag):
                return command.with_value(flag, model_dir)
        raise InputError(
            f"engine {self.name!r}: the command names its model with none of {', '.join(MODEL_FLAGS)}, "
            "so model_path has nowhere to go",
            hint="write the model into the arm's argv, or name it with --model",
        )

    def readiness_problem(self, base_url: str, timeout_s: float) -> str | None:
        ids, problem = openai_api.served_model_ids(base_url, timeout_s)
        if problem:
            return problem
        if not ids:
            return f"GET {base_url}{openai_api.MODELS_PATH} lists no model"
        return openai_api.completion_problem(base_url, ids[0], timeout_s)

    def counter_metrics(self, before: Samples, after: Samples) -> dict[str, float]:
        # vLLM's names, when the server has them; none of them, nothing (never a failure).
        return vllm.counter_metrics(before, after)


ENGINE = OpenAIServerEngine()
