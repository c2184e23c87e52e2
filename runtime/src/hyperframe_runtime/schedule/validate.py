"""Structural, dependency and deadlock checks for per-rank orders.

The dependency rules (the single source of truth, used by the simulator and the planner too):

* ``F(s, mb)`` needs ``F(s-1, mb)``;
* ``I(s, mb)`` and ``B(s, mb)`` need ``F(s, mb)`` and the input gradient of stage ``s+1``, i.e.
  whichever of ``I(s+1, mb)`` or ``B(s+1, mb)`` the orders contain (the last stage computes its loss
  inside F, so it only needs its own F);
* ``W(s, mb)`` needs ``I(s, mb)``.

Errors print the rank x step grid and mark the offending step with ``>...<``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hyperframe_runtime.schedule.ir import Action, OpKind, Orders, Placement, ScheduleError

__all__ = [
    "backward_kinds",
    "check_deadlock",
    "check_structure",
    "compute_orders",
    "format_grid",
    "predecessors",
    "validate",
]

_GRID_WINDOW = 8


def compute_orders(orders: Orders) -> Orders:
    """The orders without comm actions (the simulator models comm as latency)."""
    return {rank: [a for a in actions if a.kind.is_compute] for rank, actions in orders.items()}


def backward_kinds(orders: Orders) -> dict[tuple[int, int], OpKind]:
    """``(stage, microbatch) -> I or B``: which op produces that stage's input gradient."""
    kinds: dict[tuple[int, int], OpKind] = {}
    for actions in orders.values():
        for a in actions:
            if a.kind.is_backward:
                kinds[(a.stage, a.microbatch)] = a.kind
    return kinds


def predecessors(
    action: Action, num_stages: int, grad_kind: Mapping[tuple[int, int], OpKind]
) -> tuple[Action, ...]:
    """The actions ``action`` depends on (see the module docstring)."""
    s, mb = action.stage, action.microbatch
    if action.kind is OpKind.F:
        return (Action(s - 1, OpKind.F, mb),) if s > 0 else ()
    if action.kind.is_backward:
        own = Action(s, OpKind.F, mb)
        if s == num_stages - 1:
            return (own,)
        return (own, Action(s + 1, grad_kind.get((s + 1, mb), OpKind.I), mb))
    if action.kind is OpKind.W:
        return (Action(s, OpKind.I, mb),)
    return ()


def format_grid(orders: Orders, marks: Iterable[tuple[int, int]] = ()) -> str:
    """Rank x step table of ``orders``; cells in ``marks`` ((rank, step)) are shown as ``>1I3<``.

    Long schedules are cut to a window of steps around the first mark.
    """
    marked = set(marks)
    ranks = sorted(orders)
    num_steps = max((len(orders[r]) for r in ranks), default=0)
    lo, hi = 0, num_steps
    if marked and num_steps > 2 * _GRID_WINDOW + 1:
        centre = min(step for _, step in marked)
        lo = max(0, centre - _GRID_WINDOW)
        hi = min(num_steps, centre + _GRID_WINDOW + 1)
    elif num_steps > 4 * _GRID_WINDOW:
        hi = 4 * _GRID_WINDOW

    def cell(rank: int, step: int) -> str:
        actions = orders[rank]
        text = str(actions[step]) if step < len(actions) else ""
        return f">{text}<" if (rank, step) in marked else text

    cells = {(r, k): cell(r, k) for r in ranks for k in range(lo, hi)}
    width = max([len(c) for c in cells.values()] + [len(str(hi)), 3]) + 1
    header = "step".ljust(8) + "".join(str(k).rjust(width) for k in range(lo, hi))
    lines = [header]
    for r in ranks:
        lines.append(f"rank {r}".ljust(8) + "".join(cells[(r, k)].rjust(width) for k in range(lo, hi)))
    if lo > 0 or hi < num_steps:
        lines.append(f"(steps {lo}..{hi - 1} of {num_steps} shown)")
    return "\n".join(lines)


def _fail(message: str, orders: Orders, marks: Iterable[tuple[int, int]]) -> ScheduleError:
    return ScheduleError(f"{message}\n{format_grid(orders, marks)}")


def check_structure(orders: Orders, placement: Placement, num_microbatches: int) -> None:
    """Every action is on its stage's rank, in range, and each (stage, mb) runs F once and either
    B once or I and W once."""
    if num_microbatches < 1:
        raise ScheduleError(f"num_microbatches = {num_microbatches}: must be >= 1")
    orders = compute_orders(orders)
    unknown = sorted(set(orders) - set(range(placement.num_ranks)))
    if unknown:
        raise ScheduleError(
            f"orders name ranks {unknown} but the placement has ranks 0..{placement.num_ranks - 1}"
        )
    seen: dict[Action, tuple[int, int]] = {}
    n_stages = placement.num_stages
    for rank in sorted(orders):
        for step, a in enumerate(orders[rank]):
            problem = None
            if a.stage >= n_stages:
                problem = f"names stage {a.stage} but there are {n_stages} stages"
            elif a.microbatch >= num_microbatches:
                problem = f"names micro-batch {a.microbatch} but there are {num_microbatches}"
            elif placement.stage_to_rank[a.stage] != rank:
                problem = f"is on the wrong rank: stage {a.stage} belongs to rank {placement.stage_to_rank[a.stage]}"
            if problem is not None:
                raise _fail(f"rank {rank} step {step}: {a} {problem}", orders, [(rank, step)])
            if a in seen:
                raise _fail(f"rank {rank} step {step}: {a} appears twice", orders, [seen[a], (rank, step)])
            seen[a] = (rank, step)
    kinds_of: dict[tuple[int, int], set[OpKind]] = {}
    for a in seen:
        kinds_of.setdefault((a.stage, a.microbatch), set()).add(a.kind)
    full = {OpKind.F, OpKind.I, OpKind.W}
    for s in range(n_stages):
        rank = placement.stage_to_rank[s]
        for mb in range(num_microbatches):
            has = kinds_of.get((s, mb), set())
            if has == full or has == {OpKind.F, OpKind.B}:
                continue
            if OpKind.F not in has:
                problem = f"{Action(s, OpKind.F, mb)} is missing"
            elif OpKind.B in has:
                problem = f"stage {s} micro-batch {mb} has both B and I/W; use B alone or I and W"
            else:
                missing = [str(Action(s, k, mb)) for k in (OpKind.I, OpKind.W) if k not in has]
                problem = (
                    f"{' and '.join(missing)} missing: each micro-batch needs B, or I and W, on every stage"
                )
            raise _fail(f"rank {rank}: {problem}", orders, [])


def check_deadlock(orders: Orders, placement: Placement) -> None:
    """Run the orders on dependencies alone; raise with the grid if some rank can never proceed."""
    orders = compute_orders(orders)
    grad_kind = backward_kinds(orders)
    position = {a: (rank, step) for rank, actions in orders.items() for step, a in enumerate(actions)}
    done: set[Action] = set()
    pointer = dict.fromkeys(orders, 0)
    waiting: dict[Action, list[int]] = {}
    work = list(orders)
    while work:
        rank = work.pop()
        actions = orders[rank]
        while pointer[rank] < len(actions):
            a = actions[pointer[rank]]
            blocker = next(
                (d for d in predecessors(a, placement.num_stages, grad_kind) if d not in done), None
            )
            if blocker is not None:
                waiting.setdefault(blocker, []).append(rank)
                break
            done.add(a)
            pointer[rank] += 1
            work.extend(waiting.pop(a, ()))
    stuck = [r for r in sorted(orders) if pointer[r] < len(orders[r])]
    if not stuck:
        return
    marks = [(r, pointer[r]) for r in stuck]
    lines = []
    for r in stuck:
        a = orders[r][pointer[r]]
        blocker = next(d for d in predecessors(a, placement.num_stages, grad_kind) if d not in done)
        if blocker in position:
            br, bs = position[blocker]
            lines.append(f"rank {r} step {pointer[r]}: {a} waits for {blocker} (rank {br} step {bs})")
        else:
            lines.append(f"rank {r} step {pointer[r]}: {a} waits for {blocker}, which no rank runs")
    raise _fail("deadlock: " + "; ".join(lines), orders, marks)


def validate(orders: Orders, placement: Placement, num_microbatches: int) -> None:
    """Raise a ScheduleError (with the grid) unless the orders are complete and deadlock-free."""
    check_structure(orders, placement, num_microbatches)
    check_deadlock(orders, placement)
