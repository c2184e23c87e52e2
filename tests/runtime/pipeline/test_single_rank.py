"""The whole frame loop in this process, on a one-rank gloo group: the built-in GPT learns.

Both stages of the V-shape live on the one rank (no p2p), so this covers the frame loop, the
executor's local stage hand-off and the metrics without spawning processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.frame_loop import train


@pytest.mark.usefixtures("one_rank_group")
@pytest.mark.parametrize("policy", ["hyperframe", "1f1b"])
def test_built_in_gpt_loss_falls_within_a_few_frames(policy: str) -> None:
    config = TrainConfig(
        policy=policy,  # type: ignore[arg-type]
        frames=6,
        microbatches_per_frame=4,
        micro_batch_size=4,
        lr=3e-3,
        replan_every=3,
        planner_time_budget_s=0.02,
    )
    result = train(config)
    losses = [m.loss for m in result.metrics]
    assert len(losses) == 6
    assert losses[-1] < losses[0] - 0.2, f"loss did not fall: {losses}"
    if policy == "hyperframe":
        # The first frames measure the candidate schedules of the first placement in turn (a
        # warm-up frame, then 1F1B and GPipe alternately); the losses above show the training
        # stayed intact through the switches.
        schedules = [m.schedule for m in result.metrics]
        assert schedules[:4] == ["1f1b", "1f1b", "gpipe", "1f1b"], schedules
        assert result.metrics[0].exploring


@pytest.mark.gpu
def test_bf16_autocast_on_cuda_learns(tmp_path: Path) -> None:
    """On a GPU the stages run under bf16 autocast (LayerNorm and loss fp32) and still learn."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: the bf16 autocast path only runs on cuda")
    dist.init_process_group("nccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        config = TrainConfig(device="cuda", frames=6, microbatches_per_frame=4, micro_batch_size=4, lr=3e-3)
        result = train(config, device=torch.device("cuda", 0))
    finally:
        dist.destroy_process_group()
    losses = [m.loss for m in result.metrics]
    assert losses[-1] < losses[0] - 0.2, f"loss did not fall: {losses}"
    assert result.metrics[-1].peak_memory_bytes > 0
