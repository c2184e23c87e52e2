"""A plain torchrun DDP training script: what HyperFrame runs for ``entrypoint.script``.

    torchrun --nproc-per-node 2 -m user_project.train_ddp --data DIR --steps 40

torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...) sets up the process group: gloo on
CPU, NCCL on GPUs. Each rank trains on its own slice of the data; DDP averages the gradients.
``hyperframe_runtime.report()`` sends the step, the loss and a metric to the job's
``status.progress`` (rank 0 only; a no-op print-free call elsewhere and outside a cluster).

On SIGTERM (preemption, node drain, ``kubectl delete``) the loop stops after the running step
and exits 75, which HyperFrame reads as "preempted": the gang is recreated without counting
against backoffLimit. This script keeps no checkpoints, so a restart trains from step 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

import hyperframe_runtime
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from user_project.prepare import DATA_FILE, FEATURES

EXIT_PREEMPTED = 75
_stop = False


def _on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    global _stop
    _stop = True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m user_project.train_ddp", description=__doc__)
    parser.add_argument(
        "--data", type=Path, required=True, help="directory with train.pt (user_project.prepare)"
    )
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    data = torch.load(args.data / DATA_FILE)
    inputs, targets = data["inputs"][rank::world].to(device), data["targets"][rank::world].to(device)

    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    generator = torch.Generator().manual_seed(rank)
    for step in range(1, args.steps + 1):
        batch = torch.randint(0, inputs.shape[0], (args.batch_size,), generator=generator)
        loss = nn.functional.mse_loss(model(inputs[batch]), targets[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)  # the loss of the whole global batch, on every rank
        hyperframe_runtime.report(
            step=step,
            loss=mean_loss.item() / world,
            total_steps=args.steps,
            lr=optimizer.param_groups[0]["lr"],
        )
        stop = torch.tensor([1.0 if _stop else 0.0], device=device)
        dist.all_reduce(stop)  # every rank stops at the same step
        if stop.item():
            print(f"rank {rank}: SIGTERM, stopping after step {step}", flush=True)
            del model, optimizer
            _shut_down()
            return EXIT_PREEMPTED
    if rank == 0:
        print(
            f"trained {args.steps} steps on {world} ranks, final loss {mean_loss.item() / world:.4f}",
            flush=True,
        )
    del model, optimizer
    _shut_down()
    return 0


def _shut_down() -> None:
    """Leave together: DDP's reducer is gone (``del model`` above) and every rank is past its last
    collective before the process group goes. A gloo rank that tore its connections down while a
    peer still used them aborted ("terminate called without an active exception")."""
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
