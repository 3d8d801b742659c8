"""Fair cross-engine comparisons: one client measures both arms of every bar.

A bar compares the control's numbers with a candidate's. When the two arms run different engines
(vLLM against SGLang), the numbers are only comparable when the same benchmark client produced
both: ``vllm bench serve`` and ``sglang.bench_serving`` count time to first token, inter-token
latency and "output throughput" differently enough to move a bar by itself. Today an instrument
is declared per experiment and runs against every arm, so the client is the same by
construction; what can still go wrong is an instrument that cannot speak to one arm's engine (and
would then fail mid-run, or measure an error page). This module says so before anything is
launched. Pure: it reads the experiment and nothing else.

How each client reaches the other engine:
- ``vllm bench serve --backend openai --endpoint /v1/completions`` (or ``openai-chat`` with
  ``/v1/chat/completions``) against SGLang: SGLang serves the OpenAI API on the same port.
- ``python -m sglang.bench_serving --backend vllm`` (or ``sglang-oai``, ``vllm-chat``,
  ``sglang-oai-chat``) against vLLM: those backends post to ``/v1/completions`` or
  ``/v1/chat/completions``; the default ``sglang`` backend posts to SGLang's native ``/generate``,
  which vLLM does not have.
- ``command`` instruments: one script for every arm; the script's author answers for the rest.

Which backends of a client speak an engine's API is the engine's to say
(``recipe_ledger.engines``: ``Engine.foreign_clients``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recipe_ledger import engines, instruments, metrics
from recipe_ledger.errors import InputError
from recipe_ledger.experiment.spec import Bar, Experiment, Instrument, QualityBar

# The endpoint an OpenAI backend must post to: vLLM's default --endpoint is /v1/completions, and
# an endpoint only one engine serves (/generate, /inference/v1/generate) would fail on the other.
_OPENAI_ENDPOINTS = frozenset({"/v1/completions", "/v1/chat/completions"})


def client_of(instrument: Instrument) -> str:
    """The benchmark client an instrument runs, e.g. "vllm bench serve" (its kind's, registered)."""
    return instruments.get(instrument.kind).client


def why_cannot_measure(instrument: Instrument, engine: str) -> str | None:
    """None when ``instrument`` can measure a server of ``engine``; else why not, with the fix."""
    client = engines.get(engine).foreign_clients.get(instrument.kind)
    if client is None:
        return None  # the engine's own client, or one that measures any server
    options: Mapping[str, Any] = instrument.options
    backend = str(options.get("backend", client.default_backend))
    if backend not in client.backends:
        return (
            f"{client_of(instrument)} with backend {backend!r} cannot talk to {engine}; "
            f"set options.backend to one of {sorted(client.backends)}"
        )
    endpoint = options.get("endpoint")
    if endpoint is not None and str(endpoint) not in _OPENAI_ENDPOINTS:
        return (
            f"{client_of(instrument)} posts to {endpoint}, which {engine} does not serve; "
            f"set options.endpoint to one of {sorted(_OPENAI_ENDPOINTS)}"
        )
    return None


def bar_label(bar: Bar | QualityBar) -> str:
    return f"{bar.metric}@{bar.point}"


def clients_by_bar(experiment: Experiment, versions: Mapping[str, str] | None = None) -> dict[str, str]:
    """For each bar (``metric@point``), the one client that measured every arm it compares, with
    its version when ``versions`` (instrument name -> version) knows it:
    ``{"output_tps_total@4": "vllm bench serve 0.32.0 (instrument bench)"}``."""
    out: dict[str, str] = {}
    for bar in experiment.bars:
        instrument = experiment.instrument_of(bar)
        version = (versions or {}).get(instrument.name, "")
        # A command instrument's version already names it ("command:<template hash>").
        client = (
            version if version.startswith(instrument.kind) else f"{client_of(instrument)} {version}".strip()
        )
        out[bar_label(bar)] = f"{client} (instrument {instrument.name})"
    return out


def check_one_client_per_bar(experiment: Experiment) -> None:
    """Refuse (InputError, exit 2) an experiment where a bar's client cannot measure one of the
    arms it compares: across engines, the bar would otherwise compare numbers from two different
    clients (or one number with an error).

    Experiments whose arms all run vLLM with vllm_bench_serve pass untouched, as before engines
    became an axis; arms with engine "none" (stand-in servers, studies) take every client.
    """
    arm_engines = {name: experiment.engine_of(name) for name in experiment.arm_names}
    for bar in experiment.bars:
        instrument = experiment.instrument_of(bar)
        for arm, engine in arm_engines.items():
            reason = why_cannot_measure(instrument, engine)
            if reason:
                raise InputError(
                    f"bar {bar_label(bar)}: instrument {instrument.name!r} cannot measure arm {arm!r} "
                    f"({engine}), so the bar would not compare one client's numbers: {reason}",
                    where=f"instrument {instrument.name}",
                    hint="one client for every arm: vllm_bench_serve with backend openai against "
                    "SGLang, or sglang_bench_serving with backend vllm against vLLM",
                )


# ------------------------------------------------------------------------------ server counters


def counters_not_given(engine_name: str) -> tuple[str, ...]:
    """The server-counter metrics an engine's /metrics cannot give, in the table's order."""
    given = engines.get(engine_name).counter_metric_names
    return tuple(name for name in metrics.SERVER_COUNTER_METRICS if name not in given)


def counter_notes(experiment: Experiment) -> list[str]:
    """One plan line per engine of the experiment whose /metrics cannot give every server counter
    (or gives them only when the server happens to expose vLLM's names): what stays unmeasured is
    said before the run, not left as an empty column after it."""
    notes = []
    for name in sorted(experiment.engines):
        engine = engines.get(name)
        missing = counters_not_given(name)
        arms = [arm for arm in experiment.arm_names if experiment.engine_of(arm) == name]
        if engine.counters_optional:
            notes.append(
                f"engine {name} (arms {', '.join(arms)}): /metrics is read if the server has one; "
                f"{', '.join(sorted(engine.counter_metric_names))} only when it exposes vLLM's counter names"
            )
        elif missing:
            notes.append(
                f"engine {name} (arms {', '.join(arms)}) has no /metrics counters for "
                f"{', '.join(missing)}: those metrics are not measured on its arms"
            )
    return notes


def check_bars_have_counters(experiment: Experiment) -> None:
    """Refuse (InputError, exit 2) a bar on a server-counter metric that an arm's engine cannot
    give at all: the bar could never be decided."""
    for bar in experiment.bars:
        for arm in experiment.arm_names:
            engine = experiment.engine_of(arm)
            if engines.get(engine).stand_in or bar.metric not in counters_not_given(engine):
                continue
            raise InputError(
                f"bar {bar_label(bar)}: {bar.metric} comes from the server's /metrics counters, which "
                f"arm {arm!r} ({engine}) does not have",
                where=f"bar {bar_label(bar)}",
                hint="bar on a client metric (output_tps_total, ttft_ms_p50...) or serve that arm "
                "with an engine that counts it (vllm)",
            )
