"""Schedule-only benchmark: HyperFrame's planner against torch's own pipeline schedules.

Run ``python -m bench.schedules`` (``--budget`` sets the planner's search budget, ``--json`` saves
the numbers, ``--gantt-dir`` writes SVG pictures). Everything is a cost replay: same model, same
costs, same simulator, no GPUs. Tables are Markdown so they can be pasted into docs/scheduler.md.

The model is cut into 2p equal chunks (F = I = W = 0.5, activation 0.5 each). One-stage-per-rank
schedules (GPipe, 1F1B) run chunk pairs as one stage; the two-stage schedules run chunks as
stages, placed looped (Interleaved1F1B, LoopedBFS, InterleavedZeroBubble) or in a V (ZBV,
DualPipeV). HyperFrame plans each of the three placements and keeps the fastest. Ratios are
makespan / LB_tight, with LB_tight the smallest over the three placements, so every column is
measured against the same bound.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperframe_runtime.schedule.baselines import BASELINE_NAMES, baseline
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.gantt import write_gantt_svg
from hyperframe_runtime.schedule.ir import Placement, ScheduleError
from hyperframe_runtime.schedule.partition import (
    Partition,
    partition_costs,
    partition_layers,
    vshape_partition,
)
from hyperframe_runtime.schedule.planner import plan
from hyperframe_runtime.schedule.simulate import lb_tight, simulate

SHORT = {
    "GPipe": "GPipe",
    "1F1B": "1F1B",
    "Interleaved1F1B": "I1F1B",
    "LoopedBFS": "LoopBFS",
    "InterleavedZeroBubble": "IZB",
    "ZBVZeroBubble": "ZBV",
    "DualPipeV": "DualPV",
}


@dataclass(frozen=True)
class Profile:
    name: str
    describe: str
    chunk_f: Callable[[int, int], float]
    chunk_w: Callable[[int, int], float]
    p2p: float = 0.0
    slow_rank: bool = False


def _heavy(c: int, p: int) -> float:
    return 0.5 + (0.4 if c == 2 * p - 1 else 0.0)


def _even(c: int, p: int) -> float:
    return 0.5


PROFILES = (
    Profile("uniform", "F = I = W on every stage", _even, _even),
    Profile("heavy-last", "last stage 1.4x (F, I and W)", _heavy, _heavy),
    Profile("w-0.6f", "W = 0.6 F", _even, lambda c, p: 0.3),
    Profile("comm-heavy", "p2p = 0.3 F", _even, _even, p2p=0.3),
    Profile("slow-device", "rank p/2 is 1.5x slower", _even, _even, slow_rank=True),
)


def costs_for(profile: Profile, placement: Placement, p: int) -> CostModel:
    """The profile's costs for a placement of its 2p chunks (merged in pairs for one per rank)."""
    f = [profile.chunk_f(c, p) for c in range(2 * p)]
    w = [profile.chunk_w(c, p) for c in range(2 * p)]
    act = [0.5] * (2 * p)
    if placement.num_stages == p:
        f, w, act = ([x[2 * s] + x[2 * s + 1] for s in range(p)] for x in (f, w, act))
    slow = tuple(1.5 if profile.slow_rank and r == p // 2 else 1.0 for r in range(p))
    return CostModel(
        forward=tuple(f),
        backward_input=tuple(f),
        backward_weight=tuple(w),
        activation=tuple(act),
        rank_slowdown=slow,
        p2p=profile.p2p,
    )


def hyperframe_placements(p: int) -> dict[str, Placement]:
    return {"V": Placement.vshape(p), "1/rank": Placement.one_per_rank(p), "looped": Placement.looped(p, 2)}


def schedule_row(profile: Profile, p: int, m: int, budget: float, gantt_dir: Path | None) -> dict[str, Any]:
    placements = hyperframe_placements(p)
    bound = min(lb_tight(costs_for(profile, pl, p), pl, m) for pl in placements.values())
    row: dict[str, Any] = {"profile": profile.name, "p": p, "m": m, "lb_tight": bound, "torch": {}}
    for name in BASELINE_NAMES:
        try:
            b = baseline(name, p, m)
        except ScheduleError:
            row["torch"][name] = None
            continue
        result = simulate(b.orders, b.placement, costs_for(profile, b.placement, p), m)
        row["torch"][name] = {"makespan": result.makespan, "memory": max(result.peak_memory)}
    best: tuple[float, str, Any, Placement] | None = None
    for label, placement in placements.items():
        costs = costs_for(profile, placement, p)
        planned = plan(costs, placement, m, time_budget_s=budget)
        if best is None or planned.predicted_makespan < best[0] - 1e-9:
            best = (planned.predicted_makespan, label, planned, placement)
    assert best is not None
    makespan, label, planned, placement = best
    replay = simulate(planned.orders, placement, costs_for(profile, placement, p), m)
    row["hyperframe"] = {"makespan": makespan, "memory": max(replay.peak_memory), "placement": label}
    if gantt_dir is not None:
        gantt_dir.mkdir(parents=True, exist_ok=True)
        path = gantt_dir / f"hyperframe-{profile.name}-p{p}-m{m}.svg"
        title = f"HyperFrame plan, {profile.describe}, p={p}, m={m}, {label} placement: makespan/LB_tight {makespan / bound:.3f}"
        write_gantt_svg(replay, path, title=title)
    return row


def print_schedule_table(rows: list[dict[str, Any]], profile: Profile) -> None:
    names = [SHORT[n] for n in BASELINE_NAMES]
    print(f"\n#### {profile.name}: {profile.describe}\n")
    print("| p | m | " + " | ".join(names) + " | HyperFrame | HF / best torch | peak mem 1F1B / HF |")
    print("|---|---|" + "---|" * (len(names) + 3))
    for row in rows:
        cells = []
        for name in BASELINE_NAMES:
            entry = row["torch"][name]
            cells.append("n/a" if entry is None else f"{entry['makespan'] / row['lb_tight']:.3f}")
        hf = row["hyperframe"]
        best_torch = min(e["makespan"] for e in row["torch"].values() if e is not None)
        mem_1f1b = row["torch"]["1F1B"]["memory"]
        print(
            f"| {row['p']} | {row['m']} | "
            + " | ".join(cells)
            + f" | **{hf['makespan'] / row['lb_tight']:.3f}** ({hf['placement']}) | {hf['makespan'] / best_torch:.3f}"
            + f" | {mem_1f1b:g} / {hf['memory']:g} |"
        )


def hetero_rows(budget: float) -> list[dict[str, Any]]:
    """Partitioner + planner on mixed devices against the best torch schedule on an even split."""
    layers_per_rank = 8
    out = []
    device_mixes: tuple[tuple[str, Callable[[int, int], float]], ...] = (
        ("one device 1.5x slower", lambda r, p: 1.5 if r == p // 2 else 1.0),
        ("two classes, speed 1.0 and 0.6", lambda r, p: 1.0 if r < p // 2 else 1 / 0.6),
    )
    for label, slow_of in device_mixes:
        for p in (4, 8):
            for m in (2 * p, 4 * p):
                slow = [slow_of(r, p) for r in range(p)]
                layer = [1.0 / layers_per_rank] * (layers_per_rank * p)
                torch_best = (float("inf"), "")
                for name in BASELINE_NAMES:
                    try:
                        b = baseline(name, p, m)
                    except ScheduleError:
                        continue
                    even = _even_split(len(layer), b.placement.num_stages)
                    costs = _layer_costs(layer, even, slow, b.placement)
                    makespan = simulate(b.orders, b.placement, costs, m).makespan
                    torch_best = min(torch_best, (makespan, name))
                candidates = []
                flat = partition_layers(layer, slow)
                candidates.append(("1/rank", Placement.one_per_rank(p), flat.boundaries))
                candidates.append(("V", Placement.vshape(p), vshape_partition(layer, slow).boundaries))
                hf_best = (float("inf"), "")
                for name, placement, bounds in candidates:
                    costs = _layer_costs(layer, bounds, slow, placement)
                    planned = plan(costs, placement, m, time_budget_s=budget)
                    hf_best = min(hf_best, (planned.predicted_makespan, name))
                out.append(
                    {
                        "devices": label,
                        "p": p,
                        "m": m,
                        "torch_best": torch_best[0],
                        "torch_name": torch_best[1],
                        "hyperframe": hf_best[0],
                        "hf_placement": hf_best[1],
                        "speedup": torch_best[0] / hf_best[0],
                    }
                )
    return out


def _even_split(n_layers: int, n_stages: int) -> tuple[int, ...]:
    return tuple(round(i * n_layers / n_stages) for i in range(n_stages + 1))


def _layer_costs(
    layer: list[float], bounds: tuple[int, ...], slow: list[float], placement: Placement
) -> CostModel:
    part = Partition(boundaries=bounds, stage_times=tuple(0.0 for _ in range(len(bounds) - 1)))
    return partition_costs(
        part,
        layer_forward=layer,
        layer_backward_input=layer,
        layer_backward_weight=layer,
        layer_activation=layer,
        rank_slowdown=slow,
    )


def planner_time(p: int, m: int, placement: Placement, repeats: int = 5) -> float:
    share = 1.0 / (placement.num_stages // p)
    costs = CostModel.uniform(placement.num_stages, f=share, i=share, w=share)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        plan(costs, placement, m)
        times.append(time.perf_counter() - start)
    return min(times)  # the least-disturbed run on a shared machine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.schedules", description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=0.2, help="planner time budget per plan (s)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--gantt-dir", type=Path, help="write an SVG per p=4 row here")
    parser.add_argument("--quick", action="store_true", help="p=4 only, no planner-time run")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"budget_s": args.budget, "schedules": [], "hetero": [], "planner_time": {}}
    ratios, worst = [], 0.0
    ps = (4,) if args.quick else (4, 8)
    for profile in PROFILES:
        rows = []
        for p in ps:
            for m in (p, 2 * p, 4 * p):
                gantt = args.gantt_dir if (args.gantt_dir and p == 4 and m == 2 * p) else None
                row = schedule_row(profile, p, m, args.budget, gantt)
                rows.append(row)
                best_torch = min(e["makespan"] for e in row["torch"].values() if e is not None)
                ratios.append(row["hyperframe"]["makespan"] / row["lb_tight"])
                worst = max(worst, row["hyperframe"]["makespan"] / best_torch)
        print_schedule_table(rows, profile)
        results["schedules"].extend(rows)
    print(
        f"\nHyperFrame mean makespan/LB_tight: {statistics.mean(ratios):.4f}; worst HF / best torch: {worst:.3f}"
    )
    results["mean_ratio"], results["worst_vs_torch"] = statistics.mean(ratios), worst
    print("\n#### With the partitioner (heterogeneous devices; torch schedules on an even layer split)\n")
    print("| devices | p | m | best torch (even split) | HyperFrame (partitioned) | speedup |")
    print("|---|---|---|---|---|---|")
    for row in hetero_rows(args.budget) if not args.quick else []:
        results["hetero"].append(row)
        print(
            f"| {row['devices']} | {row['p']} | {row['m']} | {row['torch_best']:.3f} ({SHORT[row['torch_name']]}) "
            f"| {row['hyperframe']:.3f} ({row['hf_placement']}) | **{row['speedup']:.2f}x** |"
        )
    if not args.quick:
        print("\n#### Planner time (default budget 0.2 s, best of 5, shared CPU)\n")
        for label, placement in (("1/rank", Placement.one_per_rank(64)), ("V", Placement.vshape(64))):
            seconds = planner_time(64, 256, placement)
            results["planner_time"][label] = seconds
            print(f"- p=64, m=256, {label} placement ({placement.num_stages} stages): {seconds:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
