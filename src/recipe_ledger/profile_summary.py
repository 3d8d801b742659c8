"""Where a profiled window's time goes, from a torch profiler trace: pure arithmetic, no I/O.

Input: the Chrome trace events an engine's torch profiler writes (vLLM's ``--profiler-config`` with
``/start_profile``/``/stop_profile``, SGLang's ``/start_profile``): complete events (``"ph": "X"``) with
``ts`` and ``dur`` in microseconds, on threads keyed by ``(pid, tid)``. Output: the share of the window
each category takes on the worker's forward thread:

- an event's category comes from its name (``category_of``): attention, moe (experts and routing),
  gemm, communication, sampling; a name that says none of these has no category of its own;
- exclusive (self) time: an event's duration minus its children's, so nested ops are counted once
  (a child sticking out of its parent is clipped to the parent's end);
- a child with no category inherits its nearest categorised ancestor's (``aten::add`` inside the
  attention layer is attention's time); with none, its time is ``other``;
- the forward thread is the one with the most busy time (the engine's model loop; the profiler's
  Python stack and the tokenizer threads are lighter), and ``idle`` is the window minus its busy time.

Shares sum to 1. This module imports nothing from the package, so scripts that run in an engine's own
venv can use it too (scripts/profile_probe.py does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

BUSY_CATEGORIES = ("attention", "moe", "gemm", "communication", "sampling", "other")
CATEGORIES = (*BUSY_CATEGORIES, "idle")

# Checked in this order, first match wins: an op named for MoE or a collective says more than one
# named for the matmul it runs ("fused_moe_gemm" is expert time, "all_reduce_mm" is communication).
NAME_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("moe", ("moe", "expert", "topk_softmax", "grouped_topk", "router")),
    (
        "communication",
        (
            "nccl",
            "all_reduce",
            "allreduce",
            "all_gather",
            "allgather",
            "reduce_scatter",
            "all_to_all",
            "alltoall",
            "c10d",
            "gloo",
        ),
    ),
    ("sampling", ("sampler", "sample", "top_k_top_p", "topk_topp", "argmax", "multinomial")),
    ("attention", ("attention", "attn", "scaled_dot_product", "sdpa", "flash_", "paged_", "mla")),
    ("gemm", ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "gemm", "onednn")),
)

# Python frames (``with_stack``) are the interpreter's call stack, not work: the engine loop's frame
# spans its waits on the input queue too. The profiler's own "Trace" span covers the whole window.
# Time is read from the ops and annotations only.
IGNORED_EVENT_CATEGORIES = frozenset({"python_function", "Trace"})

Thread = tuple[Any, Any]  # (pid, tid) as the trace spells them


def category_of(name: str) -> str | None:
    """The category an event's name says, or None when it says none."""
    lowered = name.lower()
    for category, needles in NAME_PATTERNS:
        if any(needle in lowered for needle in needles):
            return category
    return None


@dataclass(frozen=True)
class Span:
    """One complete event: when, how long (microseconds) and what."""

    start: float
    duration: float
    name: str

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclass(frozen=True)
class ProfileSummary:
    """Busy time per category on the forward thread, over a window; ``shares`` sum to 1."""

    thread: Thread | None
    window_us: float
    busy_us: Mapping[str, float] = field(default_factory=dict)

    @property
    def busy_total_us(self) -> float:
        return sum(self.busy_us.values())

    @property
    def shares(self) -> dict[str, float]:
        # A window shorter than the busy time (a caller's clock against the trace's) is stretched to it,
        # so idle is never negative and the shares still sum to 1.
        span = max(self.window_us, self.busy_total_us)
        if span <= 0:
            return {category: 0.0 for category in CATEGORIES}
        shares = {category: self.busy_us.get(category, 0.0) / span for category in BUSY_CATEGORIES}
        shares["idle"] = (span - self.busy_total_us) / span
        return shares


def trace_events(document: Any) -> list[dict]:
    """The event list of a parsed Chrome trace (an object with ``traceEvents``, or a bare list)."""
    events = document.get("traceEvents", []) if isinstance(document, dict) else document
    return [event for event in events or [] if isinstance(event, dict)]


def complete_spans(events: Iterable[Mapping[str, Any]]) -> dict[Thread, list[Span]]:
    """Complete events with a positive duration, grouped by thread; instants, counters, flows and
    metadata carry no time."""
    threads: dict[Thread, list[Span]] = {}
    for event in events:
        if event.get("ph") != "X" or event.get("cat") in IGNORED_EVENT_CATEGORIES:
            continue
        try:
            start, duration = float(event["ts"]), float(event.get("dur", 0))
        except (KeyError, TypeError, ValueError):
            continue
        if duration > 0:
            span = Span(start, duration, str(event.get("name", "")))
            threads.setdefault((event.get("pid"), event.get("tid")), []).append(span)
    return threads


def self_time_by_category(spans: Sequence[Span]) -> dict[str, float]:
    """Exclusive time per category on one thread, nesting read from the intervals."""
    ordered = sorted(spans, key=lambda s: (s.start, -s.duration))
    self_us = [0.0] * len(ordered)
    effective: list[str | None] = [None] * len(ordered)
    open_spans: list[tuple[int, float]] = []  # (index, end clipped to its parent)
    for index, span in enumerate(ordered):
        while open_spans and open_spans[-1][1] <= span.start:
            open_spans.pop()
        end = span.end
        parent_category = None
        if open_spans:
            parent, parent_end = open_spans[-1]
            end = min(end, parent_end)
            self_us[parent] -= end - span.start
            parent_category = effective[parent]
        self_us[index] += end - span.start
        effective[index] = category_of(span.name) or parent_category
        open_spans.append((index, end))
    totals: dict[str, float] = {}
    for index, time_us in enumerate(self_us):
        category = effective[index] or "other"
        totals[category] = totals.get(category, 0.0) + time_us
    return totals


def extent_us(threads: Mapping[Thread, Sequence[Span]]) -> float:
    """First start to last end over every thread: the window the trace covers."""
    spans = [span for thread in threads.values() for span in thread]
    if not spans:
        return 0.0
    return max(span.end for span in spans) - min(span.start for span in spans)


def profiler_span_us(events: Iterable[Mapping[str, Any]]) -> float | None:
    """The duration of the profiler's own span (torch writes one "Trace" event from start to stop)."""
    spans = [
        float(event.get("dur", 0))
        for event in events
        if event.get("ph") == "X"
        and event.get("cat") == "Trace"
        and isinstance(event.get("dur"), int | float)
    ]
    return max(spans) if spans else None


def summarize(events: Iterable[Mapping[str, Any]], window_us: float | None = None) -> ProfileSummary:
    """Time shares of the busiest thread over ``window_us`` (default: the profiler's span from start to
    stop, else the extent of the trace's events)."""
    events = list(events)
    threads = complete_spans(events)
    window = window_us if window_us is not None else profiler_span_us(events) or extent_us(threads)
    best: tuple[Thread | None, dict[str, float]] = (None, {})
    for thread, spans in threads.items():
        busy = self_time_by_category(spans)
        if sum(busy.values()) > sum(best[1].values()):
            best = (thread, busy)
    return ProfileSummary(best[0], window, best[1])


def profile_metrics(summary: ProfileSummary) -> dict[str, float]:
    """The metrics a profile measurement records: one share per category and the window in seconds."""
    metrics = {f"profile_share_{category}": share for category, share in summary.shares.items()}
    metrics["profile_window_s"] = summary.window_us / 1e6
    return metrics
