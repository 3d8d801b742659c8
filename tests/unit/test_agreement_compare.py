"""The answer comparison (instruments.agreement_compare) on hand-built answers: identical answers,
one changed token, an answer that stops early or runs on, and the top-k KL's approximation."""

from __future__ import annotations

import math

import pytest

from recipe_ledger.instruments.agreement_compare import (
    Answer,
    agreement_items,
    agreement_metrics,
    answer_metrics,
    compare,
    first_divergence,
    self_agreement,
    top_k_kl,
)

# A position's top-2 when its greedy token is ``token`` and ``other`` the runner-up, 2.4 nats behind.
GAP = 2.4


def top(token: int, other: int) -> dict[str, float]:
    return {f"t{token}": -0.1, f"t{other}": -0.1 - GAP}


def answer(ids: list[int], swapped_at: int | None = None) -> Answer:
    """Greedy ids, each position's top-2 (the runner-up is id + 1); at ``swapped_at`` the top-2 of
    the other answer trade places (this answer took what was the runner-up there)."""
    tops = [top(t, t - 1) if i == swapped_at else top(t, t + 1) for i, t in enumerate(ids)]
    return Answer(tuple(ids), tuple(-0.1 for _ in ids), tuple(tops))


def swapped_kl() -> float:
    """KL between two renormalised top-2s that trade places, gap GAP: p = sigmoid(GAP), and the KL
    of (p, 1-p) against (1-p, p) is (2p - 1) * log(p / (1 - p)) = (2p - 1) * GAP."""
    p = 1 / (1 + math.exp(-GAP))
    return (2 * p - 1) * GAP


def test_identical_answers_match_agree_fully_and_have_no_kl():
    reference = answer([5, 9, 12, 40, 41, 7, 7, 3])
    result = compare(reference, answer([5, 9, 12, 40, 41, 7, 7, 3]))
    assert result.match and result.first_divergence == 8 and result.top1 == 1.0
    assert result.kl_sum == 0.0 and result.kl_positions == 8


def test_one_changed_token_at_position_3_diverges_there_and_its_kl_is_the_swap():
    reference = answer([5, 9, 12, 40, 41, 7, 7, 3])
    candidate = answer([5, 9, 12, 41, 90, 91, 92, 93], swapped_at=3)  # took the runner-up at 3
    result = compare(reference, candidate)
    assert not result.match and result.first_divergence == 3
    assert result.top1 == pytest.approx(3 / 4)  # positions 0..3 of the reference: 3 agree
    # Positions 0-2 have equal top lists (KL 0); position 3 shares the prefix and chose otherwise.
    assert result.kl_positions == 4
    assert result.kl_sum == pytest.approx(swapped_kl())


def test_a_divergence_at_the_first_token_agrees_on_nothing():
    result = compare(answer([5, 9, 12]), answer([6, 9, 12], swapped_at=0))
    assert (result.match, result.first_divergence, result.top1, result.kl_positions) == (False, 0, 0.0, 1)


def test_an_answer_that_stops_early_diverges_where_it_stopped():
    result = compare(answer([5, 9, 12, 40]), answer([5, 9]))
    assert not result.match and result.first_divergence == 2
    assert result.top1 == pytest.approx(2 / 3)
    assert result.kl_positions == 2  # only the positions both answers have


def test_an_answer_that_runs_on_past_the_reference_reproduced_all_of_it_but_does_not_match():
    result = compare(answer([5, 9]), answer([5, 9, 12]))
    assert not result.match and result.first_divergence == 2 and result.top1 == 1.0


def test_first_divergence_is_the_common_prefix_length():
    assert first_divergence([1, 2, 3], [1, 2, 3]) == 3
    assert first_divergence([1, 2, 3], [1, 7, 3]) == 1
    assert first_divergence([], [4]) == 0


def test_a_token_missing_from_one_top_list_gets_that_side_s_smallest_logprob():
    # Each side lacks the other's second token; given its own smallest logprob, both sides become
    # the same three-token distribution: no divergence where the top-k cannot tell them apart.
    assert top_k_kl({"a": -0.5, "b": -1.0}, {"a": -0.5, "c": -1.0}) == pytest.approx(0.0, abs=1e-12)
    # Otherwise the union, floors and renormalisation written out by hand:
    ref, other = {"a": -0.2, "b": -1.5}, {"a": -0.9, "c": -2.0}
    p = [math.exp(v) for v in (-0.2, -1.5, -1.5)]  # a, b, c (c: ref's floor)
    q = [math.exp(v) for v in (-0.9, -2.0, -2.0)]  # a, b (other's floor), c
    p, q = [v / sum(p) for v in p], [v / sum(q) for v in q]
    assert top_k_kl(ref, other) == pytest.approx(sum(x * math.log(x / y) for x, y in zip(p, q, strict=True)))


def test_the_kl_of_clamped_and_infinite_logprobs_is_finite():
    assert top_k_kl({"a": 0.0, "b": -math.inf}, {"a": 0.0, "b": -9999.0}) == pytest.approx(0.0, abs=1e-12)
    assert math.isfinite(top_k_kl({"a": 0.0, "b": -9999.0}, {"b": 0.0, "a": -9999.0}))


def test_the_metrics_are_means_over_prompts_and_the_kl_is_pooled_per_token():
    reference = [answer([1, 2, 3, 4]), answer([7, 8])]
    candidate = [answer([1, 2, 4, 9], swapped_at=2), answer([7, 8])]
    compared = [compare(r, c) for r, c in zip(reference, candidate, strict=True)]
    metrics = agreement_metrics(compared)
    assert metrics["answer_match_rate"] == 0.5
    assert metrics["first_divergence_mean"] == (2 + 2) / 2
    assert metrics["top1_agreement"] == pytest.approx((2 / 3 + 1.0) / 2)
    assert metrics["kl_per_token_mean"] == pytest.approx(swapped_kl() / (3 + 2))  # 3 + 2 compared positions
    items = agreement_items(compared)
    assert items == {"answer_match_rate": {"0": 0.0, "1": 1.0}, "top1_agreement": {"0": 2 / 3, "1": 1.0}}
    for metric, values in items.items():  # the seam's rule: an item metric is the mean of its items
        assert metrics[metric] == pytest.approx(sum(values.values()) / len(values))


def test_the_reference_agrees_with_itself_and_reports_its_own_answers():
    answers = [answer([1, 2, 3]), answer([4])]
    assert self_agreement(answers) == {
        "answer_match_rate": 1.0,
        "top1_agreement": 1.0,
        "first_divergence_mean": 2.0,
        "kl_per_token_mean": 0.0,
    }
    own = answer_metrics([Answer((1, 2), (-1.0, -3.0), ({}, {})), Answer((3,), (-2.0,), ({},))])
    assert own == {"answers_prompts": 2.0, "answers_tokens_mean": 1.5, "answers_mean_logprob": -2.0}
