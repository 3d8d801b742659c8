"""The metric table: every normalized metric's name, unit, direction, label and format.

Instruments map their tools' output into these names (``ttft_ms_p50``, ``output_tps_total``...);
everything that shows, compares or indexes a number asks this module what it is: the runner's
summary, the verdict's default direction in a reproduction, the tables, the site, MLflow.

A metric the table does not know (a study script names its own, e.g. ``moe_step_ms_p90_b8``) is
still described, from its name alone, by ``lookup``'s documented fallback:

- a ``_ms`` part (``*_ms``, ``*_ms_*``, ``*_ms<digit>``): milliseconds, lower is better;
- a ``_gbps`` part: GB/s, higher is better;
- a ``_tps`` part: tokens/s, higher is better;
- a ``_rps`` part: requests/s, higher is better;
- a name ending ``_accuracy`` (one lm_eval task's, ``rl_arith_accuracy``): a share, higher is better;
- anything else: no unit and **no direction claim** (``direction is None``); a caller that must
  compare such a metric has to be told the direction (an experiment's bar does that).

Engines (vLLM and SGLang) store a metric under the same name when it means the same thing;
``Metric.sources`` records where each engine's number comes from (``{"vllm": ..., "sglang": ...}``:
its own client's result and its own server's counters), so that the claim "same name, same
meaning" is written down next to the name rather than spread over the parsers. A metric one engine
cannot give has no source for it (SGLang counts no proposed draft tokens: no ``spec_accept_rate``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal

Direction = Literal["higher", "lower"]


@dataclass(frozen=True)
class Metric:
    """One normalized metric. ``decimals`` is how many digits after the point a person needs."""

    name: str
    unit: str
    direction: Direction | None
    label: str
    decimals: int = 2
    description: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)  # engine -> where its value comes from
    known: bool = True  # False: described by the name-based fallback, not by the table

    def format(self, value: float | None) -> str:
        """``value`` with its unit, e.g. ``137.32 tok/s``; an empty string for no value."""
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return ""
        text = f"{value:,.{self.decimals}f}"
        return f"{text} {self.unit}" if self.unit else text


# -- the table ---------------------------------------------------------------------------------

_VLLM_BENCH = "vllm bench serve result JSON"
_VLLM_METRICS = "vllm /metrics counters, difference over the point"
_SGLANG_BENCH = "sglang.bench_serving result line"
_SGLANG_METRICS = "sglang /metrics counters (--enable-metrics), difference over the point"
_LATENCY_STATS = (("p50", "median"), ("p90", "90th percentile"), ("p99", "99th percentile"), ("mean", "mean"))
_LATENCIES = (
    ("ttft", "time to first token"),
    ("tpot", "time per output token"),
    ("itl", "inter-token latency"),
    ("e2el", "end-to-end request latency"),
)


def _latency_metrics() -> list[Metric]:
    vllm_stat = {"p50": "median", "p90": "p90", "p99": "p99", "mean": "mean"}
    sglang_lat = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e_latency"}
    return [
        Metric(
            name=f"{lat}_ms_{stat}",
            unit="ms",
            direction="lower",
            label=f"{lat.upper()} {stat}",
            decimals=2,
            description=f"{what}, {stat_text} over the requests of one point",
            sources={
                "vllm": f"{_VLLM_BENCH}: {vllm_stat[stat]}_{lat}_ms",
                "sglang": f"{_SGLANG_BENCH}: {vllm_stat[stat]}_{sglang_lat[lat]}_ms",
            },
        )
        for lat, what in _LATENCIES
        for stat, stat_text in _LATENCY_STATS
    ]


def _bench(
    name: str,
    unit: str,
    direction: Direction | None,
    label: str,
    decimals: int,
    description: str,
    vllm_key: str,
    sglang_key: str,
) -> Metric:
    sources = {"vllm": f"{_VLLM_BENCH}: {vllm_key}", "sglang": f"{_SGLANG_BENCH}: {sglang_key}"}
    return Metric(name, unit, direction, label, decimals, description, sources)


def _server(
    name: str, unit: str, label: str, description: str, counters: str, sglang: str | None = None
) -> Metric:
    sources = {"vllm": f"{_VLLM_METRICS}: {counters}"}
    if sglang:
        sources["sglang"] = sglang
    return Metric(name, unit, "higher", label, 3, description, sources)


def _study(name: str, label: str, description: str) -> Metric:
    return Metric(
        name, "GB/s", "higher", label, 1, description, {"none": "scripts/expert_placement_bench.py"}
    )


def _routing_metrics() -> list[Metric]:
    """What scripts/routing_probe.py reports (recipe_ledger.routing): skew has no better direction."""
    source = {"sglang": "expert-distribution recorder (stat) via scripts/routing_probe.py"}
    shares = [
        Metric(
            f"routing_hit_share_top{pct}",
            "share",
            None,
            f"hits on the top {pct}% of experts",
            3,
            f"share of routed hits on the hottest {pct}% of each layer's experts, mean over layers",
            source,
        )
        for pct in (25, 50, 73)
    ]
    windows = [
        Metric(
            f"routing_window_multiplier_k{k}",
            "x",
            None,
            f"experts per {k}-token window",
            2,
            f"unique experts {k} consecutive decode tokens select, over one token's top-k",
            source,
        )
        for k in (2, 4, 5, 8)
    ]
    spread = [
        Metric(
            "routing_gini",
            "index",
            None,
            "routing Gini",
            3,
            "Gini of hits over experts, mean over layers",
            source,
        ),
        Metric(
            "routing_entropy",
            "index",
            None,
            "routing entropy",
            3,
            "entropy / log(experts), mean over layers",
            source,
        ),
    ]
    return [*shares, *windows, *spread]


def _profile_metrics() -> list[Metric]:
    """What scripts/profile_probe.py reports (recipe_ledger.profile_summary): where a profiled
    window's time went, and what profiling cost."""
    source = {
        "vllm": "torch profiler trace (--profiler-config, /start_profile, /stop_profile) "
        "via scripts/profile_probe.py",
        "sglang": "torch profiler trace (/start_profile, /stop_profile) via scripts/profile_probe.py",
    }
    shares = [
        Metric(
            f"profile_share_{category}",
            "share",
            None,
            f"time share: {category}",
            3,
            f"share of the profiled window the engine's busiest thread spent in {category}"
            + (" (no op running)" if category == "idle" else " ops (self time)"),
            source,
        )
        for category in ("attention", "moe", "gemm", "communication", "sampling", "other", "idle")
    ]
    costs = [
        Metric("profile_window_s", "s", None, "profiled window", 2, "length of the profiled window", source),
        Metric(
            "profile_overhead",
            "x",
            "lower",
            "profiling overhead",
            2,
            "profiled wall time / unprofiled",
            source,
        ),
        Metric("profile_flush_s", "s", "lower", "trace flush time", 1, "time /stop_profile took", source),
        Metric(
            "profile_trace_mb", "MB", "lower", "trace size", 1, "size of the trace the engine wrote", source
        ),
    ]
    return [*shares, *costs]


def _probe_metrics() -> list[Metric]:
    """What the functional probes report (``instruments.probes``): how many passed, of how many.
    Which probe passed is a per-item outcome (``Measurement.items``), not a metric of its own."""
    answers = "probes instrument: /v1/chat/completions answers, judged per probe"
    source = {"vllm": answers, "sglang": answers}
    return [
        Metric(
            "probes_passed_rate",
            "share",
            "higher",
            "probes passed",
            3,
            "probes passed / probes sent (a tool call parsed, a switch accepted, a small budget answered)",
            source,
        ),
        Metric("probes_total", "probes", None, "probes sent", 0, "probes sent in one measurement", source),
    ]


_ANSWERS_SOURCE = "greedy /v1/completions with logprobs and return_token_ids (instruments.agreement)"


def _answers(
    name: str, unit: str, direction: Direction | None, label: str, decimals: int, description: str
) -> Metric:
    """What the answer-agreement instrument reports (instruments.agreement): its answers against
    the reference's (the control's first launch at the point), and its answers on their own."""
    sources = {"vllm": _ANSWERS_SOURCE, "sglang": _ANSWERS_SOURCE}
    return Metric(name, unit, direction, label, decimals, description, sources)


_ANSWERS = [
    _answers(
        "answer_match_rate",
        "share",
        "higher",
        "answers matching the reference",
        3,
        "share of prompts whose generated token ids equal the reference's",
    ),
    _answers(
        "top1_agreement",
        "share",
        "higher",
        "top-1 agreement with the reference",
        3,
        "share of the reference's tokens up to and including the first divergence that this "
        "answer's greedy token reproduces, mean over prompts",
    ),
    _answers(
        "first_divergence_mean",
        "tokens",
        "higher",
        "first divergence",
        2,
        "tokens before the answer's ids first differ from the reference's, mean over prompts",
    ),
    _answers(
        "kl_per_token_mean",
        "nats",
        "lower",
        "KL per token vs the reference",
        4,
        "KL(reference || this) on the top-k log-probabilities, per token with a common prefix",
    ),
    _answers(
        "answers_prompts",
        "prompts",
        None,
        "prompts answered",
        0,
        "prompts the agreement instrument sent (a count, not a quality)",
    ),
    _answers(
        "answers_tokens_mean",
        "tokens",
        None,
        "answer length",
        2,
        "generated tokens per prompt, mean (an end-of-sequence token stops an answer early)",
    ),
    _answers(
        "answers_mean_logprob",
        "nats",
        None,
        "mean token log-probability",
        3,
        "mean log-probability of the generated tokens (the model's own confidence, not a quality)",
    ),
]

_EVAL_SOURCE = "lm-evaluation-harness per-sample scores over the task files (instruments.lm_eval)"


def _eval(name: str, direction: Direction | None, label: str, decimals: int, description: str) -> Metric:
    """What the task-accuracy instrument reports (instruments.lm_eval): lm-eval's per-document
    scores, every task's documents together. One task's own share is ``<task>_accuracy``, which
    ``lookup`` describes by its suffix (the tasks are the user's to name)."""
    unit = "documents" if name == "eval_items" else "share"
    sources = {"vllm": _EVAL_SOURCE, "sglang": _EVAL_SOURCE}
    return Metric(name, unit, direction, label, decimals, description, sources)


_EVAL = [
    _eval(
        "eval_accuracy",
        "higher",
        "task accuracy",
        3,
        "documents answered correctly / documents, over every task of the measurement",
    ),
    _eval(
        "eval_accuracy_low",
        None,
        "task accuracy, Wilson 95% low",
        3,
        "the low end of the accuracy's Wilson score interval (95%, two-sided) in one measurement",
    ),
    _eval(
        "eval_accuracy_high",
        None,
        "task accuracy, Wilson 95% high",
        3,
        "the high end of the accuracy's Wilson score interval (95%, two-sided) in one measurement",
    ),
    _eval("eval_items", None, "documents scored", 0, "task documents scored (a count, not a quality)"),
]

_ROUTING = _routing_metrics()
_PROFILE = _profile_metrics()

_TABLE: list[Metric] = [
    *_latency_metrics(),
    *_ROUTING,
    *_PROFILE,
    *_probe_metrics(),
    *_ANSWERS,
    *_EVAL,
    _bench(
        "output_tps_total",
        "tok/s",
        "higher",
        "output throughput",
        2,
        "generated tokens per second, all streams together",
        "output_throughput",
        "output_throughput",
    ),
    Metric(
        "output_tps_per_gpu",
        "tok/s/GPU",
        "higher",
        "output throughput per GPU",
        2,
        "output_tps_total over the GPUs the arm's command occupies (tensor x data x pipeline "
        "parallel sizes, Engine.gpus_used): InferenceX's tput_per_gpu",
        {
            "vllm": "the runner: output_tps_total / Engine.gpus_used(argv)",
            "sglang": "the runner: output_tps_total / Engine.gpus_used(argv)",
        },
    ),
    Metric(
        "total_tps_per_gpu",
        "tok/s/GPU",
        "higher",
        "total throughput per GPU",
        2,
        "total_tps over the GPUs the arm's command occupies (Engine.gpus_used)",
        {
            "vllm": "the runner: total_tps / Engine.gpus_used(argv)",
            "sglang": "the runner: total_tps / Engine.gpus_used(argv)",
        },
    ),
    _bench(
        "total_tps",
        "tok/s",
        "higher",
        "total throughput",
        2,
        "prompt and generated tokens per second, all streams together",
        "total_token_throughput",
        "total_throughput",
    ),
    _bench(
        "request_rps",
        "req/s",
        "higher",
        "request throughput",
        3,
        "completed requests per second",
        "request_throughput",
        "request_throughput",
    ),
    _bench(
        "completed",
        "requests",
        None,
        "completed requests",
        0,
        "requests that finished (a count, not a quality)",
        "completed",
        "completed",
    ),
    _bench(
        "failed",
        "requests",
        "lower",
        "failed requests",
        0,
        "requests that failed",
        "failed",
        "num_prompts - completed (it reports no failure count)",
    ),
    _bench(
        "duration_s",
        "s",
        None,
        "point duration",
        2,
        "wall time of one point (set by the number of prompts, not a quality)",
        "duration",
        "duration",
    ),
    Metric(
        "decode_tps_per_stream",
        "tok/s",
        "higher",
        "decode speed per stream",
        2,
        "1000 / tpot_ms_p50: the speed one user sees",
        {
            "vllm": f"{_VLLM_BENCH}: 1000 / median_tpot_ms",
            "sglang": f"{_SGLANG_BENCH}: 1000 / median_tpot_ms",
        },
    ),
    _server(
        "spec_accept_len",
        "tokens",
        "speculative acceptance length",
        "tokens per verification step, the bonus token included",
        "1 + accepted_tokens / drafts",
        f"{_SGLANG_METRICS}: generation_tokens / spec_verify_calls; else /server_info"
        " internal_states[0].avg_spec_accept_length (since launch); sglang.bench_serving's accept_length",
    ),
    _server(
        "spec_accept_rate",
        "ratio",
        "speculative acceptance rate",
        "accepted draft tokens / proposed draft tokens",
        "accepted_tokens / draft_tokens",
    ),
    _server(
        "prefix_cache_hit_rate",
        "ratio",
        "prefix cache hit rate",
        "prompt tokens served from the prefix cache / prompt tokens queried",
        "prefix_cache_hits / prefix_cache_queries",
        f"{_SGLANG_METRICS}: cached_tokens / prompt_tokens",
    ),
    _server(
        "tokens_per_step",
        "tokens",
        "tokens per engine step",
        "tokens the engine processed per scheduler step",
        "step tokens / steps",
    ),
    _study("hbm_read_gbps", "HBM read bandwidth", "device memory read bandwidth"),
    _study("uva_read_gbps", "UVA read bandwidth", "host memory read by the GPU over the link (UVA)"),
    _study("h2d_memcpy_gbps", "host-to-device copy bandwidth", "cudaMemcpy host to device"),
]

METRICS: Mapping[str, Metric] = MappingProxyType({m.name: m for m in _TABLE})
# The metrics only a server's own /metrics counters give (no client measures them): an engine says
# which of them it can give (``Engine.counter_metric_names``), and the plan names the rest.
SERVER_COUNTER_METRICS: tuple[str, ...] = (
    "prefix_cache_hit_rate",
    "spec_accept_len",
    "spec_accept_rate",
    "tokens_per_step",
)

# What a ``result`` entry keeps as medians per arm and point (``<arm>.c<point>.<metric>``): small,
# table-friendly. Order is irrelevant (the summary is sorted by key).
SUMMARY_METRICS: tuple[str, ...] = (
    "output_tps_total",
    "ttft_ms_p50",
    "tpot_ms_p50",
    "itl_ms_p50",
    "decode_tps_per_stream",
    "request_rps",
    "hbm_read_gbps",
    "uva_read_gbps",
    "h2d_memcpy_gbps",
    *(m.name for m in _ROUTING),
    *(m.name for m in _PROFILE),
)

# The metrics an experiment page plots against concurrency, in this order, when the result has them.
CHART_METRICS: tuple[str, ...] = (
    "output_tps_total",
    "request_rps",
    "decode_tps_per_stream",
    "ttft_ms_p50",
    "tpot_ms_p50",
    "server.spec_accept_len",  # a speculative-decoding sweep's acceptance length, per point
)

SERVER_PREFIX = "server."

# -- unknown names -----------------------------------------------------------------------------

# (pattern on the name, unit, direction): the first match describes a metric the table lacks.
_FALLBACK: tuple[tuple[re.Pattern[str], str, Direction | None], ...] = (
    (re.compile(r"(^|_)ms($|_|\d)"), "ms", "lower"),
    (re.compile(r"(^|_)gbps($|_|\d)"), "GB/s", "higher"),
    (re.compile(r"(^|_)tps($|_|\d)"), "tok/s", "higher"),
    (re.compile(r"(^|_)rps($|_|\d)"), "req/s", "higher"),
    (re.compile(r"_accuracy$"), "share", "higher"),  # one lm_eval task's accuracy: <task>_accuracy
)


INSTRUMENT_SEPARATOR = "/"  # MLflow accepts it in metric names; instrument names are slugs without it


def instrument_metric(instrument: str, metric: str) -> str:
    """``<instrument>/<metric>``: the metric as one of an experiment's several instruments measured
    it. A replay and a random-prompt sweep both report ``output_tps_total``; one median over both
    would be a number neither measured."""
    return f"{instrument}{INSTRUMENT_SEPARATOR}{metric}"


def split_instrument(name: str) -> tuple[str | None, str]:
    """``(instrument, metric)`` of an ``<instrument>/<metric>`` name; ``(None, name)`` otherwise."""
    instrument, separator, metric = name.partition(INSTRUMENT_SEPARATOR)
    return (instrument, metric) if separator and instrument and metric else (None, name)


def lookup(name: str) -> Metric:
    """The metric called ``name``; for a name the table lacks, what its name says (see the module
    docstring), marked ``known=False``. Never raises: every number can be shown."""
    if name in METRICS:
        return METRICS[name]
    instrument, base_name = split_instrument(name)
    if instrument is not None:  # the base metric, labelled with the instrument that measured it
        base = lookup(base_name)
        return replace(base, name=name, label=f"{base.label} ({instrument})")
    if name.startswith(SERVER_PREFIX) and name[len(SERVER_PREFIX) :] in METRICS:
        # The runner keeps the server's own counters apart ("server.spec_accept_len").
        base = METRICS[name[len(SERVER_PREFIX) :]]
        return Metric(
            name, base.unit, base.direction, base.label, base.decimals, base.description, base.sources
        )
    for pattern, unit, direction in _FALLBACK:
        if pattern.search(name):
            return Metric(name, unit, direction, name, 3 if unit != "ms" else 2, known=False)
    return Metric(name, "", None, name, 3, known=False)


def unit(name: str) -> str:
    return lookup(name).unit


def direction(name: str) -> Direction | None:
    """ "higher" or "lower" is better, or None when nothing is known about the metric."""
    return lookup(name).direction


def format_value(name: str, value: float | None) -> str:
    """``value`` of metric ``name`` with its unit and the metric's precision (``137.32 tok/s``)."""
    return lookup(name).format(value)


def format_effect(effect: float | None, decimals: int = 1) -> str:
    """A relative effect as a signed percentage (``0.031`` -> ``+3.1%``); empty for no effect."""
    if effect is None or not math.isfinite(effect):
        return ""
    return f"{effect * 100:+.{decimals}f}%"


def headline(names: Iterable[str], preferred: Iterable[str] = CHART_METRICS, fallback: int = 4) -> list[str]:
    """Of ``names``, the preferred ones in preferred order (an ``<instrument>/<metric>`` name by its
    metric); with none of those, the first ``fallback`` names in sorted order (a study's own metrics)."""
    present = sorted(set(names))
    chosen = [m for wanted in preferred for m in present if split_instrument(m)[1] == wanted]
    return chosen or present[:fallback]


_SUMMARY_KEY = re.compile(r"^(?P<arm>[^.]+)\.c(?P<point>\d+)\.(?P<metric>.+)$")


def summary_key(arm: str, point: int, metric: str) -> str:
    """A result entry's summary metric name: ``<arm>.c<point>.<metric>``."""
    return f"{arm}.c{point}.{metric}"


def parse_summary_key(key: str) -> tuple[str, int, str] | None:
    """``(arm, point, metric)`` of a ``<arm>.c<point>.<metric>`` name, or None for other names."""
    match = _SUMMARY_KEY.match(key)
    return (match["arm"], int(match["point"]), match["metric"]) if match else None


PER_GPU = MappingProxyType({"output_tps_total": "output_tps_per_gpu", "total_tps": "total_tps_per_gpu"})


def per_gpu(values: Mapping[str, float], gpus: int) -> dict[str, float]:
    """The per-GPU throughputs of a measurement that reports throughput, for ``gpus`` GPUs."""
    return {PER_GPU[name]: values[name] / gpus for name in PER_GPU if name in values and gpus > 0}
