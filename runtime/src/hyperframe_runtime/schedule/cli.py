"""``hyperframe-sched``: replay, plan and export pipeline schedules from the command line.

    hyperframe-sched replay ORDERS.csv --costs COSTS.yaml [--gantt out.svg]
    hyperframe-sched plan --p 4 --m 16 --costs COSTS.yaml [--placement vshape] -o plan.csv
    hyperframe-sched baseline ZBVZeroBubble --p 4 --m 16 -o zbv.csv
    hyperframe-sched trace TRACE_DIR/trace.json [--frame K] --gantt frame.svg

A cost file is YAML (or JSON) with the keys of :class:`CostModel`: ``forward``,
``backward_input``, ``backward_weight`` (one number per stage), and optionally ``rank_slowdown``,
``p2p``, ``allreduce``, ``activation`` (memory of one in-flight micro-batch per stage: bytes
when measured, e.g. by the runtime's calibration, which a plan's ``costs`` in its JSON carry;
peaks print in the same unit, next to 1F1B's on the same costs, the planner's default budget).

``trace`` reads a runtime ``trace.json``, also one a killed run left unclosed
(``schedule.tracefile``), lists its complete frames and draws one of them (default: the last
complete one) as a Gantt chart, one row per global rank.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.csvio import dump_orders_csv, load_orders_csv
from hyperframe_runtime.schedule.gantt import write_gantt_svg
from hyperframe_runtime.schedule.ir import Orders, Placement, ScheduleError
from hyperframe_runtime.schedule.planner import one_f_one_b_peaks
from hyperframe_runtime.schedule.simulate import lb_tight, lb_work, simulate
from hyperframe_runtime.schedule.tracefile import complete_frames, frame_spans, read_events

__all__ = ["main"]


def _load_costs(path: str) -> CostModel:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ScheduleError(f"--costs {path}: cannot read: {exc}") from exc
    if not isinstance(data, dict):
        raise ScheduleError(f"--costs {path}: expected a mapping with forward/backward_input/... keys")
    return CostModel.from_mapping(data)


def _placement(name: str, p: int, num_stages: int) -> Placement:
    if name == "auto":
        if num_stages == p:
            return Placement.one_per_rank(p)
        if num_stages == 2 * p:
            return Placement.vshape(p)
        raise ScheduleError(
            f"--placement auto: the cost file has {num_stages} stages for --p {p}; "
            f"give {p} (one per rank) or {2 * p} (V-shape), or pass --placement looped"
        )
    if name == "one":
        return Placement.one_per_rank(p)
    if name == "vshape":
        return Placement.vshape(p)
    if name == "looped":
        if num_stages % p:
            raise ScheduleError(f"--placement looped: {num_stages} stages do not divide over {p} ranks")
        return Placement.looped(p, num_stages // p)
    raise ScheduleError(f"--placement {name}: use auto, one, vshape or looped")


def _inferred_placement(orders: Orders) -> Placement:
    owner: dict[int, int] = {}
    for rank, actions in orders.items():
        for a in actions:
            if owner.setdefault(a.stage, rank) != rank:
                raise ScheduleError(f"stage {a.stage} appears on rank {owner[a.stage]} and rank {rank}")
    stages = sorted(owner)
    if stages != list(range(len(stages))):
        raise ScheduleError(f"orders name stages {stages}; expected 0..{len(stages) - 1}")
    return Placement(tuple(owner[s] for s in stages))


def _report(
    orders: Orders, placement: Placement, costs: CostModel, m: int, gantt: str | None, title: str
) -> None:
    result = simulate(orders, placement, costs, m)
    work, tight = lb_work(costs, placement, m), lb_tight(costs, placement, m)
    print(f"{title}: {placement.num_ranks} ranks, {placement.num_stages} stages, {m} micro-batches")
    print(f"makespan      {result.makespan:10.4f}")
    print(f"LB_work       {work:10.4f}   makespan/LB_work  {result.makespan / work:.4f}")
    print(f"LB_tight      {tight:10.4f}   makespan/LB_tight {result.makespan / tight:.4f}")
    print(f"bubble share  {100 * result.bubble_share:9.2f}%")
    baseline = one_f_one_b_peaks(costs, placement, m)
    unit = "costs.activation units" if costs.activation else "stage activations"
    print(f"rank       busy       idle   peak activation memory ({unit}), 1F1B's")
    for r in range(placement.num_ranks):
        print(
            f"{r:4d} {result.busy[r]:10.4f} {result.idle[r]:10.4f}   "
            f"{result.peak_memory[r]:12.6g} {baseline[r]:12.6g}"
        )
    print(
        f"peak activation memory {max(result.peak_memory):.6g}, 1F1B's {max(baseline):.6g} "
        f"(ratio {max(result.peak_memory) / max(baseline):.3f})"
    )
    print("peak in-flight micro-batches per stage: " + " ".join(str(n) for n in result.peak_inflight))
    if gantt:
        write_gantt_svg(result, gantt, title=title)
        print(f"wrote {gantt}")


def _replay(args: argparse.Namespace) -> None:
    orders = load_orders_csv(args.orders)
    placement = _inferred_placement(orders)
    for rank in range(placement.num_ranks):
        orders.setdefault(rank, [])
    m = args.m if args.m else 1 + max(a.microbatch for actions in orders.values() for a in actions)
    _report(orders, placement, _load_costs(args.costs), m, args.gantt, f"replay {args.orders}")


def _plan(args: argparse.Namespace) -> None:
    from hyperframe_runtime.schedule.planner import plan

    costs = _load_costs(args.costs)
    placement = _placement(args.placement, args.p, costs.num_stages)
    result = plan(
        costs,
        placement,
        args.m,
        memory_limit=args.memory_limit,
        time_budget_s=args.budget,
        split_backward=not args.no_split,
    )
    if args.output:
        dump_orders_csv(result.orders, args.output)
        print(f"wrote {args.output}")
    _report(
        result.orders,
        placement,
        costs,
        args.m,
        args.gantt,
        f"plan (memory limit {result.memory_limit:g}, best candidate: {result.source})",
    )


def _baseline(args: argparse.Namespace) -> None:
    from hyperframe_runtime.schedule.baselines import baseline

    orders = baseline(args.name, args.p, args.m).orders
    dump_orders_csv(orders, args.output)
    print(f"wrote {args.output}")


def _trace(args: argparse.Namespace) -> None:
    from hyperframe_runtime.schedule.gantt import gantt_svg

    events = read_events(args.trace)
    frames = complete_frames(events)
    if not frames:
        raise ScheduleError(f"{args.trace}: no complete frame in the trace")
    frame = args.frame if args.frame else frames[-1]
    if frame not in frames:
        raise ScheduleError(
            f"--frame {frame}: not a complete frame of {args.trace}; it has {_ranges(frames)}"
        )
    spans, num_ranks = frame_spans(events, frame)
    print(f"{args.trace}: {len(events)} events, complete frames {_ranges(frames)}")
    makespan = max(span.end for span in spans)
    print(f"frame {frame}: {num_ranks} ranks, {len(spans)} ops, {1e3 * makespan:.3f} ms")
    if args.gantt:
        title = f"{Path(args.trace).name} frame {frame} (measured)"
        Path(args.gantt).write_text(
            gantt_svg(spans, num_ranks, title=title, makespan=makespan), encoding="utf-8"
        )
        print(f"wrote {args.gantt}")


def _ranges(frames: Sequence[int]) -> str:
    """``1-3, 5`` for [1, 2, 3, 5]."""
    parts: list[str] = []
    start = prev = frames[0]
    for f in [*frames[1:], None]:
        if f is not None and f == prev + 1:
            prev = f
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if f is not None:
            start = prev = f
    return ", ".join(parts)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hyperframe-sched", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    replay = sub.add_parser("replay", help="replay a compute-only CSV against a cost file")
    replay.add_argument("orders", help="CSV, one row of actions (0F0,0I0,...) per rank")
    replay.add_argument("--costs", required=True, help="cost file (YAML or JSON)")
    replay.add_argument("--m", type=int, default=0, help="micro-batches (default: inferred from the CSV)")
    replay.add_argument("--gantt", help="write an SVG Gantt chart here")
    replay.set_defaults(func=_replay)
    planner = sub.add_parser("plan", help="plan orders from a cost file")
    planner.add_argument("--p", type=int, required=True, help="pipeline ranks")
    planner.add_argument("--m", type=int, required=True, help="micro-batches per frame")
    planner.add_argument("--costs", required=True, help="cost file (YAML or JSON), one entry per stage")
    planner.add_argument("--placement", default="auto", help="auto (default), one, vshape or looped")
    planner.add_argument("--memory-limit", type=float, default=None, help="per-rank activation budget")
    planner.add_argument("--budget", type=float, default=0.2, help="search budget in seconds (deterministic)")
    planner.add_argument("--no-split", action="store_true", help="plan fused B ops (no I/W split)")
    planner.add_argument("-o", "--output", help="write the orders as CSV here")
    planner.add_argument("--gantt", help="write an SVG Gantt chart here")
    planner.set_defaults(func=_plan)
    base = sub.add_parser("baseline", help="export one of torch's schedules as CSV")
    base.add_argument(
        "name",
        help="GPipe, 1F1B, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble or DualPipeV",
    )
    base.add_argument("--p", type=int, required=True)
    base.add_argument("--m", type=int, required=True)
    base.add_argument("-o", "--output", required=True)
    base.set_defaults(func=_baseline)
    trace = sub.add_parser("trace", help="draw a frame of a runtime trace.json (also a killed run's)")
    trace.add_argument("trace", help="trace.json written by the runtime (trace_dir)")
    trace.add_argument("--frame", type=int, default=0, help="frame to draw (default: the last complete one)")
    trace.add_argument("--gantt", help="write the frame's SVG Gantt chart here")
    trace.set_defaults(func=_trace)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        args.func(args)
    except ScheduleError as exc:
        print(f"hyperframe-sched: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
