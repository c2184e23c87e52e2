"""Real CPU runs (gloo): the default ``hyperframe`` policy against every torch schedule, measured.

    python -m bench real_cpu            # every row, as `make bench` runs it
    python -m bench.real_cpu [--rows cpu-tiny,cpu-2node,cpu-large] [--frames 60] [--repeats 2] [--json]

NOISY CPU: the ranks share the host's cores with everything else running on it. Read the ratios
within one run, with the noise printed next to them, not the absolute times.

For each row (a layout and model), one group of spawned gloo ranks builds one ``FrameLoop`` per
policy (its own model copy and optimizer, all through the same executor) and runs them frame by
frame in turn (each round starting one policy later), so load changes on the host hit every policy
alike. ``hyperframe`` runs exactly as a
user who keeps the defaults gets it (``replanEveryFrames: 1``, ``layerSplit: auto``): it measures
the layer split and the candidate schedules
in its first frames, plans in the background and keeps the fastest. The whole run is repeated
``--repeats`` times with the policy order reversed each time.

Reported per row: each policy's median wall time per frame (every frame but the first, which
every policy spends on torch's shape inference; hyperframe's exploring frames are included), the
default's ratio to the best torch schedule per repeat, the spread of the frame times
(interquartile range / median), what hyperframe chose and what its exploring cost, its
predicted-vs-measured frame time once exploring ended, and the per-frame cost of the ranks'
metrics exchange before (all-gathering every op record) and after (a fixed handful of floats).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.spec import ModelSpec
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from hyperframe_runtime.pipeline.metrics import RankFrame, exchange_summaries

from bench.uneven_ranks import sleepy_spec

TORCH_POLICIES = ("gpipe", "1f1b", "interleaved1f1b", "zbv")
CONTROL = "1f1b-again"
"""A second, identical 1F1B run: its paired ratio to ``1f1b`` is the noise floor of the ratios."""


@dataclass(frozen=True)
class Row:
    name: str
    pipeline: int
    data: int
    model: dict[str, int]
    microbatches: int
    micro_batch_size: int
    frames: int
    slow_rank_sleep_ms: float = 0.0
    """> 0: pipeline rank 1 is made slow (``bench.uneven_ranks``: each of its blocks sleeps this
    long per forward, twice per backward): a row where the plan should win."""


ROWS: dict[str, Row] = {
    # examples/cpu-tiny.yaml: 2 ranks, tiny-gpt, 4 micro-batches of 2.
    "cpu-tiny": Row(
        "cpu-tiny",
        2,
        1,
        {"n_layers": 4, "d_model": 64, "n_heads": 4, "vocab_size": 256, "seq_len": 32},
        4,
        2,
        200,
    ),
    # examples/cpu-2node.yaml: pipeline 2 x data 2 (4 ranks), tiny-gpt.
    "cpu-2node": Row(
        "cpu-2node",
        2,
        2,
        {"n_layers": 4, "d_model": 64, "n_heads": 4, "vocab_size": 256, "seq_len": 32},
        4,
        2,
        120,
    ),
    # Compute dominates the per-op overhead.
    "cpu-large": Row(
        "cpu-large",
        2,
        1,
        {"n_layers": 8, "d_model": 128, "n_heads": 4, "vocab_size": 512, "seq_len": 64},
        8,
        4,
        100,
    ),
    # A large vocabulary: the last stage's head and loss cost about five blocks, so the even split
    # leaves rank 1 with twice rank 0's work. Where the measured layer split should win.
    "big-vocab": Row(
        "big-vocab",
        2,
        1,
        {"n_layers": 8, "d_model": 64, "n_heads": 4, "vocab_size": 16384, "seq_len": 32},
        4,
        2,
        100,
    ),
    # One slow rank: where the measured layer split should win.
    "slow-rank": Row(
        "slow-rank",
        2,
        1,
        {"n_layers": 8, "d_model": 32, "n_heads": 2, "vocab_size": 64, "seq_len": 16},
        4,
        2,
        60,
        slow_rank_sleep_ms=3.0,
    ),
}


WHOLE_ROW = "cpu-tiny-whole"
"""The user-experience row: whole 100-frame runs of cpu-tiny, default against 1F1B (``bench.whole_run``)."""


def _config(row: Row, policy: str, frames: int = 10**6) -> TrainConfig:
    return TrainConfig(
        pipeline=row.pipeline,
        data=row.data,
        policy="1f1b" if policy == CONTROL else policy,  # type: ignore[arg-type]
        microbatches_per_frame=row.microbatches,
        micro_batch_size=row.micro_batch_size,
        frames=frames,
        replan_every=1 if policy == "hyperframe" else 0,
        # layer_split left at its default, "auto": the hyperframe policy measures the split and
        # re-splits where that is predicted 10 % faster; torch's schedules run the even split.
        seed=1,
        **row.model,  # type: ignore[arg-type]
    )


def _spec(row: Row, policy: str) -> ModelSpec | None:
    """The model of ``row``: the built-in GPT, with a slow rank where the row asks for one."""
    if not row.slow_rank_sleep_ms:
        return None
    return sleepy_spec(_config(row, policy), row.slow_rank_sleep_ms / 1000)


def _policies(row: Row) -> list[str]:
    allowed = ["hyperframe", *TORCH_POLICIES, CONTROL]
    if row.microbatches % row.pipeline:
        allowed.remove("interleaved1f1b")
    return allowed


def _exchange_cost(loop: FrameLoop, rounds: int = 20) -> tuple[float, float]:
    """Seconds per frame of the old (every op record) and new (a few floats) metrics exchange."""
    last = loop.result.metrics[-1]
    records = [
        (0, "F", mb, 0.001 * mb, 0.001 * mb + 0.0005, 0.0)
        for mb in range(6 * loop.config.microbatches_per_frame)
    ]
    mine = RankFrame(
        rank=0, pp_rank=0, dp_rank=0, records=records, reduces=[], losses=[last.loss], wall_start=0.0,
        pipeline_s=0.0, dp_wait_s=0.0, frame_s=last.frame_s, peak_memory_bytes=0,
    )  # fmt: skip
    out: list[RankFrame | None] = [None] * dist.get_world_size()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(rounds):
        dist.all_gather_object(out, mine)
    before = (time.perf_counter() - start) / rounds
    dist.barrier()
    start = time.perf_counter()
    for _ in range(rounds):
        exchange_summaries(mine.summary())
    after = (time.perf_counter() - start) / rounds
    return before, after


def _worker(rank: int, row: Row, repeats: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    world = row.pipeline * row.data
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(minutes=20))
    policies = _policies(row)
    runs = []
    exchange: tuple[float, float] = (0.0, 0.0)
    for repeat in range(repeats):
        order = policies if repeat % 2 == 0 else policies[::-1]
        loops = {policy: FrameLoop(_config(row, policy), spec=_spec(row, policy)) for policy in order}
        for frame in range(row.frames):
            # Each round starts one policy later: no policy always runs right after the same one
            # (a frame after a memory-hungry schedule's pays for the caches that one evicted).
            shift = frame % len(order)
            for policy in order[shift:] + order[:shift]:
                loops[policy].run_frame()
        hyper = loops["hyperframe"]
        selector = hyper.selector
        assert selector is not None
        runs.append(
            {
                "frame_s": {p: [m.frame_s for m in loops[p].result.metrics] for p in order},
                "dp_overlap": {p: [m.dp_overlap_share for m in loops[p].result.metrics] for p in order},
                "dp_wait": {p: [m.comm_wait_share for m in loops[p].result.metrics] for p in order},
                "schedules": [m.schedule for m in hyper.result.metrics],
                "exploring": [m.exploring for m in hyper.result.metrics],
                "predicted_s": [m.predicted_frame_s for m in hyper.result.metrics],
                "replan_s": [m.replan_s for m in hyper.result.metrics],
                "winner": selector.winner,
                "explore_cost_s": selector.exploration_cost_s()
                + sum(m.replan_s for m in hyper.result.metrics),
                "events": hyper.result.events,
            }
        )
        exchange = _exchange_cost(hyper)
        for loop in loops.values():
            loop.close()
    if rank == 0:
        Path(out).write_text(json.dumps({"runs": runs, "exchange_s": exchange}), encoding="utf-8")
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spread(values: list[float]) -> float:
    q = statistics.quantiles(values, n=4)
    return (q[2] - q[0]) / statistics.median(values)


def _paired(mine: list[float], theirs: list[float]) -> list[float]:
    """Per round (every frame but the first), my frame / their frame: the policies run their
    frames in turn, so a load change on the host hits both frames of a round alike."""
    return [a / b for a, b in zip(mine[1:], theirs[1:], strict=True)]


def median_ci(values: list[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free 95 % confidence interval of the median: the sorted values of ranks
    n/2 - z sqrt(n)/2 (rounded down) and 1 + n/2 + z sqrt(n)/2 (rounded up), counted from 1
    (binomial, normal approximation)."""
    ordered = sorted(values)
    n = len(ordered)
    half = z * n**0.5 / 2
    low = max(0, math.floor(n / 2 - half) - 1)
    high = min(n - 1, math.ceil(n / 2 + half))
    return ordered[low], ordered[high]


def _reference(winner: str, best_torch: str) -> str:
    """The torch run to pair hyperframe's frames with: the schedule it settled on, where that is
    torch's (its own split or plan otherwise: then the best torch schedule)."""
    return winner if winner in TORCH_POLICIES else best_torch


def _steady_ratio(run: dict[str, Any], best_torch: str) -> float | None:
    """The paired ratio over the frames after exploring where hyperframe ran ``best_torch``'s own
    schedule: what the policy's machinery costs per frame beyond the schedule it runs."""
    pairs = [
        a / b
        for a, b, schedule, exploring in zip(
            run["frame_s"]["hyperframe"][1:],
            run["frame_s"][best_torch][1:],
            run["schedules"][1:],
            run["exploring"][1:],
            strict=True,
        )
        if schedule == best_torch and not exploring
    ]
    return round(statistics.median(pairs), 3) if len(pairs) >= 5 else None


def paired_explore_cost(
    mine: list[float], theirs: list[float], exploring: list[bool], boundary_s: list[float], horizon: int = 100
) -> tuple[float, float]:
    """What exploring cost in the first ``horizon`` frames, paired: (seconds, share of a
    ``horizon``-frame run at the steady pace).

    ``theirs`` is a torch schedule run in the same rounds. Each exploring frame is charged what it
    took beyond ``rho`` x the same round's torch frame, ``rho`` being the median ratio of the
    non-exploring frames of the second half (the policy's steady pace against that schedule),
    and every frame's boundary seconds (stage moves, plans, calibration) are charged in full. A
    burst of load, and the first frames' own slowness that every run pays (allocator and cache
    warm-up), hit both sides of a round alike, so they do not count as exploring. The first
    frame (torch's shape inference, paid by every policy) is left out.
    """
    n = min(horizon, len(mine))
    steady = [
        a / b
        for i, (a, b, e) in enumerate(zip(mine, theirs, exploring, strict=True))
        if i >= len(mine) // 2 and not e
    ]
    rho = statistics.median(steady) if steady else 1.0
    cost = sum(mine[i] - rho * theirs[i] for i in range(1, n) if exploring[i]) + sum(boundary_s[:n])
    pace = rho * statistics.median(theirs[1:])
    return cost, cost / (horizon * pace)


def _summarise(row: Row, raw: dict[str, Any]) -> dict[str, Any]:
    policies = _policies(row)
    per_repeat = []
    for run in raw["runs"]:
        medians = {p: statistics.median(run["frame_s"][p][1:]) for p in policies}
        best_torch = min(TORCH_POLICIES, key=lambda p: medians.get(p, float("inf")))
        steady = [
            (pred, got)
            for pred, got, exploring in zip(
                run["predicted_s"], run["frame_s"]["hyperframe"], run["exploring"], strict=True
            )
            if not exploring and pred > 0
        ]
        after = steady[len(steady) // 3 :]  # after the winner settled
        pace = medians["hyperframe"]
        against_best = _paired(run["frame_s"]["hyperframe"], run["frame_s"][best_torch])
        control = _paired(run["frame_s"][CONTROL], run["frame_s"]["1f1b"])
        per_repeat.append(
            {
                "median_ms": {p: round(1e3 * v, 2) for p, v in medians.items()},
                "spread": {p: round(_spread(run["frame_s"][p][1:]), 3) for p in policies},
                "best_torch": best_torch,
                "ratio": round(medians["hyperframe"] / medians[best_torch], 3),
                "paired_ratio": round(statistics.median(against_best), 3),
                "paired_ci": [round(x, 3) for x in median_ci(against_best)],
                "steady_paired_ratio": _steady_ratio(run, best_torch),
                "control_paired_ratio": round(statistics.median(control), 3),
                "control_ci": [round(x, 3) for x in median_ci(control)],
                "winner": run["winner"],
                "exploring_frames": sum(run["exploring"]),
                "explore_share_of_100_frames": round(run["explore_cost_s"] / (100 * pace), 4),
                "explore_paired_share_of_100_frames": round(
                    paired_explore_cost(
                        run["frame_s"]["hyperframe"],
                        run["frame_s"][_reference(run["winner"], best_torch)],
                        run["exploring"],
                        run["replan_s"],
                    )[1],
                    4,
                ),
                "predicted_ms": round(1e3 * statistics.median(p for p, _ in after), 2) if after else None,
                "measured_ms": round(1e3 * statistics.median(g for _, g in after), 2) if after else None,
                "events": run["events"],
                "dp_overlap": {p: round(statistics.median(run["dp_overlap"][p][1:]), 3) for p in policies}
                if row.data > 1
                else {},
                "dp_wait_share": {p: round(statistics.median(run["dp_wait"][p][1:]), 4) for p in policies}
                if row.data > 1
                else {},
            }
        )
    before, after_s = raw["exchange_s"]
    return {
        "row": row.name,
        "layout": f"pipeline {row.pipeline} x data {row.data}",
        "model": row.model,
        "m": row.microbatches,
        "micro_batch_size": row.micro_batch_size,
        "frames": row.frames,
        "repeats": per_repeat,
        "exchange_ms_before_after": [round(1e3 * before, 3), round(1e3 * after_s, 3)],
    }


def run_row(row: Row, repeats: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
            _worker,
            args=(row, repeats, _free_port(), str(out)),
            nprocs=row.pipeline * row.data,
            start_method="spawn",
        )
        result = _summarise(row, json.loads(out.read_text(encoding="utf-8")))
    result["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    names = [*ROWS, WHOLE_ROW]
    parser.add_argument("--rows", default=",".join(names), help=f"comma-separated, from {', '.join(names)}")
    parser.add_argument("--frames", type=int, default=0, help="frames per policy per repeat (0: the row's)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--whole-runs", type=int, default=9, help=f"rounds of {WHOLE_ROW} (bench.whole_run)")
    parser.add_argument("--json", action="store_true", help="print the raw JSON result only")
    args = parser.parse_args()
    results = []
    for name in args.rows.split(","):
        if name == WHOLE_ROW:
            from bench.whole_run import print_whole, run_whole  # it imports this module

            results.append(run_whole(args.whole_runs, 100))
            if not args.json:
                print_whole(results[-1])
            continue
        row = ROWS[name]
        if args.frames:
            row = Row(**{**row.__dict__, "frames": args.frames})
        results.append(run_row(row, args.repeats))
        if not args.json:
            _print(results[-1])
    if args.json:
        print(json.dumps(results, indent=2))


def _print(result: dict[str, Any]) -> None:
    print(
        f"\n{result['row']}: {result['layout']}, GPT {result['model']}, m={result['m']} x {result['micro_batch_size']}"
    )
    print(
        f"  noisy CPU (shared cores, load average (1 min) {result['load_average_1m'][0]} before, "
        f"{result['load_average_1m'][1]} after); {result['frames']} frames per policy per repeat, policies alternate"
    )
    for i, rep in enumerate(result["repeats"]):
        cells = ", ".join(
            f"{p} {ms:.1f} (±{100 * rep['spread'][p] / 2:.0f}%)" for p, ms in rep["median_ms"].items()
        )
        print(f"  repeat {i + 1}: median ms/frame: {cells}")
        print(
            f"    hyperframe / best torch ({rep['best_torch']}) = {rep['ratio']:.3f} (paired per round "
            f"{rep['paired_ratio']:.3f}, 95% CI {rep['paired_ci'][0]:.3f}-{rep['paired_ci'][1]:.3f}; "
            f"on its schedule after exploring {rep['steady_paired_ratio']}; "
            f"noise floor: {CONTROL} / 1f1b {rep['control_paired_ratio']:.3f}, 95% CI "
            f"{rep['control_ci'][0]:.3f}-{rep['control_ci'][1]:.3f}); "
            f"ran {rep['winner']} after "
            f"{rep['exploring_frames']} exploring frames costing {100 * rep['explore_paired_share_of_100_frames']:.1f}% "
            f"of a 100-frame run paired with torch's frames of the same rounds "
            f"({100 * rep['explore_share_of_100_frames']:.1f}% by the runtime's own estimate); steady state predicted {rep['predicted_ms']} ms vs measured {rep['measured_ms']} ms"
        )
        if rep["dp_overlap"]:
            cells = ", ".join(
                f"{p} {100 * v:.0f}% (exposed wait {100 * rep['dp_wait_share'][p]:.1f}% of the frame)"
                for p, v in rep["dp_overlap"].items()
            )
            print(f"    DP all-reduce time hidden behind compute, median over frames: {cells}")
        for event in rep["events"]:
            print(f"      {event}")
    before, after = result["exchange_ms_before_after"]
    print(
        f"  per-frame metrics exchange: {before:.3f} ms (all op records) -> {after:.3f} ms (summary floats)"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
