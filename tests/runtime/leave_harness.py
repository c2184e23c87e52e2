"""Two gloo ranks leave their process group, ``python leave_harness.py OUT``.

Case ``together``: rank 1 is late (it sleeps, then writes ``arrived-1``) and both call
``leave_process_group(together=True)``; rank 0 writes ``together.json``: whether ``arrived-1``
was there when its leave returned (the last barrier held it until every peer had arrived).

Case ``alone``, in a fresh group: rank 0 calls ``leave_process_group(together=False)`` and writes
``left-0``; rank 1 waits for ``left-0`` (at most 60 s) before leaving, and writes ``alone.json``:
whether it saw it (a failed rank does not wait for peers that may be inside any collective).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp
from hyperframe_runtime.process_group import leave_process_group

LATE_S = 2.0


def _together(rank: int, out: Path) -> None:
    dist.barrier()
    if rank == 1:
        time.sleep(LATE_S)
        (out / "arrived-1").write_text("", encoding="utf-8")
    leave_process_group(together=True)
    if rank == 0:
        seen = (out / "arrived-1").exists()
        (out / "together.json").write_text(json.dumps({"saw_peer_arrive": seen}), encoding="utf-8")


def _alone(rank: int, out: Path) -> None:
    dist.barrier()
    if rank == 0:
        leave_process_group(together=False)
        (out / "left-0").write_text("", encoding="utf-8")
        return
    deadline = time.monotonic() + 60
    while not (out / "left-0").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = (out / "left-0").exists()
    leave_process_group(together=False)
    (out / "alone.json").write_text(json.dumps({"peer_left_first": seen}), encoding="utf-8")


def _worker(rank: int, ports: tuple[int, int], out: str) -> None:
    try:
        for port, case in zip(ports, (_together, _alone), strict=True):
            dist.init_process_group(
                "gloo",
                init_method=f"tcp://127.0.0.1:{port}",
                rank=rank,
                world_size=2,
                timeout=timedelta(seconds=120),
            )
            case(rank, Path(out))
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    ports = (_free_port(), _free_port())
    mp.start_processes(_worker, args=(ports, sys.argv[1]), nprocs=2, start_method="spawn")  # type: ignore[attr-defined,no-untyped-call]


if __name__ == "__main__":
    main()
