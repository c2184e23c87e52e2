"""Real CPU run with unequal rank speeds: the even layer split against ``layer_split = "measured"``.

    python -m bench.uneven_ranks [--frames 16] [--sleep-ms 3] [--json FILE]

NOISY CPU: the ranks share the host's cores with everything else; the slow rank's extra time is
a sleep, so the ratio is far steadier than the compute-bound benches, but read the ratio, not the
absolute times.

Two spawned gloo ranks train the built-in GPT (8 blocks, one stage per rank, hyperframe policy,
re-planning every 2 frames). Rank 1 is made slow: each of its blocks sleeps ``--sleep-ms`` in the
forward and twice that in the backward, in proportion to the blocks it holds, like a device that
is several times slower. The same frames are trained twice through the runtime's own frame loop:

1. ``layer_split = "even"`` (4 + 4 blocks): the baseline;
2. ``layer_split = "measured"``: the first ``PARTITION_FRAMES`` frames on the even split with every
   op timed, then the runtime re-splits the layers by the measured per-layer costs and rank
   speeds, moves the stages and goes on (weights and AdamW state by name);

and prints both runs' median frame (step) time over the last half of the frames (both runs past
their schedule exploration), their ratio, and the loss of the first frame on the new split next
to the baseline's (the same weights and data, so equal up to float rounding).
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
from hyperframe_runtime.config import LayerSplit, TrainConfig
from hyperframe_runtime.models.gpt import GPTStage, gpt_model_spec
from hyperframe_runtime.models.spec import ModelSpec
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from hyperframe_runtime.pipeline.partitioning import PARTITION_FRAMES, even_split
from torch import nn

SLOW_RANK = 1


class _Sleep(torch.autograd.Function):
    """Identity that sleeps ``seconds`` in the forward and twice that in the backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, seconds: float) -> torch.Tensor:
        ctx.seconds = seconds
        time.sleep(seconds)
        return x.clone()  # not a view: split backwards (ZBV) detach stage outputs in place

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

    def build_stage(stage: int, num_stages: int) -> nn.Module:
        cuts = even_split(config.n_layers, num_stages)
        return build_layers(stage, num_stages, range(cuts[stage], cuts[stage + 1]))

    return ModelSpec(
        build_stage=build_stage,
        loss_fn=spec.loss_fn,
        make_batch=spec.make_batch,
        tokens_per_sample=spec.tokens_per_sample,
        num_layers=spec.num_layers,
        build_layers=build_layers,
    )


def _config(frames: int, layer_split: LayerSplit) -> TrainConfig:
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
        layer_split=layer_split,
        seed=1,
    )


def _worker(rank: int, world: int, port: int, frames: int, seconds: float, tmp: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=300))
    try:
        spec = sleepy_spec(_config(frames, "even"), seconds)
        even = FrameLoop(_config(frames, "even"), spec=spec).run()
        measured = FrameLoop(_config(frames, "measured"), spec=spec).run()
        if rank == 0:
            assert measured.profile is not None
            result = {
                "calibration_frames": PARTITION_FRAMES,
                "split": list(measured.profile.split_for(measured.plans[-1].placement)),
                "rank_slowdown": list(measured.profile.rank_slowdown),
                "events": measured.events,
                "even_frame_s": [m.frame_s for m in even.metrics],
                "even_loss": [m.loss for m in even.metrics],
                "partitioned_frame_s": [m.frame_s for m in measured.metrics],
                "partitioned_loss": [m.loss for m in measured.metrics],
            }
            Path(tmp, "result.json").write_text(json.dumps(result), encoding="utf-8")
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
        mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
            _worker, args=(2, _free_port(), frames, sleep_ms / 1000, tmp), nprocs=2, start_method="spawn"
        )
        result: dict[str, Any] = json.loads(Path(tmp, "result.json").read_text(encoding="utf-8"))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.uneven_ranks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--frames", type=int, default=16, help="frames per run (>= 8)")
    parser.add_argument("--sleep-ms", type=float, default=3.0, help="slow rank's forward sleep per block")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.frames < 8:
        parser.error(
            f"--frames {args.frames}: use at least 8 (the first {PARTITION_FRAMES} measure the split)"
        )
    result = run(args.frames, args.sleep_ms)
    k = result["calibration_frames"]
    tail = args.frames // 2
    even = statistics.median(result["even_frame_s"][tail:])
    split = statistics.median(result["partitioned_frame_s"][tail:])
    calibrating = statistics.median(result["partitioned_frame_s"][1:k])
    result["even_median_s"], result["split_median_s"] = even, split
    print(
        f"rank slowdowns measured in the first {k} frames: {[round(x, 2) for x in result['rank_slowdown']]}"
    )
    print(f"even split [0, 4, 8]: median frame {even * 1000:.1f} ms (frames {tail + 1}..{args.frames})")
    print(f"frames 2..{k} on the even split, timing every op: median {calibrating * 1000:.1f} ms")
    print(
        f"measured split {result['split']}: median frame {split * 1000:.1f} ms (frames {tail + 1}..{args.frames})"
    )
    print(f"speedup of the measured split: **{even / split:.2f}x**")
    print(
        f"loss of frame {k + 1}, the first on the new split: even {result['even_loss'][k]:.6f}, "
        f"measured {result['partitioned_loss'][k]:.6f}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
