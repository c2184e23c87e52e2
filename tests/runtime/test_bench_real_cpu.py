"""The statistics `python -m bench real_cpu` reports (pure; the bench itself is not run here)."""

from __future__ import annotations

import random

from bench.real_cpu import _paired, median_ci


def test_median_ci_takes_the_binomial_order_statistics() -> None:
    # n = 100: ranks 40 and 61 counted from 1 (50 -+ 1.96 x 10 / 2).
    assert median_ci([float(x) for x in range(100)]) == (39.0, 60.0)
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few values: the whole range


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time() -> None:
    rng = random.Random(7)
    trials = 2000
    covered = 0
    for _ in range(trials):
        low, high = median_ci([rng.expovariate(1.0) for _ in range(120)])
        covered += low <= 0.6931471805599453 <= high  # the median of Exp(1) is ln 2
    assert 0.93 <= covered / trials <= 0.98


def test_paired_ratios_skip_the_first_round_and_pair_by_round() -> None:
    assert _paired([9.0, 2.0, 3.0], [1.0, 4.0, 3.0]) == [0.5, 1.0]
