"""Never slower, by measurement: which schedule the hyperframe policy runs in each frame.

The planner's cost model is a model. What counts is the wall time of a frame, so the hyperframe
policy treats its own plans and torch's schedules as candidates and keeps the fastest measured.
Decisions are data: :class:`Record` holds everything measured and decided so far (immutable, and
saved in every snapshot as JSON), :func:`next_step` reads the record and names the next frame's
schedule without changing anything, and :func:`observe` and the other transitions take a record
and return the next one and a :class:`Verdict`. :class:`ScheduleSelector` is the one-field shell
the run holds. No torch, no clock, no collectives: a resumed run that loads the record makes the
very decisions the uninterrupted run would have.

1. **Explore** (the first frames). The candidates are measured in the order given (grouped by
   placement, so the stages move as few times as possible), each for :data:`MEASURED_FRAMES`
   frames, after one unmeasured warm-up frame when it needs another stage placement. The ready
   candidates of one placement take turns frame by frame, so that a burst of load on the host
   hits them alike. A candidate is dropped from exploring only on :data:`DROP_FRAMES` measured
   frames that are all over :data:`DROP_RATIO` times the best estimate so far (never on one
   frame), and a dropped one can still be re-checked later. When the planner's candidate on a
   placement is next, it is planned in the background from the costs measured so far; the plan
   arrives a fixed number of frames later (``pipeline.measured_choice``), and meanwhile the frames
   run the best schedule measured on the current placement.
2. **Exploit.** The fastest by :func:`estimate` (the median of the last :data:`ESTIMATE_FRAMES`
   measured frames, so neither one lucky nor one slow frame decides) wins, among the candidates
   on the first placement explored: another placement's frames ran in other frames, under
   another load, so they never decide alone. A candidate there that measured faster gets its
   paired cross-placement re-checks (step 3) back to back from the first exploiting frames, and
   takes over only when they show it :data:`PLACEMENT_MARGIN` faster. Candidates on the winner's placement within :data:`TIE_MARGIN` of it are a tie: of
   those, the one with the lowest predicted activation peak runs. When the winner is not the
   planner's plan the log says so, with the measured and predicted frame times of both.
3. **Paired checks.** Every later comparison is paired: a check frame and the winner's measured
   frames just before and after it, whose ratio a load change hits on both sides alike. From
   :data:`RECHECK_PAIRS` pairs on, :func:`paired_verdict` decides (the median log ratio give or
   take one robust standard error, against a margin). Three kinds:

   - *re-check*: the best other schedule on the winner's placement, one frame in
     :data:`RECHECK_EVERY` (:data:`RECHECK_FIRST_EVERY` until its first verdict is due), margin
     :data:`RECHECK_MARGIN`;
   - *cross-placement re-check*: the best measured schedule on another placement, one round trip
     in :data:`CROSS_RECHECK_EVERY` winner frames (a warm-up frame there, a measured one, a
     warm-up frame back), or one after every winner frame while it measured faster than the
     winner and has fewer than :data:`RECHECK_PAIRS` pairs; margin :data:`PLACEMENT_MARGIN`,
     which pays for the stage moves;
   - *challenge*: a re-plan on cost drift (step 4), alternating frame by frame with the winner,
     margin :data:`RECHECK_MARGIN`. A re-plan of the winner itself is measured against the order
     it would replace, never swapped in unmeasured.

   A check that ends behind the winner (band above the margin, or :data:`RECHECK_LIMIT` pairs
   without a verdict) is settled against that winner: it is not checked again until the winner
   changes or :data:`REVISIT_FRAMES` frames have passed. Every choice can be revisited.
4. **Re-plan on drift.** When the largest relative drift of the op costs exceeds
   :data:`DRIFT_THRESHOLD` for the needed number of frames in a row (and at least
   ``replan_every`` frames passed since the last plan), the planner's candidate on the winner's
   placement is re-planned and challenges. A re-plan that changes nothing (the same order as the
   candidate it would replace or as any other ready schedule, or a challenger that lost) doubles
   the drifted frames the next one needs, up to :data:`DRIFT_FRAMES_MAX`, whoever is winning; a
   challenger that wins resets it.

All ranks feed the selector the same numbers (the slowest rank's frame time, all-gathered), so
they make the same choice in the same frame.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from hyperframe_runtime.pipeline.selection_record import (
    DRIFT_FRAMES,
    Candidate,
    Check,
    Record,
    Role,
    Step,
    Verdict,
)
from hyperframe_runtime.schedule.ir import Placement

__all__ = [
    "CROSS_RECHECK_EVERY",
    "DRIFT_FRAMES",
    "DRIFT_FRAMES_MAX",
    "DRIFT_THRESHOLD",
    "DROP_FRAMES",
    "DROP_RATIO",
    "ESTIMATE_FRAMES",
    "MEASURED_FRAMES",
    "PLACEMENT_MARGIN",
    "RECHECK_EVERY",
    "RECHECK_FIRST_EVERY",
    "RECHECK_LIMIT",
    "RECHECK_MARGIN",
    "RECHECK_PAIRS",
    "REVISIT_FRAMES",
    "TIE_MARGIN",
    "Candidate",
    "Check",
    "Record",
    "Role",
    "ScheduleSelector",
    "Step",
    "Verdict",
    "estimate",
    "next_step",
    "observe",
    "paired_verdict",
]

MEASURED_FRAMES: Final = 3
"""Measured frames per candidate while exploring."""
ESTIMATE_FRAMES: Final = 5
"""A schedule's estimate is the median of its last this many measured frames."""
DROP_RATIO: Final = 1.25
"""A candidate whose first :data:`DROP_FRAMES` measured frames are all over this many times the
best estimate so far leaves the exploration (it may still be re-checked later)."""
DROP_FRAMES: Final = 2
"""Measured frames a drop needs: one slow frame is a burst of load, not evidence."""
PLACEMENT_MARGIN: Final = 0.05
"""A schedule on another placement must measure this much faster than the best on the winner's
placement to be chosen (at the end of exploring, or in paired cross-placement re-checks): 5 %,
over the 2 to 6 % by which two runs of one schedule differ on this project's CPU hosts, and the
price of the stage moves there and back."""
SKIP_RATIO: Final = 1.10
"""A candidate on a placement not yet measured is not measured at all when the calibrated cost
model predicts it (and every other candidate on that placement) above this many times the best
measured schedule: moving the stages there and back costs more than it could win."""
CALIBRATE_EVERY: Final = 10
"""While exploiting, one frame in this many gathers the op timings to keep the calibration (and
so the predicted frame time) current."""
DRIFT_THRESHOLD: Final = 0.20
"""Relative drift of a stage's measured op cost (per micro-batch, F + B) from the calibrated
costs that counts as a cost change. 20 %: on the shared CPU hosts of this project single frames
swing by more than 10 % without any change in the work."""
DRIFT_FRAMES_MAX: Final = 80
"""The most drifted frames a re-plan can need after re-plans that changed nothing."""
RECHECK_EVERY: Final = 10
"""While exploiting, one frame in this many re-checks the runner-up on the winner's placement."""
RECHECK_FIRST_EVERY: Final = 4
"""Until a runner-up has its first :data:`RECHECK_PAIRS` pairs, one frame in this many re-checks
it, so that a first choice that three exploring frames got wrong is undone about 20 frames
after exploring rather than 50."""
CROSS_RECHECK_EVERY: Final = 25
"""Winner frames between two cross-placement re-checks (each costs two stage moves)."""
RECHECK_PAIRS: Final = 5
"""Paired frames before the first verdict (see :func:`paired_verdict`). With 3, ``bench
real_cpu`` once read GPipe 18 % faster than 1F1B from three pairs while it measured 15 % slower."""
RECHECK_MARGIN: Final = 0.02
"""A runner-up or a re-plan must be 2 % faster than the winner in paired frames to take over;
2 % slower and it is settled behind the winner."""
RECHECK_LIMIT: Final = 15
"""Paired checks of one schedule against one winner at most: a tie within the margin stops
costing frames."""
REVISIT_FRAMES: Final = 300
"""Frames after which a schedule settled behind the winner is checked again (the host, or the
costs, may have changed since)."""
TIE_MARGIN: Final = 0.03
"""Candidates on one placement whose exploring estimates are within 3 % are a tie: three frames
each cannot order them on a host whose frames swing by 5 to 10 %."""


def paired_verdict(ratios: Sequence[float], margin: float = RECHECK_MARGIN) -> int:
    """-1 when paired frame ratios (challenger / winner) show the challenger faster by more than
    ``margin``, +1 when they show it slower by more than ``margin``, 0 while undecided.

    The centre is the median of the log ratios and the band one robust standard error either
    side (1.4826 x the median absolute deviation, x 1.253 / sqrt(n), the standard error of a
    median): a burst of load that hits one frame of a pair makes one outlier, which moves neither.
    """
    if not ratios:
        return 0
    logs = [math.log(r) for r in ratios]
    centre = statistics.median(logs)
    spread = 1.4826 * statistics.median(abs(x - centre) for x in logs)
    band = 1.253 * spread / math.sqrt(len(logs))
    if centre + band < math.log(1 - margin):
        return -1
    if centre - band > math.log(1 + margin):
        return 1
    return 0


def estimate(times: Sequence[float]) -> float:
    """A schedule's frame time from its measured frames: the median of the last
    :data:`ESTIMATE_FRAMES`. Not the fastest: that rewards the luckiest frame, and a schedule
    whose frames swing more would win on one lucky one."""
    return statistics.median(times[-ESTIMATE_FRAMES:])


def start(candidates: Sequence[Candidate]) -> Record:
    """The record before the first frame: everything to explore, torch's schedules ready."""
    names = [c.name for c in candidates]
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"candidates must have distinct names, got {names}")
    return Record(queue=tuple(names), ready=frozenset(c.name for c in candidates if not c.is_planner))


# ---- reading the record ------------------------------------------------------------------------
class _View:
    """The candidates by name, and the derived questions about a record (no state of its own)."""

    def __init__(self, candidates: Sequence[Candidate], record: Record) -> None:
        self.by_name = {c.name: c for c in candidates}
        self.candidates = candidates
        self.r = record

    def place(self, name: str) -> Placement:
        return self.by_name[name].placement

    def measured(self) -> dict[str, float]:
        return {n: estimate(t) for n, t in self.r.times.items() if t and n not in self.r.excluded}

    def best_measured(self, prefer: Placement | None = None) -> str:
        measured = self.measured()
        if not measured:
            return ""
        here = [n for n in measured if self.place(n) == prefer]
        return min(here or measured, key=lambda n: measured[n])

    def open_for_check(self, name: str) -> bool:
        r = self.r
        settled_at = r.settled.get(name)
        return (
            name != r.winner
            and name in r.ready
            and name not in r.excluded
            and bool(r.times.get(name))
            and (settled_at is None or r.frames - settled_at >= REVISIT_FRAMES)
        )

    def runner_up(self, *, same_placement: bool) -> str:
        """The best measured schedule open for a check on (or off) the winner's placement."""
        home = self.place(self.r.winner)
        measured = self.measured()
        others = [n for n in measured if self.open_for_check(n) and (self.place(n) == home) == same_placement]
        return min(others, key=lambda n: measured[n]) if others else ""


def next_step(candidates: Sequence[Candidate], record: Record) -> Step:
    """What the next frame runs (pure: the record is not changed; :func:`observe` takes the step)."""
    view = _View(candidates, record)
    name, role = _choose(view)
    placement = view.place(name)
    warm = placement != record.placement
    measuring = role in ("explore", "challenge")
    gather = not warm and (
        measuring or placement not in record.calibrated or record.since_gather + 1 >= CALIBRATE_EVERY
    )
    checking = role in ("recheck", "cross")
    return Step(name=name, warm=warm, exploring=measuring or checking or warm, gather=gather, role=role)


def _choose(view: _View) -> tuple[str, Role]:
    r = view.r
    if r.winner:
        return _choose_exploiting(view)
    for head in r.queue:
        if head in r.excluded or _not_worth_moving(view, head):
            continue
        if head in r.ready:
            return _turn(view, head), "explore"
        # The planner's candidate is being planned: run the best measured schedule on the current
        # placement meanwhile (no move), else the best measured anywhere.
        return (view.best_measured(prefer=r.placement) or head), "wait"
    return _decide(view)[0], "exploit"


def _choose_exploiting(view: _View) -> tuple[str, Role]:
    r = view.r
    if r.check is not None:
        return r.winner, "exploit"  # the winner's frame after the check closes the pair
    if not r.recent:  # a pair needs the winner's frame before it
        return r.winner, "exploit"
    if r.challenger:
        return r.challenger, "challenge"
    runner = view.runner_up(same_placement=True)
    every = RECHECK_EVERY if len(r.pairs.get(runner, ())) >= RECHECK_PAIRS else RECHECK_FIRST_EVERY
    if runner and r.since_recheck >= every:
        return runner, "recheck"
    far = view.runner_up(same_placement=False)
    if far and r.since_cross >= (1 if _cross_due(view, far) else CROSS_RECHECK_EVERY):
        return far, "cross"
    return r.winner, "exploit"


def _cross_due(view: _View, far: str) -> bool:
    """``far`` (on another placement) measured faster than the winner but has no paired verdict
    against it yet: its round trips run back to back (after one winner frame each), so that a
    choice across placements is made from paired frames within about
    4 x :data:`RECHECK_PAIRS` frames, never from frames measured under another load."""
    r = view.r
    measured = view.measured()
    return (
        len(r.pairs.get(far, ())) < RECHECK_PAIRS
        and r.winner in measured
        and measured[far] < measured[r.winner]
    )


def _turn(view: _View, head: str) -> str:
    """Whose turn it is among the ready candidates queued on ``head``'s placement: the one with
    the fewest measured frames (queue order on ties), so a load burst hits them alike."""
    r, place = view.r, view.place(head)
    group = [n for n in r.queue if n in r.ready and n not in r.excluded and view.place(n) == place]
    return min(group, key=lambda n: len(r.times.get(n, ())))


def _not_worth_moving(view: _View, name: str) -> bool:
    """``name``'s placement was never measured and the model predicts every candidate there well
    above the best measured schedule (see :data:`SKIP_RATIO`)."""
    r, placement = view.r, view.place(name)
    if placement == r.placement or any(view.place(n) == placement for n in r.times):
        return False
    best = view.best_measured()
    there = [c.name for c in view.candidates if c.placement == placement and not c.is_planner]
    predicted = [r.predicted.get(n) for n in there]
    if not best or not there or any(p is None or p <= 0 for p in predicted):
        return False
    return min(p for p in predicted if p is not None) > SKIP_RATIO * estimate(r.times[best])


def _decide(view: _View) -> tuple[str, tuple[str, ...]]:
    """The winner when exploring ends, and why."""
    r = view.r
    measured = view.measured() or {n: estimate(t) for n, t in r.times.items() if t}
    winner = min(measured, key=lambda n: measured[n])
    events: list[str] = []
    winner = _break_tie(view, measured, winner, events)
    home = view.candidates[0].placement
    at_home = [n for n in measured if view.place(n) == home]
    if at_home and view.place(winner) != home:
        # Another placement's frames ran in other frames than the home's, under another load:
        # unpaired, so they never decide alone. Paired cross-placement re-checks do, from the
        # next frames on (see _cross_due).
        home_best = min(at_home, key=lambda n: measured[n])
        faster = measured[winner] <= (1 - PLACEMENT_MARGIN) * measured[home_best]
        events.append(
            f"{winner} measured {1e3 * measured[winner]:.1f} ms on another placement, "
            + ("" if faster else f"less than {PLACEMENT_MARGIN:.0%} faster than ")
            + f"{home_best} {1e3 * measured[home_best]:.1f} ms"
            + (" (in other frames, under other load)" if faster else "")
            + f": staying on {home_best}'s placement (paired cross-placement re-checks decide from here)"
        )
        winner = home_best
    ranking = ", ".join(f"{n} {1e3 * t:.1f} ms" for n, t in sorted(measured.items(), key=lambda x: x[1]))
    events.append(f"explored {len(measured)} schedules ({ranking}); running {winner}")
    if not view.by_name[winner].is_planner:
        for name in (n for n in measured if view.by_name[n].is_planner):
            events.append(_loss_reason(r, name, winner, measured))
    return winner, tuple(events)


def _break_tie(view: _View, measured: dict[str, float], winner: str, events: list[str]) -> str:
    """Of the candidates on the winner's placement within :data:`TIE_MARGIN` of it, the one with
    the lowest predicted activation peak."""
    peaks, place, best = view.r.peaks, view.place(winner), measured[winner]
    tied = [n for n in measured if view.place(n) == place and measured[n] <= (1 + TIE_MARGIN) * best]
    if len(tied) < 2 or any(n not in peaks for n in tied):
        return winner
    lean = min(tied, key=lambda n: (peaks[n], measured[n]))
    if lean == winner or peaks[lean] >= peaks[winner]:
        return winner
    events.append(
        f"{lean} and {winner} measured within {TIE_MARGIN:.0%} ({1e3 * measured[lean]:.1f} "
        f"and {1e3 * best:.1f} ms): a tie at this precision; {lean} has the lower activation "
        f"peak ({peaks[lean]:g} against {peaks[winner]:g} micro-batch "
        "activations per rank), paired re-checks decide from here"
    )
    return lean


def _loss_reason(r: Record, planned: str, winner: str, measured: Mapping[str, float]) -> str:
    got, best = measured[planned], measured[winner]
    text = (
        f"the planner's plan {planned} lost: measured {1e3 * got:.1f} ms/frame against "
        f"{winner} {1e3 * best:.1f} ms"
    )
    p_plan, p_win = r.predicted.get(planned), r.predicted.get(winner)
    if p_plan is None or p_win is None:
        return text + "; training runs on " + winner
    why = (
        "the cost model predicted it faster, so what it does not model (core contention, "
        "timing noise) decided"
        if p_plan < p_win
        else "the cost model also predicts it slower on this layout"
    )
    return (
        f"{text} (predicted {1e3 * p_plan:.1f} ms against {1e3 * p_win:.1f} ms): {why}; "
        f"training runs on {winner}"
    )


# ---- transitions ---------------------------------------------------------------------------------
_KEPT_TIMES: Final = 16
"""Measured frames kept per candidate (the estimate reads the last :data:`ESTIMATE_FRAMES`)."""


def _append(times: Mapping[str, tuple[float, ...]], name: str, value: float) -> dict[str, tuple[float, ...]]:
    return {**times, name: (*times.get(name, ()), value)[-_KEPT_TIMES:]}


def observe(
    candidates: Sequence[Candidate], record: Record, step: Step, frame_s: float
) -> tuple[Record, Verdict]:
    """The record after the frame that ran ``step`` took ``frame_s`` (the slowest rank's time)."""
    view = _View(candidates, record)
    r = replace(
        record,
        placement=view.place(step.name),
        frames=record.frames + 1,
        since_plan=record.since_plan + 1,
        since_gather=0 if step.gather else record.since_gather + 1,
        explore_s=record.explore_s + ((frame_s,) if step.exploring and record.frames else ()),
    )
    r, verdict = _measured(r, step, frame_s)
    if r.winner:
        return r, verdict
    r, skipped = _skip_unworthy(candidates, r)
    winner, decided = _decide_if_done(candidates, r)
    if winner:
        r = replace(r, winner=winner, queue=())
    return r, replace(verdict, events=(*verdict.events, *skipped, *decided))


def _measured(r: Record, step: Step, frame_s: float) -> tuple[Record, Verdict]:
    """Record the frame's time where its role puts it."""
    if step.warm:
        return r, Verdict()
    if step.role == "explore":
        return _explored(r, step.name, frame_s)
    if step.role in ("recheck", "cross", "challenge"):
        before = r.recent[-1] if r.recent else frame_s
        times = r.times if step.challenge else _append(r.times, step.name, frame_s)
        return replace(r, times=times, check=Check(step.name, step.role, before, frame_s)), Verdict()
    if step.role == "wait" or step.name != r.winner:
        if step.name in r.ready:  # not the unit-cost stand-in of a plan still being made
            r = replace(r, times=_append(r.times, step.name, frame_s))
        return r, Verdict()
    r = replace(r, recent=(*r.recent, frame_s)[-ESTIMATE_FRAMES:], times=_append(r.times, step.name, frame_s))
    verdict = Verdict()
    if r.check is not None:
        r, verdict = _settle(r, frame_s)
    return replace(r, since_recheck=r.since_recheck + 1, since_cross=r.since_cross + 1), verdict


def _decide_if_done(candidates: Sequence[Candidate], r: Record) -> tuple[str, tuple[str, ...]]:
    """The winner and why, once nothing is left to explore ("" while exploring goes on)."""
    view = _View(candidates, r)
    if r.winner or not r.times:
        return "", ()
    for head in r.queue:
        if head in r.excluded or _not_worth_moving(view, head):
            continue
        return "", ()
    return _decide(view)


def _explored(r: Record, name: str, frame_s: float) -> tuple[Record, Verdict]:
    times = _append(r.times, name, frame_s)
    r = replace(r, times=times)
    mine = times[name]
    others = {n: estimate(t) for n, t in times.items() if t and n != name and n not in r.excluded}
    best = min(others, key=lambda n: others[n]) if others else ""
    slow = bool(best) and min(mine) > DROP_RATIO * others[best]
    if DROP_FRAMES <= len(mine) < MEASURED_FRAMES and slow:
        event = (
            f"dropped {name}: its first {len(mine)} measured frames ("
            + ", ".join(f"{1e3 * t:.1f}" for t in mine)
            + f" ms) are all over {DROP_RATIO}x the best so far ({best} {1e3 * others[best]:.1f} ms)"
        )
        return replace(r, queue=tuple(n for n in r.queue if n != name)), Verdict((event,))
    if len(mine) >= MEASURED_FRAMES:
        r = replace(r, queue=tuple(n for n in r.queue if n != name))
    return r, Verdict()


def _skip_unworthy(candidates: Sequence[Candidate], r: Record) -> tuple[Record, list[str]]:
    """Exclude for good the queue's next candidates that are not worth moving to (in queue order,
    up to the first one that will run: as its turn comes, with the best measured by then)."""
    view = _View(candidates, r)
    skipped: list[str] = []
    events: list[str] = []
    for head in r.queue:
        if head in r.excluded:
            continue
        if not _not_worth_moving(view, head):
            break
        skipped.append(head)
        best = view.best_measured()
        there = [c.name for c in candidates if c.placement == view.place(head) and not c.is_planner]
        events.append(
            f"skipped {head}: the cost model predicts "
            + ", ".join(f"{n} {1e3 * r.predicted[n]:.1f} ms" for n in there)
            + f" on its placement, over {SKIP_RATIO}x the best measured "
            f"({best} {1e3 * estimate(r.times[best]):.1f} ms)"
        )
    if not skipped:
        return r, events
    return replace(
        r, excluded=r.excluded | set(skipped), queue=tuple(h for h in r.queue if h not in skipped)
    ), events


def _settle(r: Record, after_s: float) -> tuple[Record, Verdict]:
    """A check frame and the winner's frames around it: record the paired ratio; decide."""
    assert r.check is not None
    check, winner = r.check, r.winner
    ratio = check.check_s / statistics.mean((check.before_s, after_s))
    key = _pair_key(check)
    pairs = (*r.pairs.get(key, ()), ratio)
    r = replace(r, check=None, pairs={**r.pairs, key: pairs})
    if check.role == "recheck":
        r = replace(r, since_recheck=0)
    elif check.role == "cross":
        r = replace(r, since_cross=0)
    if len(pairs) < RECHECK_PAIRS:
        return r, Verdict()
    margin = PLACEMENT_MARGIN if check.role == "cross" else RECHECK_MARGIN
    verdict = paired_verdict(pairs, margin)
    median = statistics.median(pairs)
    if verdict < 0:
        what = "re-planned " if check.role == "challenge" else ""
        event = (
            f"{_label(check.role)}: {what}{check.name} ran {100 * (1 - median):.1f}% faster than {winner} "
            f"in paired frames (median ratio {median:.3f} over {len(pairs)}); running {check.name}"
        )
        # A new winner: every other schedule is open to be checked against it.
        times = r.times
        if check.role == "challenge":  # the old times were another order's
            times = {**times, check.name: (check.check_s,)}
        r = replace(
            r,
            winner=check.name,
            excluded=r.excluded - {check.name},
            challenger="",
            times=times,
            recent=(check.check_s,),
            pairs={},
            settled={},
            since_recheck=0,
            since_cross=0,
            drift_needed=DRIFT_FRAMES if check.role == "challenge" else r.drift_needed,
        )
        return r, Verdict((event,), adopted=check.name if check.role == "challenge" else "")
    if verdict > 0 or len(pairs) >= RECHECK_LIMIT:
        tail = "" if verdict > 0 else f", no verdict at the {margin:.0%} margin"
        if check.role == "challenge":
            event = (
                f"re-planned {check.name} stays behind {winner} (median paired ratio {median:.3f} over "
                f"{len(pairs)} frames{tail}); its order is dropped"
            )
            r = replace(
                r,
                challenger="",
                pairs={k: v for k, v in r.pairs.items() if k != key},
                drift_needed=min(DRIFT_FRAMES_MAX, 2 * r.drift_needed),
            )
            return r, Verdict((event,), rejected=check.name)
        event = (
            f"{_label(check.role)}: {check.name} stays behind {winner} (median paired ratio {median:.3f} over "
            f"{len(pairs)} re-checks{tail}); not re-checked again against {winner} for {REVISIT_FRAMES} frames"
        )
        r = replace(
            r,
            settled={**r.settled, check.name: r.frames},
            pairs={k: v for k, v in r.pairs.items() if k != key},
        )
        return r, Verdict((event,))
    return r, Verdict()


def _pair_key(check: Check) -> str:
    return f"{check.name} (re-planned)" if check.role == "challenge" else check.name


def _label(role: Role) -> str:
    return {"recheck": "re-check", "cross": "cross-placement re-check", "challenge": "challenge"}[role]


def drop(record: Record, name: str, reason: str) -> tuple[Record, Verdict]:
    """Never run ``name`` again (torch's schedule over the memory budget, ``reason`` says by how
    much). The winner is kept."""
    if name in record.excluded or name == record.winner:
        return record, Verdict()
    times = {n: t for n, t in record.times.items() if n != name}
    return replace(record, excluded=record.excluded | {name}, times=times), Verdict(
        (f"{name} left out: {reason}",)
    )


def planning_started(record: Record) -> Record:
    return replace(record, planning=True)


def plans_ready(record: Record, names: Sequence[str]) -> Record:
    """The planner's plans for ``names`` arrived and run from the next frame. While exploring
    they are candidates to measure; after, a re-plan challenges the winner (even a re-plan of the
    winner itself: the new order is measured against the one it would replace)."""
    r = replace(record, planning=False, since_plan=0, drifted=0, ready=record.ready | set(names))
    if r.winner and names:
        r = replace(r, challenger=names[0], check=None)
    return r


def duplicate(record: Record, name: str, twin: str) -> tuple[Record, Verdict]:
    """The planner's plan ``name`` is the very order of ``twin`` (another schedule, or the plan it
    would replace): measuring it would only measure noise. While exploring it is left out; a
    re-plan that changed nothing backs off, whoever is winning."""
    r = replace(record, planning=False, drifted=0)
    if r.winner:
        r = replace(r, drift_needed=min(DRIFT_FRAMES_MAX, 2 * r.drift_needed))
        return r, Verdict((f"re-planned {name}: the same order as {twin}; nothing to measure",))
    return (
        replace(r, excluded=r.excluded | {name}),
        Verdict((f"{name} planned the same order as {twin}; not measured separately",)),
    )


def observe_drift(record: Record, drift: float, replan_every: int) -> tuple[Record, bool]:
    """Feed the largest relative cost drift of the frame; True when a re-plan is due now."""
    if not record.winner or record.planning or record.challenger:
        return record, False
    drifted = record.drifted + 1 if drift > DRIFT_THRESHOLD else 0
    due = drifted >= record.drift_needed and record.since_plan >= max(1, replan_every)
    return replace(record, drifted=0 if due else drifted), due


def needs_planning(record: Record) -> list[str]:
    """The planner candidate to plan now (it is next in line and has no plan yet), else []."""
    if record.planning or record.winner:
        return []
    head = next((h for h in record.queue if h not in record.excluded), "")
    return [head] if head and head not in record.ready else []


# ---- the shell the run holds ---------------------------------------------------------------------
@dataclass
class ScheduleSelector:
    """The run's current :class:`Record` and the candidates; each method applies one transition.
    ``events`` collects the verdicts' log lines (the frame loop drains it)."""

    candidates: Sequence[Candidate]
    replan_every: int = 1
    record: Record = field(default_factory=Record)
    events: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_name = {c.name: c for c in self.candidates}
        if not self.record.queue and not self.record.frames and not self.record.winner:
            self.record = start(self.candidates)

    @property
    def winner(self) -> str:
        return self.record.winner

    @property
    def exploring(self) -> bool:
        return self.record.exploring

    @property
    def times(self) -> Mapping[str, tuple[float, ...]]:
        return self.record.times

    @property
    def explore_s(self) -> tuple[float, ...]:
        return self.record.explore_s

    def placement_of(self, name: str) -> Placement:
        return self._by_name[name].placement

    def candidate(self, name: str) -> Candidate:
        return self._by_name[name]

    def _apply(self, update: tuple[Record, Verdict]) -> Verdict:
        self.record, verdict = update
        self.events.extend(verdict.events)
        return verdict

    def next_step(self) -> Step:
        return next_step(self.candidates, self.record)

    def observe(self, step: Step, frame_s: float) -> Verdict:
        return self._apply(observe(self.candidates, self.record, step, frame_s))

    def set_predicted(self, predicted: Mapping[str, float]) -> None:
        self.record = replace(self.record, predicted={**self.record.predicted, **predicted})

    def set_peaks(self, peaks: Mapping[str, float]) -> None:
        self.record = replace(self.record, peaks={**self.record.peaks, **peaks})

    def set_ready(self, names: Sequence[str]) -> None:
        self.record = replace(self.record, ready=self.record.ready | set(names))

    def calibrated(self, placement: Placement) -> None:
        self.record = replace(self.record, calibrated=self.record.calibrated | {placement})

    def drop(self, name: str, reason: str) -> None:
        self._apply(drop(self.record, name, reason))

    def needs_planning(self) -> list[str]:
        return needs_planning(self.record)

    def planning_started(self) -> None:
        self.record = planning_started(self.record)

    def plans_ready(self, names: Sequence[str]) -> None:
        self.record = plans_ready(self.record, names)

    def duplicate(self, name: str, twin: str) -> None:
        self._apply(duplicate(self.record, name, twin))

    def observe_drift(self, drift: float) -> bool:
        self.record, due = observe_drift(self.record, drift, self.replan_every)
        return due

    def replan_target(self) -> str:
        """The planner candidate on the winner's placement ("" if there is none)."""
        place = self.placement_of(self.winner)
        return next((c.name for c in self.candidates if c.is_planner and c.placement == place), "")

    def exploration_cost_s(self) -> float:
        """Seconds the exploring frames cost beyond running the winner: sum of (frame - winner
        median); frames faster than the median count negative, so timing noise cancels out."""
        r = self.record
        if not r.winner or not r.explore_s:
            return 0.0
        ref = statistics.median(r.recent or r.times.get(r.winner) or r.explore_s)
        return sum(t - ref for t in r.explore_s)
