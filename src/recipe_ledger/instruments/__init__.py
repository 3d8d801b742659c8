"""Benchmark instruments: one module per kind, each registering one ``InstrumentKind``, found by kind.

```
instrument = instruments.get(spec.kind)     # InputError naming the known kinds for an unknown one
instrument.client, instrument.check_before_launch(spec, repo, max_model_len)
instrument.measure(run)                     # run: a PointRun; -> Measurement (metrics, raw file hashed)
instrument.refusals(spec.options, server_side)
instruments.kinds()                         # the built-ins in the schema's order, then plugins by kind
```

Each instrument builds the argv of one measurement (one sweep point, one repeat), runs it, keeps
its raw output as a file (hashed), and turns it into metrics with normalized names and units
(``ttft_ms_p50``, ``output_tps_total``...). Adding an instrument is one file plus its
registration: a built-in is listed in ``BUILT_IN``; any other package declares an entry point in
the ``recipe_ledger.instruments`` group (``mine = my_package.mine:INSTRUMENT``) naming an
``InstrumentKind`` instance or subclass whose ``kind`` is the entry point's name.

Package map:
  base            InstrumentKind (what the registry holds), PointRun (the one argument of measure),
                  MeasureContext and Measurement, InstrumentError, running a client, hashing raw files
  vllm_bench      ``vllm bench serve`` (kind ``vllm_bench_serve``), one client process per point
  sglang_bench    ``sglang.bench_serving`` (kind ``sglang_bench_serving``), same names, either engine
  command         any script that prints JSON metrics (kind ``command``), for studies without a server;
                  its argv template's plain ``{name}`` fields are parsed and filled by ``template``
                  (never str.format: no format spec, conversion or attribute access)
  aiperf_replay   agent sessions replayed through ``aiperf profile`` (kind ``aiperf_replay``), with
                  its validity signals; replay_trace writes and reads its traces
  aiperf_datasets AIPerf's public datasets as its plugin registry names them, and where each must
                  lie for an offline run (refused before launch when missing)
  tail            sequential cache-busted requests (kind ``tail``), refused when the cache flattered it
  probes          functional probes over /v1/chat/completions (kind ``probes``): a forced tool call
                  parsed, reasoning efforts and chat_template_kwargs accepted, a small budget that
                  still answers; pass or fail per probe as the measurement's items
  agreement       greedy answers with log-probabilities over a fixed prompt set (kind ``agreement``),
                  compared prompt by prompt with the control's first launch: a quality instrument
                  (per-prompt items); agreement_compare holds the comparison (match, first
                  divergence, top-1 agreement, top-k KL), pure
  lm_eval         task accuracy through lm-evaluation-harness's CLI (kind ``lm_eval``) on local task
                  files (the shipped ``evals/tasks``, or a user's folder): a quality instrument, its
                  items a task's documents; lm_eval_tasks reads and checks task folders (one owner of
                  that format) before any launch
  openai_bench    the tool's own streamed OpenAI client (kind ``openai_bench``; its process is
                  openai_bench_client, standard library only): only the schema's fields, for strict
                  servers (``transformers serve``) and boxes without vLLM's or SGLang's client
  server_metrics  the server's Prometheus counters before and after a point, as differences, read
                  into the same names by the arm's engine (``recipe_ledger.engines``)
"""

from __future__ import annotations

import functools

from recipe_ledger import plugins
from recipe_ledger.instruments import (
    agreement,
    aiperf_replay,
    command,
    lm_eval,
    openai_bench,
    probes,
    sglang_bench,
    tail,
    vllm_bench,
)
from recipe_ledger.instruments.base import InstrumentKind

ENTRY_POINT_GROUP = "recipe_ledger.instruments"
# In the order the experiment schema lists them (and its error messages name them).
BUILT_IN: tuple[InstrumentKind, ...] = (
    vllm_bench.INSTRUMENT,
    sglang_bench.INSTRUMENT,
    command.INSTRUMENT,
    aiperf_replay.INSTRUMENT,
    tail.INSTRUMENT,
    probes.INSTRUMENT,
    agreement.INSTRUMENT,
    lm_eval.INSTRUMENT,
    openai_bench.INSTRUMENT,
)


def get(kind: str) -> InstrumentKind:
    """The instrument of ``kind``."""
    return plugins.pick(_registry(), kind, "instrument kind", "kinds")


def kinds() -> tuple[str, ...]:
    """Every registered kind, built-ins first."""
    return tuple(_registry())


def refresh() -> None:
    """Read the entry points again on next use (after installing a plugin, or in a test)."""
    _registry.cache_clear()


@functools.cache
def _registry() -> dict[str, InstrumentKind]:
    return plugins.load_registry(
        ENTRY_POINT_GROUP, BUILT_IN, InstrumentKind, lambda instrument: instrument.kind, "instrument"
    )
