"""From measured per-stage costs to per-layer costs, rank speeds and a new split (pure)."""

from __future__ import annotations

import itertools

import pytest
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec
from hyperframe_runtime.pipeline.partitioning import (
    SPLIT_MARGIN,
    LayerProfile,
    even_split,
    layer_costs_and_speeds,
    repartition,
    second_look_tells,
    split_spec,
    two_look_profile,
)
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Placement


def test_a_slow_rank_is_found_and_loses_layers() -> None:
    # Even split of 8 alike layers; rank 1 took 3x as long per layer.
    costs = CostModel(forward=(4.0, 12.0), backward_input=(4.0, 12.0), backward_weight=(4.0, 12.0))
    placement = Placement.one_per_rank(2)
    layers, slow = layer_costs_and_speeds(costs, placement, (0, 4, 8))
    assert slow == [1.0, 3.0]
    assert layers == [3.0] * 8
    assert repartition(placement, layers, slow) == (0, 6, 8)


def test_the_v_placement_gets_the_v_aware_split() -> None:
    # Rank 0 holds stages 0 and 3, rank 1 stages 1 and 2; rank 1 is 2x slower per layer.
    costs = CostModel(
        forward=(2.0, 4.0, 4.0, 2.0),
        backward_input=(2.0, 4.0, 4.0, 2.0),
        backward_weight=(2.0, 4.0, 4.0, 2.0),
    )
    placement = Placement.vshape(2)
    layers, slow = layer_costs_and_speeds(costs, placement, (0, 2, 4, 6, 8))
    assert slow == [1.0, 2.0]
    split = repartition(placement, layers, slow)
    assert len(split) == 5 and split[0] == 0 and split[-1] == 8
    rank0 = (split[1] - split[0]) + (split[4] - split[3])
    assert rank0 > 4  # the fast rank carries more of the V


def test_mismatched_splits_name_the_fix() -> None:
    with pytest.raises(ValueError, match="has 3 stages but the placement has 2"):
        layer_costs_and_speeds(CostModel.uniform(2), Placement.one_per_rank(2), (0, 2, 4, 8))
    with pytest.raises(ValueError, match="one stage per rank or the V only"):
        repartition(Placement.looped(2, 2), [1.0] * 8, [1.0, 1.0])
    spec = gpt_model_spec(TrainConfig(n_layers=4))
    with pytest.raises(ValueError, match=r"must rise strictly from 0 to num_layers \(4\)"):
        split_spec(spec, (0, 2, 8))


def test_split_spec_builds_the_split_stages() -> None:
    spec = split_spec(gpt_model_spec(TrainConfig(n_layers=4)), (0, 3, 4))
    first, last = spec.build_stage(0, 2), spec.build_stage(1, 2)
    assert sorted(first.blocks) == ["0", "1", "2"] and sorted(last.blocks) == ["3"]  # type: ignore[arg-type]


def test_a_profile_splits_every_placement_of_its_ranks_and_round_trips() -> None:
    costs = CostModel(forward=(4.0, 12.0), backward_input=(4.0, 12.0), backward_weight=(4.0, 12.0))
    profile = LayerProfile.measure(costs, Placement.one_per_rank(2), (0, 4, 8))
    assert profile.split_for(Placement.one_per_rank(2)) == (0, 6, 8)
    v = profile.split_for(Placement.vshape(2))
    assert (v[1] - v[0]) + (v[4] - v[3]) > (v[2] - v[1]) + (v[3] - v[2])  # the fast rank's share
    # The looped placement has no partitioner: it keeps the even split.
    assert profile.split_for(Placement.looped(2, 2)) == (0, 2, 4, 6, 8)
    assert LayerProfile.from_json(profile.to_json()) == profile
    with pytest.raises(ValueError, match="has 4 ranks but the layer profile was measured on 2"):
        profile.split_for(Placement.one_per_rank(4))


@pytest.mark.parametrize(
    ("slow", "moves"),
    [
        (1.05, False),  # timing noise on a balanced model: 16 + 16 stays
        (1.0 + SPLIT_MARGIN, False),  # 17 + 15 would be 3.4 % faster: under the margin
        (1.5, True),  # 19 + 13 is 19 % faster (19.5 against 24)
    ],
)
def test_a_split_must_be_predicted_faster_by_the_margin(slow: float, moves: bool) -> None:
    profile = LayerProfile(layer_costs=(1.0,) * 32, rank_slowdown=(1.0, slow))
    one = Placement.one_per_rank(2)
    split = profile.split_for(one)
    assert (split != (0, 16, 32)) == moves
    gain = 1 - profile.slowest_rank_s(one, split) / profile.slowest_rank_s(one, (0, 16, 32))
    assert gain >= SPLIT_MARGIN if moves else gain == 0.0
    # The V gets the same rule (its even split is [0, 8, 16, 24, 32]).
    assert (profile.split_for(Placement.vshape(2)) != (0, 8, 16, 24, 32)) == moves


@pytest.mark.parametrize(
    ("layers", "stages", "expected"),
    [(8, 2, (0, 4, 8)), (7, 2, (0, 4, 7)), (10, 4, (0, 2, 5, 8, 10)), (3, 3, (0, 1, 2, 3))],
)
def test_even_split_is_as_even_as_the_layers_go(layers: int, stages: int, expected: tuple[int, ...]) -> None:
    cuts = even_split(layers, stages)
    assert cuts == expected
    sizes = [b - a for a, b in itertools.pairwise(cuts)]
    assert max(sizes) - min(sizes) <= 1


def test_even_split_needs_a_layer_per_stage() -> None:
    with pytest.raises(ValueError, match="every stage holds at least one layer"):
        even_split(3, 4)


def _stage_costs(seconds: list[float]) -> CostModel:
    """One stage per rank whose F + B per micro-batch is ``seconds`` (F a third, B two thirds)."""
    return CostModel(
        forward=tuple(s / 3 for s in seconds),
        backward_input=tuple(s / 3 for s in seconds),
        backward_weight=tuple(s / 3 for s in seconds),
    )


def _measured(split: tuple[int, ...], block: list[float], first_extra: float, last_extra: float) -> CostModel:
    """What each rank measures on ``split``: its blocks at its own pace plus the extras."""
    p = len(block)
    seconds = [block[r] * (split[r + 1] - split[r]) for r in range(p)]
    seconds[0] += first_extra
    seconds[-1] += last_extra
    return _stage_costs(seconds)


@pytest.mark.parametrize(
    ("block", "first_extra", "last_extra", "final"),
    [
        # A heavy head (5.5 blocks) on equal ranks: the first look reads a slow last rank and
        # moves too few blocks (6 + 2: 6 and 7.5); the second look finds the head and moves one
        # more (7 + 1: 7 and 6.5).
        ([1.0, 1.0], 0.0, 5.5, (0, 7, 8)),
        # A truly slow last rank and no extras: the second look agrees with the first.
        ([1.0, 2.0], 0.0, 0.0, (0, 5, 8)),
        # Both at once, on four ranks: rank 2 is 3x slower and the head costs three blocks.
        ([1.0, 1.0, 3.0, 1.0], 0.5, 3.0, None),
    ],
)
def test_a_second_look_separates_the_first_and_last_stages_extras(
    block: list[float], first_extra: float, last_extra: float, final: tuple[int, ...] | None
) -> None:
    p = len(block)
    one = Placement.one_per_rank(p)
    even = even_split(8, p)
    first = LayerProfile.measure(_measured(even, block, first_extra, last_extra), one, even)
    moved = first.split_for(one)
    assert moved != even
    assert second_look_tells(one, even, moved)
    looks = (
        (_measured(even, block, first_extra, last_extra), even),
        (_measured(moved, block, first_extra, last_extra), moved),
    )
    profile = two_look_profile(one, *looks)
    assert profile is not None
    # It recovers the truth: every rank's pace, and the extras on the first and last layer.
    fastest = min(block)
    assert profile.rank_slowdown == pytest.approx([b / fastest for b in block])
    assert profile.layer_costs[1:-1] == pytest.approx([fastest] * 6)
    assert profile.layer_costs[0] == pytest.approx(fastest + first_extra / (block[0] / fastest))
    assert profile.layer_costs[-1] == pytest.approx(fastest + last_extra / (block[-1] / fastest))
    truth = profile.split_for(one)
    if final is not None:
        assert truth == final
    # The second look's split is at least as good as the first's, on the true costs.
    assert profile.slowest_rank_s(one, truth) <= profile.slowest_rank_s(one, moved) + 1e-9


def test_a_second_look_needs_the_end_ranks_to_change_and_one_stage_per_rank() -> None:
    one = Placement.one_per_rank(3)
    assert not second_look_tells(one, (0, 2, 4, 6), (0, 2, 3, 6))  # the first rank kept 2 layers
    assert not second_look_tells(one, (0, 2, 4, 6), (0, 3, 4, 6))  # the last kept 2
    assert second_look_tells(one, (0, 2, 4, 6), (0, 3, 5, 6))
    assert not second_look_tells(Placement.vshape(2), (0, 2, 4, 6, 8), (0, 3, 4, 5, 8))
    costs = _stage_costs([2.0, 2.0, 2.0])
    assert two_look_profile(one, (costs, (0, 2, 4, 6)), (costs, (0, 2, 3, 6))) is None
    # Nor do two looks whose times hardly change on any rank: no rank's pace can be told.
    two = Placement.one_per_rank(2)
    same = _stage_costs([2.0, 2.0])
    assert two_look_profile(two, (same, (0, 4, 8)), (same, (0, 5, 8))) is None


def test_a_rank_whose_two_times_hardly_differ_runs_at_the_others_pace() -> None:
    """A heavy head (5.5 blocks) on equal ranks, and the second look's last stage measured 10 %
    slow: its two times then differ by 7 % of their sum, too little to tell its pace (taken alone,
    a block on it would read 0.63 of one on the first rank). It runs at the first rank's pace, the
    head's cost absorbs the noise, and the split is the true one."""
    one = Placement.one_per_rank(2)
    even, moved = (0, 4, 8), (0, 6, 8)
    noisy = _stage_costs([6.0, 1.1 * (2.0 + 5.5)])
    profile = two_look_profile(one, (_measured(even, [1.0, 1.0], 0.0, 5.5), even), (noisy, moved))
    assert profile is not None
    assert profile.rank_slowdown == pytest.approx([1.0, 1.0])
    assert profile.layer_costs[-1] == pytest.approx(1.0 + (5.5 + 1.1 * 7.5 - 2.0) / 2)
    assert profile.split_for(one) == (0, 7, 8)


def test_a_fast_rank_whose_two_times_hardly_differ_does_not_take_a_slow_ranks_pace() -> None:
    """Rank 1 runs a block 8x slower; the second look's first stage (7 blocks) measured as if it
    held 4.3 (a first look slowed by load reads the same). The first rank's pace cannot be told
    from its two looks, and the only other pace is the slow rank's; but no rank runs slower than
    its time over its layers (the extras are never negative), so it stays fast and the split
    stays where the slow rank keeps one block."""
    one = Placement.one_per_rank(2)
    even, moved = (0, 4, 8), (0, 7, 8)
    noisy = _stage_costs([4.3, 8.0])
    profile = two_look_profile(one, (_measured(even, [1.0, 8.0], 0.0, 0.0), even), (noisy, moved))
    assert profile is not None
    assert profile.rank_slowdown[0] == 1.0 and profile.rank_slowdown[1] > 4.0
    assert profile.split_for(one) == (0, 7, 8)
