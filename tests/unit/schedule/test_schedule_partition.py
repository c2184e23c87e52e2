"""Exact min-bottleneck contiguous partitioner against brute force."""

from __future__ import annotations

import itertools
import random

import pytest
from hyperframe_runtime.schedule.ir import ScheduleError
from hyperframe_runtime.schedule.partition import (
    partition_costs,
    partition_layers,
    rank_loads,
    vshape_partition,
)


def brute_force(layers: list[float], slow: list[float]) -> float:
    n, p = len(layers), len(slow)
    best = float("inf")
    for cuts in itertools.combinations(range(1, n), p - 1):
        bounds = (0, *cuts, n)
        best = min(best, max(slow[s] * sum(layers[bounds[s] : bounds[s + 1]]) for s in range(p)))
    return best


@pytest.mark.parametrize("seed", range(25))
def test_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    p = rng.randint(1, 4)
    layers = [rng.choice([0.5, 1.0, 1.5, 2.0, 3.0]) for _ in range(rng.randint(p, 9))]
    slow = [rng.choice([1.0, 1.0, 1.5, 1 / 0.6]) for _ in range(p)]
    result = partition_layers(layers, slow)
    assert result.bottleneck == pytest.approx(brute_force(layers, slow))
    assert result.boundaries[0] == 0 and result.boundaries[-1] == len(layers)
    assert all(a < b for a, b in zip(result.boundaries, result.boundaries[1:], strict=False))


def test_a_slow_device_gets_fewer_layers() -> None:
    result = partition_layers([1.0] * 12, [1.0, 2.0, 1.0])
    assert [len(result.layers_of(s)) for s in range(3)] == [5, 2, 5]
    assert result.bottleneck == 5.0


def test_partition_costs_sums_layers_per_stage() -> None:
    part = partition_layers([1.0, 1.0, 2.0, 2.0], [1.0, 1.0])
    costs = partition_costs(
        part,
        layer_forward=[1.0, 1.0, 2.0, 2.0],
        layer_backward_input=[1.0] * 4,
        layer_backward_weight=[0.5] * 4,
        rank_slowdown=[1.0, 1.0],
    )
    assert part.boundaries == (0, 2, 4)  # ties go to the earliest cut
    assert sum(costs.forward) == 6.0 and costs.num_stages == 2


def test_too_few_layers() -> None:
    with pytest.raises(ScheduleError, match="2 layers cannot fill 3 stages"):
        partition_layers([1.0, 1.0], [1.0, 1.0, 1.0])


def test_vshape_partition_gives_each_rank_the_optimal_load_in_two_contiguous_chunks() -> None:
    slow = [1.0, 1.0, 1.5, 1.0]
    result = vshape_partition([1.0] * 32, slow)
    assert result.num_stages == 8 and result.boundaries[0] == 0 and result.boundaries[-1] == 32
    per_rank = [result.stage_times[r] + result.stage_times[7 - r] for r in range(4)]
    assert max(per_rank) == partition_layers([1.0] * 32, slow).bottleneck == 9.0


def brute_force_v(layers: list[float], slow: list[float]) -> float:
    n, p = len(layers), len(slow)
    best = float("inf")
    for cuts in itertools.combinations(range(1, n), 2 * p - 1):
        b = (0, *cuts, n)
        loads = [
            slow[r] * (sum(layers[b[r] : b[r + 1]]) + sum(layers[b[2 * p - 1 - r] : b[2 * p - r]]))
            for r in range(p)
        ]
        best = min(best, max(loads))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_vshape_partition_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    p = rng.randint(1, 3)
    layers = [rng.choice([0.25, 0.5, 1.0, 1.5, 2.0, 3.0]) for _ in range(rng.randint(2 * p, 10))]
    if rng.random() < 0.5:
        layers[-1] += rng.choice([1.0, 2.0, 4.0])  # a heavy head on the last layer
    slow = [rng.choice([1.0, 1.0, 1.5, 1 / 0.6]) for _ in range(p)]
    result = vshape_partition(layers, slow)
    assert result.num_stages == 2 * p
    assert result.boundaries[0] == 0 and result.boundaries[-1] == len(layers)
    assert all(a < b for a, b in zip(result.boundaries, result.boundaries[1:], strict=False))
    assert max(rank_loads(result, slow)) == pytest.approx(brute_force_v(layers, slow))


def test_a_heavy_head_gives_rank_0_fewer_blocks() -> None:
    # The head (last layer) and the first blocks both sit on rank 0 of the V.
    layers = [1.0] * 16
    layers[-1] += 3.0
    result = vshape_partition(layers, [1.0] * 4)
    sizes = [len(result.layers_of(c)) for c in range(8)]
    assert sizes[0] + sizes[7] < sizes[1] + sizes[6]
    assert max(rank_loads(result, [1.0] * 4)) == pytest.approx(19 / 4, abs=0.75)


@pytest.mark.parametrize("slow", [[1.0, 1.0, 1.5, 1.0], [1.0, 1.0, 1 / 0.6, 1 / 0.6], [1.0] * 4])
def test_vshape_partition_keeps_each_ranks_two_chunks_even(slow: list[float]) -> None:
    # Even chunks keep the V's warm-up memory low (ZBV runs 2(p - r) - 1 forwards of chunk r first).
    result = vshape_partition([1.0] * 32, slow)
    sizes = [len(result.layers_of(c)) for c in range(8)]
    assert all(abs(sizes[r] - sizes[7 - r]) <= 1 for r in range(4)), sizes
    assert max(rank_loads(result, slow)) == pytest.approx(partition_layers([1.0] * 32, slow).bottleneck)
