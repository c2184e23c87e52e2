"""TrainConfig: JSON round trip, defaults per policy, and errors that name the field."""

from __future__ import annotations

import pytest
from hyperframe_runtime.config import POLICIES, TrainConfig


def test_json_round_trip_and_derived_values() -> None:
    config = TrainConfig(pipeline=2, data=3, n_layers=8, microbatches_per_frame=4, micro_batch_size=5)
    assert TrainConfig.from_json(config.to_json()) == config
    assert config.world_size == 6
    assert config.num_stages == 4  # hyperframe defaults to the V-shape: 2 stages per rank
    assert config.samples_per_frame == 4 * 5 * 3
    assert config.resolved_backend() == "gloo"
    assert TrainConfig(device="cuda").resolved_backend() == "nccl"


@pytest.mark.parametrize(
    ("policy", "stages_per_rank"), [("gpipe", 1), ("1f1b", 1), ("interleaved1f1b", 2), ("zbv", 2)]
)
def test_policy_default_stages_per_rank(policy: str, stages_per_rank: int) -> None:
    assert policy in POLICIES
    config = TrainConfig(policy=policy, pipeline=2, n_layers=4)  # type: ignore[arg-type]
    assert config.effective_stages_per_rank == stages_per_rank


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"policy": "pipedream"}, 'policy: unknown value string "pipedream": use one of hyperframe, gpipe'),
        ({"pipeline": 2, "n_layers": 3}, "n_layers: 3 blocks cannot fill pipeline (2) x stages_per_rank (2)"),
        (
            {"layer_split": "greedy"},
            'layer_split: unknown value string "greedy": use one of auto, even, measured',
        ),
        (
            {"policy": "interleaved1f1b", "pipeline": 2, "n_layers": 4, "layer_split": "measured"},
            "layer_split: 'measured' splits for one stage per rank or a V",
        ),
        ({"d_model": 30, "n_heads": 4}, "d_model: 30 is not a multiple of n_heads"),
        ({"frames": 0}, "frames: 0 is below the minimum 1: use a value >= 1"),
        ({"frames": True}, "frames: expected an integer, got boolean true: use an integer"),
        ({"lr": "fast"}, 'lr: expected a number, got string "fast": use a number'),
        ({"replan_every": -1}, "replan_every: -1 is below the minimum 0: use a value >= 0"),
        ({"policy": "zbv", "stages_per_rank": 1}, "stages_per_rank: policy 'zbv' needs 2"),
        ({"policy": "interleaved1f1b", "pipeline": 2, "microbatches_per_frame": 3}, "microbatches_per_frame"),
        ({"device": "cpu", "backend": "nccl"}, "backend: 'nccl' needs device 'cuda'"),
        ({"betas": [0.9]}, "betas: has 1 items, not 2: give exactly 2"),
        ({"model": "mymodel"}, "model: 'mymodel' is not 'gpt' or 'package.module:function'"),
        ({"epochs": 3}, "epochs: unknown field: remove it or fix the spelling"),
    ],
)
def test_invalid_values_name_the_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TrainConfig.from_dict(raw)


def test_world_size_mismatch_names_both_sides() -> None:
    config = TrainConfig(pipeline=2, data=2, n_layers=4)
    with pytest.raises(ValueError, match=r"pipeline \(2\) x data \(2\) = 4, but WORLD_SIZE is 3"):
        config.check_world_size(3)


def test_not_json() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        TrainConfig.from_json("{pipeline: 2")


@pytest.mark.parametrize(
    ("fields", "has_hook", "measured"),
    [
        ({}, True, False),  # the default policy with replan_every 0 runs the unit-cost plan
        ({"replan_every": 1}, True, True),  # auto: the hyperframe policy that measures
        ({"replan_every": 1}, False, False),  # ... on a model that can be re-split
        ({"replan_every": 1, "pipeline": 1}, True, False),  # ... across two or more ranks
        ({"replan_every": 1, "policy": "1f1b"}, True, False),  # torch's orders: the even split
        ({"replan_every": 1, "layer_split": "even"}, True, False),
        ({"policy": "1f1b", "layer_split": "measured"}, True, True),  # asked for: always
    ],
)
def test_auto_measures_the_split_where_the_hyperframe_policy_measures(
    fields: dict[str, object], has_hook: bool, measured: bool
) -> None:
    config = TrainConfig(**{"pipeline": 2, "n_layers": 4, **fields})  # type: ignore[arg-type]
    assert config.layer_split == fields.get("layer_split", "auto")
    assert config.measures_layer_split(has_hook) is measured


def test_a_config_built_in_python_is_checked_like_parsed_json_every_field_at_once() -> None:
    with pytest.raises(ValueError) as caught:
        TrainConfig(frames=0, momentum=1.0, policy="pipedream")  # type: ignore[arg-type]
    assert str(caught.value).splitlines() == [
        'policy: unknown value string "pipedream": use one of hyperframe, gpipe, 1f1b, interleaved1f1b, zbv',
        "frames: 0 is below the minimum 1: use a value >= 1",
        "momentum: 1 is not below the maximum 1: use a value < 1",
    ]
    with pytest.raises(ValueError) as caught:
        TrainConfig.from_dict({"device": "cpu", "backend": "nccl", "d_model": 30, "n_heads": 4})
    assert str(caught.value).splitlines() == [
        "backend: 'nccl' needs device 'cuda': use 'gloo' (or '') with device 'cpu'",
        "d_model: 30 is not a multiple of n_heads (4): pick d_model divisible by n_heads",
    ]
