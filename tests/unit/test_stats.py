"""The verdict's arithmetic (recipe_ledger.stats): Student t and chi-square quantiles against printed
tables and closed forms, the upper bound on a sigma, and the sample statistics."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from recipe_ledger.errors import InputError
from recipe_ledger.stats import (
    chi2_quantile,
    regularized_incomplete_beta,
    sample_stdev,
    sigma_upper_bound,
    sum_of_squares,
    t_quantile,
)

# ------------------------------------------------------------------------------------ t quantile

# Two-sided and one-sided critical values from the standard printed tables (4 significant decimals).
T_TABLE = [
    (0.975, 1, 12.7062),
    (0.975, 2, 4.3027),
    (0.975, 3, 3.1824),
    (0.975, 4, 2.7764),
    (0.975, 5, 2.5706),
    (0.975, 10, 2.2281),
    (0.975, 20, 2.0860),
    (0.975, 30, 2.0423),
    (0.975, 60, 2.0003),
    (0.975, 120, 1.9799),
    (0.95, 1, 6.3138),
    (0.95, 5, 2.0150),
    (0.95, 10, 1.8125),
    (0.95, 30, 1.6973),
    (0.9, 1, 3.0777),
    (0.9, 10, 1.3722),
    (0.8, 1, 1.3764),
    (0.8, 2, 1.0607),
    (0.8, 5, 0.9195),
    (0.8, 10, 0.8791),
    (0.8, 30, 0.8538),
    (0.995, 1, 63.6567),
    (0.995, 3, 5.8409),
    (0.995, 10, 3.1693),
    (0.9995, 1, 636.6192),
    (0.9995, 10, 4.5869),
]


@pytest.mark.parametrize(("p", "df", "expected"), T_TABLE)
def test_t_quantile_matches_printed_tables(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=6e-5)


@pytest.mark.parametrize("p", [0.51, 0.6, 0.75, 0.9, 0.975, 0.999, 0.99999])
def test_t_quantile_matches_closed_forms_for_one_and_two_df(p: float) -> None:
    cauchy = math.tan(math.pi * (p - 0.5))  # df = 1 is the Cauchy distribution
    two_df = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    assert t_quantile(p, 1) == pytest.approx(cauchy, rel=1e-9)
    assert t_quantile(p, 2) == pytest.approx(two_df, rel=1e-9)


def test_t_quantile_is_symmetric_and_tends_to_the_normal() -> None:
    assert t_quantile(0.025, 5) == pytest.approx(-t_quantile(0.975, 5))
    assert t_quantile(0.5, 7) == 0.0
    assert t_quantile(0.975, 10**6) == pytest.approx(1.959966, abs=1e-5)
    assert t_quantile(0.975, 10**4) == pytest.approx(1.960201, abs=1e-5)  # bisection side of the switch


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.9, 0)])
def test_t_quantile_refuses_impossible_input(p: float, df: int) -> None:
    with pytest.raises(InputError):
        t_quantile(p, df)


def test_regularized_incomplete_beta_known_identities() -> None:
    assert regularized_incomplete_beta(1, 1, 0.3) == pytest.approx(0.3)
    assert regularized_incomplete_beta(3, 1, 0.6) == pytest.approx(0.6**3)
    assert regularized_incomplete_beta(7.5, 7.5, 0.5) == pytest.approx(0.5)


# ------------------------------------------------------------------------------------ chi-square


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.2, 1, 0.0642),
        (0.2, 2, 0.4463),
        (0.2, 5, 2.3425),
        (0.1, 2, 0.2107),
        (0.95, 10, 18.307),
        (0.99, 1, 6.6349),
    ],
)
def test_chi2_quantile_matches_printed_tables(p: float, df: int, expected: float) -> None:
    assert chi2_quantile(p, df) == pytest.approx(expected, abs=2e-4)


def test_sigma_upper_bound_widens_more_for_fewer_launches() -> None:
    factors = [sigma_upper_bound(1.0, df, 0.8) for df in (1, 2, 5, 30)]
    assert factors == sorted(factors, reverse=True) and factors[-1] > 1.0
    assert factors[0] == pytest.approx(math.sqrt(1 / chi2_quantile(0.2, 1)))
    with pytest.raises(InputError):
        sigma_upper_bound(1.0, 0, 0.8)


# ------------------------------------------------------------------------------ sample statistics


def test_sample_statistics_agree_with_the_exact_standard_library() -> None:
    rng = random.Random(23)
    for _ in range(200):
        values = [rng.lognormvariate(4.6, rng.choice((0.001, 0.05, 0.5))) for _ in range(rng.randint(2, 12))]
        assert sample_stdev(values) == pytest.approx(statistics.stdev(values), rel=1e-9)
        assert sum_of_squares(values) == pytest.approx(
            statistics.variance(values) * (len(values) - 1), rel=1e-9
        )
