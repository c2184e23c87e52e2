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

Rows run p = 4 and 8 with m = p, 2p, 4p, and p = 16, 32, 64 with m = p and 4p. Each row names the
best torch schedule overall and the best one that fits 1F1B's peak memory (the planner's default
budget); the summary names the worst row against each.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperframe_runtime.schedule.baselines import BASELINE_NAMES, Baseline, baseline
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.gantt import write_gantt_svg
from hyperframe_runtime.schedule.ir import Placement, ScheduleError
from hyperframe_runtime.schedule.planner import default_memory_limit, plan
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
    slow_of: Callable[[int, int], float] = lambda r, p: 1.0
    """Time multiplier of rank r of p."""


def _heavy(c: int, p: int) -> float:
    return 0.5 + (0.4 if c == 2 * p - 1 else 0.0)


def _even(c: int, p: int) -> float:
    return 0.5


PROFILES = (
    Profile("uniform", "F = I = W on every stage", _even, _even),
    Profile("heavy-last", "last stage 1.4x (F, I and W)", _heavy, _heavy),
    Profile("w-0.6f", "W = 0.6 F", _even, lambda c, p: 0.3),
    Profile("comm-heavy", "p2p = 0.3 F", _even, _even, p2p=0.3),
    Profile(
        "slow-device",
        "rank p/2 is 1.5x slower",
        _even,
        _even,
        slow_of=lambda r, p: 1.5 if r == p // 2 else 1.0,
    ),
    Profile(
        "two-class",
        "ranks p/2.. run at 0.6x speed",
        _even,
        _even,
        slow_of=lambda r, p: 1.0 if r < p // 2 else 1 / 0.6,
    ),
)

SIZES: tuple[tuple[int, tuple[int, ...]], ...] = (
    (4, (4, 8, 16)),
    (8, (8, 16, 32)),
    (16, (16, 64)),
    (32, (32, 128)),
    (64, (64, 256)),
)
"""(p, the m values) of the schedule rows."""


@functools.cache
def cached_baseline(name: str, p: int, m: int) -> Baseline | None:
    """Torch's orders depend on (p, m) only; every profile replays the same ones."""
    try:
        return baseline(name, p, m)
    except ScheduleError:
        return None


def costs_for(profile: Profile, placement: Placement, p: int) -> CostModel:
    """The profile's costs for a placement of its 2p chunks (merged in pairs for one per rank)."""
    f = [profile.chunk_f(c, p) for c in range(2 * p)]
    w = [profile.chunk_w(c, p) for c in range(2 * p)]
    act = [0.5] * (2 * p)
    if placement.num_stages == p:
        f, w, act = ([x[2 * s] + x[2 * s + 1] for s in range(p)] for x in (f, w, act))
    slow = tuple(profile.slow_of(r, p) for r in range(p))
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
        b = cached_baseline(name, p, m)
        if b is None:
            row["torch"][name] = None
            continue
        costs = costs_for(profile, b.placement, p)
        result = simulate(b.orders, b.placement, costs, m)
        row["torch"][name] = {
            "makespan": result.makespan,
            "memory": max(result.peak_memory),
            "fits": max(result.peak_memory) <= default_memory_limit(costs, b.placement, m) + 1e-9,
        }
    best: tuple[float, str, Any, Placement] | None = None
    for label, placement in placements.items():
        costs = costs_for(profile, placement, p)
        planned = plan(costs, placement, m, time_budget_s=budget)
        if best is None or planned.predicted_makespan < best[0] - 1e-9:
            best = (planned.predicted_makespan, label, planned, placement)
    assert best is not None
    makespan, label, planned, placement = best
    replay = simulate(planned.orders, placement, costs_for(profile, placement, p), m)
    row["hyperframe"] = {
        "makespan": makespan,
        "memory": max(replay.peak_memory),
        "placement": label,
        "source": planned.source,
    }
    if gantt_dir is not None:
        gantt_dir.mkdir(parents=True, exist_ok=True)
        path = gantt_dir / f"hyperframe-{profile.name}-p{p}-m{m}.svg"
        title = f"HyperFrame plan, {profile.describe}, p={p}, m={m}, {label} placement: makespan/LB_tight {makespan / bound:.3f}"
        write_gantt_svg(replay, path, title=title)
    return row


def best_torch(row: dict[str, Any], *, fitting: bool) -> tuple[float, str]:
    """Best torch makespan of a row (only those within 1F1B's peak memory if ``fitting``)."""
    entries = [
        (e["makespan"], n) for n, e in row["torch"].items() if e is not None and (e["fits"] or not fitting)
    ]
    return min(entries) if entries else (float("inf"), "")


def print_schedule_table(rows: list[dict[str, Any]], profile: Profile) -> None:
    names = [SHORT[n] for n in BASELINE_NAMES]
    print(f"\n#### {profile.name}: {profile.describe}\n")
    print(
        "| p | m | "
        + " | ".join(names)
        + " | HyperFrame | HF / best torch | HF / best torch in 1F1B memory | peak mem 1F1B / HF |"
    )
    print("|---|---|" + "---|" * (len(names) + 4))
    for row in rows:
        cells = []
        for name in BASELINE_NAMES:
            entry = row["torch"][name]
            mark = "" if entry is None or entry["fits"] else "*"
            cells.append("n/a" if entry is None else f"{entry['makespan'] / row['lb_tight']:.3f}{mark}")
        hf = row["hyperframe"]
        won = "seed" if hf["source"].startswith("torch") else "search"
        mem_1f1b = row["torch"]["1F1B"]["memory"]
        print(
            f"| {row['p']} | {row['m']} | "
            + " | ".join(cells)
            + f" | **{hf['makespan'] / row['lb_tight']:.3f}** ({hf['placement']}, {won})"
            + f" | {hf['makespan'] / best_torch(row, fitting=False)[0]:.3f}"
            + f" | {hf['makespan'] / best_torch(row, fitting=True)[0]:.3f}"
            + f" | {mem_1f1b:g} / {hf['memory']:g} |"
        )


def planner_time(
    placement: Placement, m: int, profile: Profile, repeats: int = 3
) -> tuple[float, float, str]:
    """Wall time of the first default-budget plan of this pipeline in the process (it builds the
    cached Action table), the best of ``repeats`` re-plans, and which candidate won."""
    p = placement.num_ranks
    costs = costs_for(profile, placement, p)
    times, source = [], ""
    for _ in range(repeats + 1):
        start = time.perf_counter()
        source = plan(costs, placement, m).source
        times.append(time.perf_counter() - start)
    return times[0], min(times[1:]), source  # the least-disturbed re-plan on a shared machine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.schedules", description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=0.2, help="planner time budget per plan (s)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--gantt-dir", type=Path, help="write an SVG per p=4 row here")
    parser.add_argument("--quick", action="store_true", help="p=4 only, no planner-time run")
    parser.add_argument("--max-p", type=int, default=64, help="largest p of the schedule rows")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"budget_s": args.budget, "schedules": [], "planner_time": []}
    sizes = [(p, ms) for p, ms in SIZES if p <= (4 if args.quick else args.max_p)]
    ratios: list[float] = []
    worst_all: tuple[float, str] = (0.0, "")
    worst_fit: tuple[float, str] = (0.0, "")
    for profile in PROFILES:
        rows = []
        for p, ms in sizes:
            for m in ms:
                gantt = args.gantt_dir if (args.gantt_dir and p == 4 and m == 2 * p) else None
                row = schedule_row(profile, p, m, args.budget, gantt)
                rows.append(row)
                hf = row["hyperframe"]["makespan"]
                ratios.append(hf / row["lb_tight"])
                where = f"{profile.name}, p = {p}, m = {m}"
                all_best, all_name = best_torch(row, fitting=False)
                fit_best, fit_name = best_torch(row, fitting=True)
                worst_all = max(worst_all, (hf / all_best, f"{where}, against {all_name}"))
                worst_fit = max(worst_fit, (hf / fit_best, f"{where}, against {fit_name}"))
        print_schedule_table(rows, profile)
        results["schedules"].extend(rows)
    print(
        "\n`*` marks a torch schedule above 1F1B's peak memory (the planner's default budget)."
        f"\n\nHyperFrame mean makespan / LB_tight over {len(ratios)} rows: {statistics.mean(ratios):.4f}. "
        f"Worst row against the best torch schedule within 1F1B's memory: **{worst_fit[0]:.4f}** "
        f"({worst_fit[1]}); against any torch schedule: **{worst_all[0]:.4f}** ({worst_all[1]})."
    )
    results["mean_ratio"] = statistics.mean(ratios)
    results["worst_vs_fitting_torch"], results["worst_vs_any_torch"] = list(worst_fit), list(worst_all)
    if not args.quick:
        print("\n#### Planner time (default budget 0.2 s; first plan / best of 3 re-plans; shared CPU)\n")
        print("| p | m | profile | 1/rank | V | looped |")
        print("|---|---|---|---|---|---|")
        by_name = {pr.name: pr for pr in PROFILES}
        for p, m, name in (
            (16, 64, "uniform"),
            (32, 128, "uniform"),
            (64, 256, "uniform"),
            (64, 256, "two-class"),
        ):
            cells = []
            for label, placement in hyperframe_placements(p).items():
                first, again, source = planner_time(placement, m, by_name[name])
                results["planner_time"].append(
                    {
                        "p": p,
                        "m": m,
                        "profile": name,
                        "placement": label,
                        "first_s": first,
                        "replan_s": again,
                        "source": source,
                    }
                )
                cells.append(f"{first:.2f} / {again:.2f} s")
            print(f"| {p} | {m} | {name} | {cells[1]} | {cells[0]} | {cells[2]} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
