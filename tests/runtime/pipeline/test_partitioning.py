"""From measured per-stage costs to per-layer costs, rank speeds and a new split (pure)."""

from __future__ import annotations

import itertools

import pytest
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec
from hyperframe_runtime.pipeline.partitioning import (
    LayerProfile,
    even_split,
    layer_costs_and_speeds,
    repartition,
    split_spec,
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
