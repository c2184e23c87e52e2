"""Two gloo ranks: a stage move and a bucketed gradient sync, ``python move_sync_harness.py OUT``.

Case ``move``: rank 0 holds layers 0-5 and rank 1 layers 6-7 of a stack of linear layers (with
AdamW state from one step); they move to 0-3 and 4-7. Rank 0 sends layers 4 and 5 (parameters
and moments) to rank 1, in buckets of 4 KiB, except the one weight over that size, which goes
on its own. Each rank saves its values before and after and its ``MoveStats``.

Case ``sync``: each rank's gradients are its rank + 1 times a fixed pattern; after the
``GradReducer`` with a 4 KiB bucket they are the mean. Rank 0 saves the gradients and the
peak staging bytes.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hyperframe_runtime.pipeline.grad_sync import GradReducer
from hyperframe_runtime.pipeline.stage_move import move_state
from torch import nn

BUCKET = 4096


def _layers(indices: range, width: int = 24) -> nn.Module:
    torch.manual_seed(7)
    module = nn.Module()
    for i in range(8):
        # Layer 5 is wide: its weight (40 x 40 floats, 6400 B) is over one bucket.
        layer = nn.Linear(40 if i == 5 else width, 40 if i == 5 else width)
        if i in indices:
            module.add_module(f"layer{i}", layer)
    return module


def _snapshot(module: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, list[torch.Tensor]]:
    out: dict[str, list[torch.Tensor]] = {}
    for name, p in module.named_parameters():
        state = optimizer.state.get(p, {})
        out[name] = [p.detach().clone()] + [state[k].clone() for k in ("step", "exp_avg", "exp_avg_sq")]
    return out


def _move(rank: int, out: Path) -> None:
    old_mod = _layers(range(0, 6) if rank == 0 else range(6, 8))
    old_opt = torch.optim.AdamW(old_mod.parameters(), lr=0.1)
    for p in old_mod.parameters():
        p.grad = torch.full_like(p, 0.5 + rank)
    old_opt.step()
    before = _snapshot(old_mod, old_opt)
    new_mod = _layers(range(0, 4) if rank == 0 else range(4, 8))
    new_opt = torch.optim.AdamW(new_mod.parameters(), lr=0.1)
    stats = move_state(
        {0: old_mod}, old_opt, {0: new_mod}, new_opt, pp_group=dist.group.WORLD, bucket_bytes=BUCKET
    )
    after = _snapshot(new_mod, new_opt)
    everything: list[object] = [None, None]
    dist.all_gather_object(everything, (before, after, vars(stats)))
    if rank == 0:
        torch.save(everything, out / "move.pt")


def _sync(rank: int, out: Path) -> None:
    torch.manual_seed(3)
    module = nn.Sequential(nn.Linear(40, 40), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8))
    for i, p in enumerate(module.parameters()):
        p.grad = (rank + 1.0) * torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape) / (i + 1)
    reducer = GradReducer(
        {0: module}, num_microbatches=1, dp_group=dist.group.WORLD, dp_size=2, bucket_bytes=BUCKET
    )
    reducer.reduce(0)
    reducer.finish()
    if rank == 0:
        grads = [p.grad.clone() for p in module.parameters() if p.grad is not None]
        torch.save(
            {"grads": grads, "peak": reducer.peak_staging_bytes, "spans": reducer.spans}, out / "sync.pt"
        )


def _worker(rank: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=timedelta(seconds=120))
    try:
        _move(rank, Path(out))
        _sync(rank, Path(out))
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    dist.barrier()  # leave together: a gloo rank tearing down under a peer's last send aborted
    dist.destroy_process_group()


def main() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    mp.start_processes(_worker, args=(port, sys.argv[1]), nprocs=2, start_method="spawn")  # type: ignore[attr-defined,no-untyped-call]


if __name__ == "__main__":
    main()
