"""The user's view: a whole 100-frame run of cpu-tiny, the default policy against 1F1B, paired.

    python -m bench.whole_run [--runs 9] [--frames 100] [--json]

``bench.real_cpu`` interleaves the policies frame by frame, which measures each frame but hides
what the default policy costs around its frames: the background planner's CPU (it runs while
the *other* policies' frames run there), stage moves and the layer split's re-builds. Here each
policy runs the whole job on its own, as a user who runs ``hyperframe local examples/cpu-tiny.yaml``
with 100 frames gets it: a fresh ``FrameLoop`` (model, optimizer, process groups) and its
``run()``, exploring included, timed from before the build to after the last rank's last frame.

Three policies take turns, one whole run each per round, each round starting one policy later:
``hyperframe`` (the defaults: ``replanEveryFrames: 1``, ``layerSplit: auto``), ``1f1b`` (torch's
Schedule1F1B on the even split) and ``1f1b-again``, an identical second 1F1B run whose ratio to
``1f1b`` is the noise floor. One warm-up round is not counted. Reported: the per-round ratio of
total wall time (median, min, max) against the noise floor's, each policy's median seconds
split into build, frames, boundary seconds (stage moves, plan switches, the layer split's
re-build: ``replan_s``) and the rest (metrics exchange, bookkeeping), and what the default
policy ran: frames per schedule, the schedule it ended on, its layer split.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hyperframe_runtime.pipeline.frame_loop import FrameLoop

from bench.real_cpu import CONTROL, ROWS, Row, _config, _free_port

POLICIES = ("hyperframe", "1f1b", CONTROL)
ROW = "cpu-tiny"


def _one_run(row: Row, policy: str, frames: int) -> dict[str, Any]:
    dist.barrier()
    start = time.perf_counter()
    loop = FrameLoop(_config(row, policy, frames))
    build_s = time.perf_counter() - start
    result = loop.run()
    dist.barrier()  # the run ends when the last rank's last frame does
    total_s = time.perf_counter() - start
    metrics = result.metrics
    selector = loop.selector
    return {
        "policy": policy,
        "total_s": total_s,
        "build_s": build_s,
        "frames_s": sum(m.frame_s for m in metrics),
        "boundary_s": sum(m.replan_s for m in metrics),
        "planner_s": sum(m.planner_s for m in metrics),
        "exploring_frames": sum(m.exploring for m in metrics),
        "schedule_frames": dict(Counter(m.schedule for m in metrics)),
        "last_schedule": metrics[-1].schedule,
        "winner": selector.winner if selector is not None else policy,
        "layer_split": list(loop.layer_boundaries or ()),
        "events": list(result.events),
    }


def _worker(rank: int, row: Row, runs: int, frames: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(
        "gloo", rank=rank, world_size=row.pipeline * row.data, timeout=timedelta(minutes=20)
    )
    for policy in POLICIES:  # warm-up round, not counted
        _one_run(row, policy, frames)
    rounds = []
    for i in range(runs):
        shift = i % len(POLICIES)
        order = POLICIES[shift:] + POLICIES[:shift]
        rounds.append({policy: _one_run(row, policy, frames) for policy in order})
    if rank == 0:
        Path(out).write_text(json.dumps(rounds), encoding="utf-8")
    dist.barrier()  # leave together (a gloo rank tearing down under a peer's last send aborts)
    dist.destroy_process_group()


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def summarise(rounds: list[dict[str, dict[str, Any]]], frames: int) -> dict[str, Any]:
    ratio = [r["hyperframe"]["total_s"] / r["1f1b"]["total_s"] for r in rounds]
    control = [r[CONTROL]["total_s"] / r["1f1b"]["total_s"] for r in rounds]
    parts = ("total_s", "build_s", "frames_s", "boundary_s")
    medians = {p: {k: round(statistics.median(r[p][k] for r in rounds), 3) for k in parts} for p in POLICIES}
    for p in POLICIES:
        medians[p]["rest_s"] = round(
            statistics.median(
                r[p]["total_s"] - r[p]["build_s"] - r[p]["frames_s"] - r[p]["boundary_s"] for r in rounds
            ),
            3,
        )
    hyper = [r["hyperframe"] for r in rounds]
    return {
        "row": f"{ROW}, whole {frames}-frame run",
        "runs": len(rounds),
        "ratio": _spread(ratio),
        "ratio_of_sums": round(
            sum(r["hyperframe"]["total_s"] for r in rounds) / sum(r["1f1b"]["total_s"] for r in rounds), 3
        ),
        "control_ratio": _spread(control),
        "median_s": medians,
        "hyperframe_runs": [
            {
                k: h[k]
                for k in ("exploring_frames", "schedule_frames", "last_schedule", "winner", "layer_split")
            }
            | {"planner_s": round(h["planner_s"], 3), "boundary_s": round(h["boundary_s"], 3)}
            for h in hyper
        ],
        "events": hyper[-1]["events"],
    }


def run_whole(runs: int, frames: int) -> dict[str, Any]:
    row = ROWS[ROW]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
            _worker,
            args=(row, runs, frames, _free_port(), str(out)),
            nprocs=row.pipeline * row.data,
            start_method="spawn",
        )
        result = summarise(json.loads(out.read_text(encoding="utf-8")), frames)
    result["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result


def print_whole(result: dict[str, Any]) -> None:
    r, c = result["ratio"], result["control_ratio"]
    print(f"\n{result['row']}: {', '.join(POLICIES)} take turns, {result['runs']} rounds after a warm-up")
    print(
        f"  load average (1 min) before / after: {result['load_average_1m'][0]} / {result['load_average_1m'][1]}"
    )
    print(
        f"  hyperframe / 1f1b total wall time per round: median {r['median']:.3f} (min {r['min']:.3f}, "
        f"max {r['max']:.3f}); ratio of the sums {result['ratio_of_sums']:.3f}; noise floor "
        f"{CONTROL} / 1f1b: median {c['median']:.3f} (min {c['min']:.3f}, max {c['max']:.3f})"
    )
    for policy, m in result["median_s"].items():
        print(
            f"  {policy}: median {m['total_s']:.2f} s = build {m['build_s']:.2f} + frames {m['frames_s']:.2f}"
            f" + boundary {m['boundary_s']:.2f} + rest {m['rest_s']:.2f}"
        )
    for i, h in enumerate(result["hyperframe_runs"]):
        print(
            f"  hyperframe round {i + 1}: ended on {h['last_schedule']} (winner {h['winner']}), split "
            f"{h['layer_split']}, {h['exploring_frames']} exploring frames, frames per schedule "
            f"{h['schedule_frames']}, boundary {h['boundary_s']:.2f} s, planner {h['planner_s']:.2f} s"
        )
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="counted rounds (one whole run per policy each)")
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run_whole(args.runs, args.frames)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_whole(result)


if __name__ == "__main__":
    main()
