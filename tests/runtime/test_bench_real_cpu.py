"""The statistics `python -m bench real_cpu` reports (pure; the bench itself is not run here)."""

from __future__ import annotations

import random

import pytest

from bench.real_cpu import _paired, median_ci, paired_explore_cost


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


def test_paired_explore_cost_charges_only_what_exploring_frames_took_beyond_the_steady_pace() -> None:
    # Every run's first 10 frames are slow (warm-up), the torch run's as much as the policy's:
    # not an exploring cost. Frames 1-4 explore at the steady pace, frames 5-6 at 1.5x it.
    theirs = [1.0] + [2.0 if i < 10 else 1.0 for i in range(1, 40)]
    mine = [0.9 * t for t in theirs]  # steady: 0.9 of torch's
    mine[5] *= 1.5
    mine[6] *= 1.5
    exploring = [i < 7 for i in range(40)]
    boundary = [0.0] * 40
    boundary[3] = 0.25  # a stage move
    cost, share = paired_explore_cost(mine, theirs, exploring, boundary)
    assert cost == pytest.approx(0.5 * 0.9 * 2.0 * 2 + 0.25)
    assert share == pytest.approx(cost / (100 * 0.9 * 1.0))


def test_paired_explore_cost_counts_the_first_horizon_frames_only() -> None:
    theirs = [1.0] * 300
    mine = [1.1 if 150 <= i < 160 else 1.0 for i in range(300)]
    exploring = [150 <= i < 160 for i in range(300)]
    cost, _ = paired_explore_cost(mine, theirs, exploring, [0.0] * 300)
    assert cost == 0.0


def _whole(policy: str, total: float, boundary: float = 0.0) -> dict[str, object]:
    return {
        "policy": policy, "total_s": total, "build_s": 0.1, "frames_s": total - 0.2 - boundary,
        "boundary_s": boundary, "planner_s": 0.0, "exploring_frames": 10 if policy == "hyperframe" else 0,
        "schedule_frames": {"1f1b": 100}, "last_schedule": "1f1b", "winner": "1f1b",
        "layer_split": [], "events": [],
    }  # fmt: skip


def test_whole_runs_are_compared_round_by_round() -> None:
    from bench.whole_run import summarise

    rounds = [
        {
            "hyperframe": _whole("hyperframe", h, 0.05),
            "1f1b": _whole("1f1b", t),
            "1f1b-again": _whole("1f1b-again", a),
        }
        for h, t, a in [(2.2, 2.0, 2.0), (3.0, 3.0, 3.3), (1.9, 2.0, 1.8)]
    ]
    result = summarise(rounds, 100)
    assert result["ratio"] == {"median": 1.0, "min": 0.95, "max": 1.1}
    assert result["ratio_of_sums"] == pytest.approx(round(7.1 / 7.0, 3))
    assert result["control_ratio"] == {"median": 1.0, "min": 0.9, "max": 1.1}
    assert result["median_s"]["hyperframe"] == {
        "total_s": 2.2, "build_s": 0.1, "frames_s": 1.95, "boundary_s": 0.05, "rest_s": 0.1
    }  # fmt: skip
