"""Real CPU run with unequal rank speeds: the even layer split against the partitioned one.

    python -m bench.uneven_ranks [--frames 8] [--sleep-ms 3] [--json FILE]

NOISY CPU: the ranks share the host's cores with everything else; the slow rank's extra time is
a sleep, so the ratio is far steadier than the compute-bound benches, but read the ratio, not the
absolute times.

Two spawned gloo ranks train the built-in GPT (8 blocks, one stage per rank, hyperframe policy,
re-planning every 2 frames). Rank 1 is made slow: each of its blocks sleeps ``--sleep-ms`` in the
forward and twice that in the backward, in proportion to the blocks it holds, like a device that
is several times slower. The run:

1. trains ``--frames`` frames on the even split (4 + 4 blocks); the first re-plan measures every
   rank's per-stage costs (the executor's op timings, all-gathered);
2. turns them into per-layer costs and rank speeds and asks the partitioner for a split
   (``pipeline.partitioning``: ``layer_costs_and_speeds``, ``repartition``);
3. trains ``--frames`` frames on that split (``split_spec``: the GPT's per-layer hook), also
   re-planning from measured costs;

and prints each run's median frame (step) time after its first re-plan, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import GPTStage, gpt_model_spec
from hyperframe_runtime.models.spec import ModelSpec
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from hyperframe_runtime.pipeline.partitioning import layer_costs_and_speeds, repartition, split_spec
from torch import nn

SLOW_RANK = 1


class _Sleep(torch.autograd.Function):
    """Identity that sleeps ``seconds`` in the forward and twice that in the backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, seconds: float) -> torch.Tensor:
        ctx.seconds = seconds
        time.sleep(seconds)
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        time.sleep(2 * ctx.seconds)
        return grad, None


def sleepy_spec(config: TrainConfig, seconds: float) -> ModelSpec:
    """The built-in GPT whose blocks sleep ``seconds`` per forward on :data:`SLOW_RANK`."""
    spec = gpt_model_spec(config)

    def build_layers(stage: int, num_stages: int, layers: range) -> nn.Module:
        module = GPTStage(config, stage, num_stages, layers)
        if dist.get_rank() == SLOW_RANK:
            for block in module.blocks.values():
                block.register_forward_hook(lambda _m, _i, out: _Sleep.apply(out, seconds))  # type: ignore[no-untyped-call]
        return module

    return ModelSpec(
        build_stage=spec.build_stage,
        loss_fn=spec.loss_fn,
        make_batch=spec.make_batch,
        tokens_per_sample=spec.tokens_per_sample,
        num_layers=spec.num_layers,
        build_layers=build_layers,
    )


def _config(frames: int) -> TrainConfig:
    return TrainConfig(
        vocab_size=64,
        seq_len=16,
        d_model=32,
        n_heads=2,
        n_layers=8,
        pipeline=2,
        stages_per_rank=1,
        microbatches_per_frame=4,
        micro_batch_size=2,
        frames=frames,
        replan_every=2,
        planner_time_budget_s=0.02,
        seed=1,
    )


def _train(config: TrainConfig, spec: ModelSpec) -> tuple[list[float], list[float], FrameLoop]:
    loop = FrameLoop(config, spec=spec)
    times, losses = [], []
    while loop.frames_done < config.frames:
        metrics = loop.run_frame()
        times.append(metrics.frame_s)
        losses.append(metrics.loss)
        loop.after_frame()  # re-plans from the measured costs every replan_every frames
    return times, losses, loop


def _worker(rank: int, world: int, port: int, frames: int, seconds: float, out: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=300))
    try:
        config = _config(frames)
        spec = sleepy_spec(config, seconds)
        even = (0, 4, 8)
        even_times, even_losses, loop = _train(config, split_spec(spec, even))
        costs = loop.plan.costs
        if costs is None:
            raise RuntimeError("no measured costs: the run did not re-plan")
        layer_costs, slowdown = layer_costs_and_speeds(costs, loop.plan.placement, even)
        split = repartition(loop.plan.placement, layer_costs, slowdown)
        loop.close()
        split_times, split_losses, loop = _train(config, split_spec(spec, split))
        loop.close()
        if rank == 0:
            result = {
                "even_split": list(even),
                "split": list(split),
                "rank_slowdown": slowdown,
                "even_frame_s": even_times,
                "split_frame_s": split_times,
                "even_loss": even_losses,
                "split_loss": split_losses,
            }
            Path(out).write_text(json.dumps(result), encoding="utf-8")
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)  # do not hang the other rank's collectives
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(frames: int, sleep_ms: float) -> dict[str, Any]:
    """Both runs on two spawned ranks; the measurements of rank 0."""
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "result.json")
        mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
            _worker, args=(2, _free_port(), frames, sleep_ms / 1000, out), nprocs=2, start_method="spawn"
        )
        result: dict[str, Any] = json.loads(Path(out).read_text(encoding="utf-8"))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.uneven_ranks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--frames", type=int, default=8, help="frames per run (>= 4)")
    parser.add_argument("--sleep-ms", type=float, default=3.0, help="slow rank's forward sleep per block")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    result = run(args.frames, args.sleep_ms)
    settle = 2  # frames before the first re-plan run unit-cost exploration plans
    even = statistics.median(result["even_frame_s"][settle:])
    split = statistics.median(result["split_frame_s"][settle:])
    result["even_median_s"], result["split_median_s"] = even, split
    print(f"rank slowdowns measured on the even split: {[round(x, 2) for x in result['rank_slowdown']]}")
    print(f"even split {result['even_split']}: median frame {even * 1000:.1f} ms")
    print(f"partitioned split {result['split']}: median frame {split * 1000:.1f} ms")
    print(f"speedup of the partitioned run: **{even / split:.2f}x**")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
