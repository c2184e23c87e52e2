"""Runs training jobs that are killed mid-save and resumed: ``python checkpoint_harness.py RUNS.json OUT``.

torch is imported once here; every job forks its ``world`` ranks (one gloo process group each), so
a dozen short jobs cost one torch import. Each run of ``RUNS.json`` is
``{"name", "world", "config": TrainConfig dict, "kill": {"frames_done", "rank", "phase"} | null,
"per_rank_dir": bool}``:

- ``kill``: the given rank SIGKILLs itself right after it reports ``phase`` while saving the
  snapshot of ``frames_done`` (the other ranks then fail in their next collective, as in a real job);
- ``per_rank_dir``: every rank gets its own checkpoint directory (a volume that is not shared).

Rank 0 appends each frame's loss to ``OUT/<name>.losses`` as it goes (a killed job keeps what it
did); the parent writes ``OUT/<name>.json``: exit codes, the frame the job started from, the
losses, and the first line of each failed rank's error.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import sys
import traceback
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline import checkpoint
from hyperframe_runtime.pipeline.frame_loop import FrameLoop

JOB_TIMEOUT_S = 240


def _kill_at(kill: dict[str, Any], frames_done: int, phase: str) -> None:
    if frames_done == kill["frames_done"] and phase == kill["phase"]:
        os.kill(os.getpid(), signal.SIGKILL)


def _rank(rank: int, run: dict[str, Any], port: int, out: Path) -> None:
    torch.set_num_threads(1)
    name = run["name"]
    try:
        raw = dict(run["config"])
        if run.get("per_rank_dir"):
            raw["checkpoint_dir"] = str(Path(raw["checkpoint_dir"]) / f"rank-{rank}")
        config = TrainConfig.from_dict(raw)
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=run["world"],
            timeout=timedelta(seconds=60),
        )
        kill = run.get("kill")
        if kill is not None and kill["rank"] == rank:
            save = checkpoint.save_snapshot

            def killing_save(*args: Any, **kwargs: Any) -> Path:
                return save(*args, **kwargs, on_phase=partial(_kill_at, kill, kwargs["frames_done"]))

            checkpoint.save_snapshot = killing_save  # type: ignore[assignment]
        loop = FrameLoop(config)
        if rank == 0:
            (out / f"{name}.start").write_text(str(loop.frames_done))
        while loop.frames_done < config.frames:
            loss = loop.run_frame().loss
            if rank == 0:
                with (out / f"{name}.losses").open("a") as handle:
                    handle.write(f"{loss!r}\n")
            loop.after_frame()
        loop.close()
        dist.destroy_process_group()
    except BaseException as exc:
        (out / f"{name}.error-{rank}").write_text(f"{exc}\n{traceback.format_exc()}")
        os._exit(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _job(run: dict[str, Any], out: Path) -> dict[str, Any]:
    context = multiprocessing.get_context("fork")
    port = _free_port()
    procs = [context.Process(target=_rank, args=(r, run, port, out)) for r in range(run["world"])]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(JOB_TIMEOUT_S)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join()
    name = run["name"]
    losses_file, start_file = out / f"{name}.losses", out / f"{name}.start"
    errors = {
        r: (out / f"{name}.error-{r}").read_text().splitlines()[0]
        for r in range(run["world"])
        if (out / f"{name}.error-{r}").exists()
    }
    return {
        "exitcodes": [proc.exitcode for proc in procs],
        "start": int(start_file.read_text()) if start_file.exists() else None,
        "losses": [float(x) for x in losses_file.read_text().split()] if losses_file.exists() else [],
        "errors": errors,
    }


def main() -> None:
    runs = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    out = Path(sys.argv[2])
    for run in runs:
        result = _job(run, out)
        (out / f"{run['name']}.json").write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
