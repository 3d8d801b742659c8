"""One measurement's greedy answers against the reference's, prompt by prompt (no I/O).

An answer is what one temperature-0 completion returned: the generated token ids, each position's
log-probability, and each position's top-k log-probabilities keyed by token *text* (the servers'
display keys: two ids that decode alike share one key, so ids alone decide identity).

Per prompt, with ``R`` the reference's ids and ``A`` this answer's:

- ``first_divergence`` ``d``: the length of the common prefix of ``R`` and ``A`` (the first position
  where the ids differ, or where one answer has stopped and the other has not); ``len(R)`` when the
  answers are identical.
- ``match``: 1 when ``A == R`` (same ids, same length), else 0.
- ``top1``: the share of the reference's positions up to and including the first divergence at which
  this answer's greedy token is the reference's: ``d / (d + 1)`` when ``d < len(R)``, 1 when the whole
  reference was reproduced (``d == len(R)``; an answer that goes on past it still has ``match`` 0).
  Later positions are not compared: their prefixes differ, so their tokens answer another question.
- ``kl``: KL(reference || this) per position, over the positions whose prefix is still common: every
  position up to and including ``d`` that both answers have (at ``d`` both saw the same prefix and
  chose differently: the divergence's own position is where the distributions say most). It is
  computed on the top-k lists only (``top_k_kl``): an approximation, see there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# vLLM clamps log-probabilities at -9999.0; JSON has no -inf, and exp() of the clamp is 0 anyway.
LOGPROB_FLOOR = -9999.0


@dataclass(frozen=True)
class Answer:
    """One prompt's greedy completion, as the comparison reads it."""

    token_ids: tuple[int, ...]
    token_logprobs: tuple[float, ...]
    top_logprobs: tuple[Mapping[str, float], ...]  # one per position; empty where the server gave none


@dataclass(frozen=True)
class PromptComparison:
    """One prompt of this measurement against the same prompt of the reference."""

    match: bool
    first_divergence: int
    top1: float
    kl_sum: float  # nats, summed over the compared positions
    kl_positions: int

    def as_json(self) -> dict[str, float | int | bool]:
        return {
            "match": self.match,
            "first_divergence": self.first_divergence,
            "top1": self.top1,
            "kl_sum": self.kl_sum,
            "kl_positions": self.kl_positions,
        }


def first_divergence(reference: Sequence[int], answer: Sequence[int]) -> int:
    """The length of the common prefix of two id sequences."""
    for position, (expected, got) in enumerate(zip(reference, answer, strict=False)):
        if expected != got:
            return position
    return min(len(reference), len(answer))


def top1_agreement(reference_length: int, divergence: int) -> float:
    """The share of the reference's positions up to and including the divergence that agree."""
    if divergence >= reference_length:
        return 1.0  # every reference position reproduced (an empty reference: nothing to disagree on)
    return divergence / (divergence + 1)


def top_k_kl(reference: Mapping[str, float], other: Mapping[str, float]) -> float:
    """KL(reference || other) in nats between two next-token distributions known by their top-k lists.

    The support is the union of the two key sets. A token missing from one side's list gets that
    side's smallest listed log-probability: not in its top-k, so at most that likely (an upper
    bound, which makes the KL of a token one side ranks low an underestimate). Each side is then
    renormalised over the union. The mass outside the union is left out: two servers that agree on
    the top-k and differ in the tail read as close."""
    keys = sorted(set(reference) | set(other))
    ref_logs = _log_distribution(reference, keys)
    other_logs = _log_distribution(other, keys)
    divergence = sum(math.exp(p) * (p - q) for p, q in zip(ref_logs, other_logs, strict=True))
    return max(0.0, divergence)  # renormalised sides: negative only by rounding


def _log_distribution(top: Mapping[str, float], keys: Sequence[str]) -> list[float]:
    floor = min(top.values())
    logs = [max(top.get(key, floor), LOGPROB_FLOOR) for key in keys]
    total = _logsumexp(logs)
    return [value - total for value in logs]


def _logsumexp(values: Sequence[float]) -> float:
    peak = max(values)
    return peak + math.log(sum(math.exp(value - peak) for value in values))


def compare(reference: Answer, answer: Answer) -> PromptComparison:
    """One prompt: the definitions in the module docstring."""
    divergence = first_divergence(reference.token_ids, answer.token_ids)
    common = min(divergence + 1, len(reference.token_ids), len(answer.token_ids))
    kls = [
        top_k_kl(reference.top_logprobs[i], answer.top_logprobs[i])
        for i in range(common)
        if reference.top_logprobs[i] and answer.top_logprobs[i]
    ]
    return PromptComparison(
        match=reference.token_ids == answer.token_ids,
        first_divergence=divergence,
        top1=top1_agreement(len(reference.token_ids), divergence),
        kl_sum=sum(kls),
        kl_positions=len(kls),
    )


def agreement_metrics(comparisons: Sequence[PromptComparison]) -> dict[str, float]:
    """The measurement's agreement numbers: means over prompts; the KL per compared token, pooled
    over every prompt's compared positions (a long common prefix weighs by its length)."""
    count = len(comparisons)
    positions = sum(c.kl_positions for c in comparisons)
    return {
        "answer_match_rate": sum(c.match for c in comparisons) / count,
        "top1_agreement": sum(c.top1 for c in comparisons) / count,
        "first_divergence_mean": sum(c.first_divergence for c in comparisons) / count,
        "kl_per_token_mean": sum(c.kl_sum for c in comparisons) / positions if positions else 0.0,
    }


def agreement_items(comparisons: Sequence[PromptComparison]) -> dict[str, dict[str, float]]:
    """Per-prompt outcomes of the item metrics, keyed by the prompt's index (as text)."""
    return {
        "answer_match_rate": {str(i): float(c.match) for i, c in enumerate(comparisons)},
        "top1_agreement": {str(i): c.top1 for i, c in enumerate(comparisons)},
    }


def self_agreement(answers: Sequence[Answer]) -> dict[str, float]:
    """The reference against itself: every answer matches, no divergence, no KL."""
    return agreement_metrics([compare(answer, answer) for answer in answers])


def answer_metrics(answers: Sequence[Answer]) -> dict[str, float]:
    """What a measurement says on its own: how many prompts, how long and how confident the answers."""
    tokens = [lp for answer in answers for lp in answer.token_logprobs]
    return {
        "answers_prompts": float(len(answers)),
        "answers_tokens_mean": len(tokens) / len(answers),
        "answers_mean_logprob": sum(tokens) / len(tokens) if tokens else 0.0,
    }
