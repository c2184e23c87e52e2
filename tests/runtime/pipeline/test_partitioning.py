"""From measured per-stage costs to per-layer costs, rank speeds and a new split (pure)."""

from __future__ import annotations

import pytest
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec
from hyperframe_runtime.pipeline.partitioning import (
    layer_costs_and_speeds,
    repartition,
    split_spec,
    train_partitioned,
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


def test_train_partitioned_names_what_to_fix() -> None:
    spec = gpt_model_spec(TrainConfig(n_layers=4))
    with pytest.raises(ValueError, match="checkpoint_dir: partitioned training hands the weights over"):
        train_partitioned(TrainConfig(n_layers=4, frames=8, replan_every=2), spec, calibration_frames=4)
    config = TrainConfig(n_layers=4, frames=8, replan_every=2, checkpoint_dir="/nonexistent")
    with pytest.raises(ValueError, match=r"calibration_frames = 8: must lie between replan_every \(2"):
        train_partitioned(config, spec, calibration_frames=8)
