"""Never slower, by measurement: which schedule the hyperframe policy runs in each frame.

The planner's cost model is a model. What counts is the wall time of a frame, so the hyperframe
policy treats its own plans and torch's schedules as candidates and keeps the fastest measured:

1. **Explore** (the first frames). The candidates are measured in the order given (grouped by
   placement, so the stages move as few times as possible), each for :data:`MEASURED_FRAMES`
   frames, after one unmeasured warm-up frame when it needs another stage placement (the first
   frame of a new placement includes torch's shape inference). The ready candidates of one
   placement take turns frame by frame, so that a burst of load on the host hits them alike. A candidate whose first measured
   frame is more than :data:`DROP_RATIO` times the best median so far is dropped after that
   frame. When the planner's candidate on a placement is next, it is planned in the background
   from the costs measured so far; while it plans, the frames run the best schedule measured on
   the current placement (not exploring: that is what would run anyway).
2. **Exploit.** The fastest (by :func:`_estimate`) wins and every following frame runs it; a
   candidate on another placement than the first one explored must be :data:`PLACEMENT_MARGIN`
   faster than the best there (a choice across placements is made from frames measured at
   different times and is not re-checked later, step 4). Candidates on the winner's placement
   that measured within :data:`TIE_MARGIN` of it are a tie at what three frames can tell apart:
   of those, the one with the lowest predicted activation peak runs (1F1B's p micro-batches in
   flight rather than GPipe's m), and the paired re-checks of step 4 take over from there. When
   the winner is not
   the planner's plan the log says so, with the measured and predicted frame times of both.
3. **Re-check on drift.** Each frame every rank compares its measured op costs with those the
   running schedule was measured or planned with. When the largest relative drift exceeds
   :data:`DRIFT_THRESHOLD` for :data:`DRIFT_FRAMES` frames in a row (and at least
   ``replan_every`` frames passed since the last plan), the op timings of that frame are gathered,
   the planner's candidate on the winner's placement is re-planned in the background and, when it
   arrives, measured for :data:`MEASURED_FRAMES` frames against the winner's recent median; the
   faster stays. A re-plan that changed nothing (the same order again, or a plan that lost)
   doubles the drifted frames the next one needs, up to :data:`DRIFT_FRAMES_MAX`; a plan that wins
   resets it. On a host whose load swings, costs "drift" all the time without a better order to
   be had, and each re-plan costs planning time on the host's cores.
4. **Re-check the runner-up, cheaply.** A few exploring frames decide between schedules that are
   often within a few per cent of each other, on a host whose frames swing by more. While
   exploiting, one frame in :data:`RECHECK_EVERY` (:data:`RECHECK_FIRST_EVERY` until the first
   verdict is due) runs the best other measured schedule on the winner's placement (an order
   swap, no stage move) and compares it with the winner's frames just before and after it: a paired ratio, which a load change hits on both sides alike. From
   :data:`RECHECK_PAIRS` pairs on, the ratios are tested (:func:`paired_verdict`: their median
   log ratio, give or take one robust standard error): when the whole band is below
   ``1 - RECHECK_MARGIN`` the runner-up becomes the winner; when it is above ``1 +
   RECHECK_MARGIN``, or after :data:`RECHECK_LIMIT` pairs, it is not re-checked again. A single
   noisy pair cannot switch the schedule: on this project's CPU hosts one pair swings by 5 to
   10 %, more than the differences being decided.

All ranks feed the selector the same numbers (the slowest rank's frame time, all-gathered), so
they make the same choice in the same frame. This module is pure: no torch, no collectives.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from hyperframe_runtime.schedule.ir import Placement

__all__ = [
    "DRIFT_FRAMES",
    "DRIFT_FRAMES_MAX",
    "DRIFT_THRESHOLD",
    "DROP_RATIO",
    "MEASURED_FRAMES",
    "PLACEMENT_MARGIN",
    "RECHECK_EVERY",
    "RECHECK_FIRST_EVERY",
    "RECHECK_LIMIT",
    "RECHECK_MARGIN",
    "RECHECK_PAIRS",
    "TIE_MARGIN",
    "Candidate",
    "ScheduleSelector",
    "Step",
    "paired_verdict",
]

MEASURED_FRAMES: Final = 3
"""Measured frames per candidate while exploring (and per challenger after a re-plan)."""
DROP_RATIO: Final = 1.25
"""A candidate whose first measured frame is this many times the best is not measured again."""
PLACEMENT_MARGIN: Final = 0.05
"""A schedule on another placement than the first explored must measure this much faster than
the best on the first placement to be chosen: 5 %, over the 2 to 6 % by which two runs of one
schedule differ on this project's CPU hosts (``bench real_cpu``'s noise floor)."""
SKIP_RATIO: Final = 1.10
"""A candidate on a placement not yet measured is not measured at all when the calibrated cost
model predicts it (and every other candidate on that placement) above this many times the best
measured schedule: moving the stages there and back costs more than it could win."""
CALIBRATE_EVERY: Final = 10
"""While exploiting, one frame in this many gathers the op timings to keep the calibration (and
so the predicted frame time) current."""
DRIFT_THRESHOLD: Final = 0.20
"""Relative drift of a stage's measured op cost (per micro-batch, F + B) from the costs the running
schedule was calibrated with that counts as a cost change. 20 %: on the shared CPU hosts of this
project single frames swing by more than 10 % without any change in the work."""
DRIFT_FRAMES: Final = 5
"""Consecutive drifted frames before a re-plan (one noisy frame is not a change)."""
DRIFT_FRAMES_MAX: Final = 80
"""The most drifted frames a re-plan can need after re-plans that changed nothing."""
RECHECK_EVERY: Final = 10
"""While exploiting, one frame in this many re-checks the runner-up on the winner's placement."""
RECHECK_FIRST_EVERY: Final = 4
"""Until a runner-up has its first :data:`RECHECK_PAIRS` pairs, one frame in this many re-checks
it: the same re-check frames as at :data:`RECHECK_EVERY`, but a first choice that three exploring
frames got wrong is undone after about 20 frames rather than 50."""
RECHECK_PAIRS: Final = 5
"""Paired re-checks before the first decision (see :func:`paired_verdict`). With 3, ``bench
real_cpu`` once read GPipe 18 % faster than 1F1B from three pairs while it measured 15 % slower:
a frame's cost there depends on which of the alternating policies ran before it, and three pairs
can all land on the same side of that."""
RECHECK_MARGIN: Final = 0.02
"""A runner-up must be 2 % faster than the winner in paired frames to take over; 2 % slower and
it is not re-checked again."""
RECHECK_LIMIT: Final = 15
"""Paired re-checks of one runner-up at most: a tie within the margin stops costing frames (one
frame in :data:`RECHECK_EVERY`, at a pace within the margin of the winner's)."""
TIE_MARGIN: Final = 0.03
"""Candidates on one placement whose exploring estimates are within 3 % are a tie: three frames
each cannot order them on a host whose frames swing by 5 to 10 %."""
_RECENT: Final = 5
"""Frames of the winner's recent history that a challenger is compared against."""


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


def _estimate(times: Sequence[float]) -> float:
    """A schedule's frame time from its measured frames: the fastest one.

    Interference from other work on the host only ever slows a frame down, in bursts, so with
    the few frames exploring can afford the fastest is the steadiest estimate of what the
    schedule itself costs (the median of three frames moves with one slow burst).
    """
    return min(times)


@dataclass(frozen=True)
class Candidate:
    """A schedule the hyperframe policy may run: torch's (``torch_schedule``) or the planner's."""

    name: str
    placement: Placement
    torch_schedule: str = ""
    """``schedule.baselines`` name; "" for the planner's plan on ``placement``."""

    @property
    def is_planner(self) -> bool:
        return not self.torch_schedule


@dataclass(frozen=True)
class Step:
    """What the next frame runs."""

    name: str
    warm: bool
    """An unmeasured warm-up frame (the first on a new placement)."""
    exploring: bool
    gather: bool
    """The frame's op timings must be gathered from every rank (to calibrate and plan)."""


@dataclass
class ScheduleSelector:
    """The explore / exploit / re-check state machine (see the module docstring)."""

    candidates: Sequence[Candidate]
    replan_every: int = 1
    start: str = ""
    """Resume: the schedule to exploit from the first frame, skipping exploration."""
    times: dict[str, list[float]] = field(default_factory=dict)
    predicted: dict[str, float] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)
    """Each candidate's predicted activation peak (the largest rank's, in any one unit for all
    candidates of a placement): the tie-break of :data:`TIE_MARGIN`."""
    ready: set[str] = field(default_factory=set)
    """Candidates that have a plan (torch's always do; the planner's once planned)."""
    calibrated: set[Placement] = field(default_factory=set)
    """Placements whose costs have been measured (by gathering op timings)."""
    placement: Placement | None = None
    """Placement of the frame that ran last (None before the first frame)."""
    winner: str = ""
    challenger: str = ""
    events: list[str] = field(default_factory=list)
    """Decisions to log, oldest first; the frame loop drains it."""
    explore_s: list[float] = field(default_factory=list)
    """Frame time of every exploring frame (for the exploration cost)."""
    _queue: list[str] = field(default_factory=list)
    _dropped: set[str] = field(default_factory=set)
    _planning: bool = False
    _first: bool = True
    _since_gather: int = 0
    _drifted: int = 0
    _drift_needed: int = DRIFT_FRAMES
    _since_plan: int = 0
    _recent: list[float] = field(default_factory=list)
    _since_recheck: int = 0
    _rechecking: str = ""
    _recheck_s: float = 0.0
    _before_s: float = 0.0
    _pairs: dict[str, list[float]] = field(default_factory=dict)
    _settled: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        names = [c.name for c in self.candidates]
        if len(set(names)) != len(names) or not names:
            raise ValueError(f"candidates must have distinct names, got {names}")
        self._by_name = {c.name: c for c in self.candidates}
        self.ready.update(c.name for c in self.candidates if not c.is_planner)
        if self.start:
            self.winner = self.start
            self.ready.add(self.start)
            return
        self._queue = list(names)

    # ---- what to run ---------------------------------------------------------------------------
    @property
    def exploring(self) -> bool:
        return not self.winner

    def placement_of(self, name: str) -> Placement:
        return self._by_name[name].placement

    def candidate(self, name: str) -> Candidate:
        return self._by_name[name]

    def next_step(self) -> Step:
        name = self._choose()
        placement = self.placement_of(name)
        warm = placement != self.placement
        # Frames that run the best schedule so far while the planner plans are not exploring.
        measuring = name == self.challenger or (not self.winner and name in self._queue)
        rechecking = bool(self.winner) and name == self._rechecking
        self._since_gather += 1
        gather = not warm and (
            measuring or placement not in self.calibrated or self._since_gather >= CALIBRATE_EVERY
        )
        if gather:
            self._since_gather = 0
        return Step(name=name, warm=warm, exploring=measuring or rechecking or warm, gather=gather)

    def _choose(self) -> str:
        if self.winner:
            if self.challenger:
                return self.challenger
            if self._rechecking:  # asked again before the frame ran (the loop's first plan)
                return self._rechecking if not self._recheck_s else self.winner
            runner = self._runner_up() if self._since_recheck >= RECHECK_FIRST_EVERY else ""
            every = (
                RECHECK_EVERY if len(self._pairs.get(runner, ())) >= RECHECK_PAIRS else RECHECK_FIRST_EVERY
            )
            if runner and self._since_recheck >= every:
                self._rechecking, self._since_recheck = runner, 0
                self._before_s = self._recent[-1] if self._recent else 0.0
                return runner
            return self.winner
        while self._queue:
            head = self._queue[0]
            if head in self._dropped:
                self._queue.pop(0)
                continue
            if self._not_worth_moving(head):
                self._queue.pop(0)
                continue
            if head in self.ready:
                return self._turn(head)
            # The planner's candidate is being planned: run the best measured schedule on the
            # current placement meanwhile (no move), else the best measured anywhere.
            return self._best_measured(prefer=self.placement) or head
        return self._decide()

    def _turn(self, head: str) -> str:
        """Whose turn it is among the ready candidates queued on ``head``'s placement: they are
        measured frame by frame in turn (the one with the fewest measured frames, queue order on
        ties), so a burst of load on the host hits them alike instead of one of them."""
        place = self.placement_of(head)
        group = [
            n
            for n in self._queue
            if n in self.ready and n not in self._dropped and self.placement_of(n) == place
        ]
        return min(group, key=lambda n: len(self.times.get(n, ())))

    def _not_worth_moving(self, name: str) -> bool:
        """Skip ``name`` when its placement was never measured and the model predicts every
        candidate there well above the best measured schedule (see :data:`SKIP_RATIO`)."""
        placement = self.placement_of(name)
        if placement == self.placement or any(self.placement_of(n) == placement for n in self.times):
            return False
        best = self._best_measured()
        there = [c.name for c in self.candidates if c.placement == placement and not c.is_planner]
        predicted = [self.predicted.get(n) for n in there]
        if not best or not there or any(p is None or p <= 0 for p in predicted):
            return False
        limit = SKIP_RATIO * _estimate(self.times[best])
        if min(p for p in predicted if p is not None) <= limit:
            return False
        self._dropped.add(name)
        self.events.append(
            f"skipped {name}: the cost model predicts "
            + ", ".join(f"{n} {1e3 * (self.predicted[n]):.1f} ms" for n in there)
            + f" on its placement, over {SKIP_RATIO}x the best measured ({best} {1e3 * _estimate(self.times[best]):.1f} ms)"
        )
        return True

    def _runner_up(self) -> str:
        """The best measured schedule on the winner's placement besides the winner ("" if none)."""
        place = self.placement_of(self.winner)
        others = [
            n
            for n, t in self.times.items()
            if t
            and n != self.winner
            and n in self.ready
            and n not in self._dropped
            and n not in self._settled
            and self.placement_of(n) == place
        ]
        return min(others, key=lambda n: _estimate(self.times[n])) if others else ""

    def _best_measured(self, prefer: Placement | None = None) -> str:
        measured = [n for n, t in self.times.items() if t and n not in self._dropped]
        if not measured:
            return ""
        here = [n for n in measured if self.placement_of(n) == prefer]
        return min(here or measured, key=lambda n: _estimate(self.times[n]))

    # ---- what happened ---------------------------------------------------------------------------
    def observe(self, step: Step, frame_s: float) -> None:
        """Record the slowest rank's wall time of the frame that ran ``step``."""
        self.placement = self.placement_of(step.name)
        self._since_plan += 1
        if step.exploring and not self._first:  # every policy pays the run's first frame
            self.explore_s.append(frame_s)
        self._first = False
        if step.warm:
            return
        if self.winner and step.name == self._rechecking and step.name != self.winner:
            self._recheck_s = frame_s
            return
        if self.winner and step.name == self.winner and not self.challenger:
            self._recent = [*self._recent, frame_s][-_RECENT:]
            self._since_recheck += 1
            if self._recheck_s:
                self._settle_recheck(frame_s)
            return
        times = self.times.setdefault(step.name, [])
        times.append(frame_s)
        if self.winner:  # a challenger after a re-plan
            if len(times) >= MEASURED_FRAMES:
                self._settle_challenge(step.name)
            return
        if step.name in self._queue:
            best = self._best_measured()
            best_t = _estimate(self.times[best]) if best and best != step.name else None
            if len(times) == 1 and best_t is not None and frame_s > DROP_RATIO * best_t:
                self._queue.remove(step.name)
                self.events.append(
                    f"dropped {step.name}: first measured frame {1e3 * frame_s:.1f} ms is more than "
                    f"{DROP_RATIO}x the best so far ({best} {1e3 * best_t:.1f} ms)"
                )
            elif len(times) >= MEASURED_FRAMES:
                self._queue.remove(step.name)

    def _settle_recheck(self, after_s: float) -> None:
        """A re-check frame and the winner's frames around it: record the paired ratio; decide."""
        name, frame_s = self._rechecking, self._recheck_s
        self._rechecking, self._recheck_s = "", 0.0
        around = [t for t in (self._before_s, after_s) if t > 0]
        pairs = self._pairs.setdefault(name, [])
        pairs.append(frame_s / statistics.mean(around))
        if len(pairs) < RECHECK_PAIRS:
            return
        verdict = paired_verdict(pairs)
        ratio = statistics.median(pairs)
        if verdict < 0:
            self.events.append(
                f"re-check: {name} ran {100 * (1 - ratio):.1f}% faster than {self.winner} in paired "
                f"frames (median ratio {ratio:.3f} over {len(pairs)}); running {name}"
            )
            self._pairs.pop(name)
            self.times[name].append(frame_s)
            self.times.setdefault(self.winner, []).extend(self._recent)
            self.winner, self._recent = name, [frame_s]
        elif verdict > 0 or len(pairs) >= RECHECK_LIMIT:
            self._settled.add(name)
            self.events.append(
                f"re-check: {name} stays behind {self.winner} (median paired ratio {ratio:.3f} over "
                f"{len(pairs)} re-checks"
                + ("" if verdict > 0 else f", no verdict at the {RECHECK_MARGIN:.0%} margin")
                + "); not re-checked again"
            )

    def needs_planning(self) -> list[str]:
        """The planner candidate to plan now (it is next in line and has no plan yet), else []."""
        if self._planning or self.winner or not self._queue:
            return []
        head = self._queue[0]
        return [head] if head not in self.ready and head not in self._dropped else []

    def planning_started(self) -> None:
        self._planning = True

    def plans_ready(self, names: Sequence[str]) -> None:
        """The planner's plans for ``names`` arrived and run from the next frame."""
        self._planning = False
        self._since_plan = 0
        self._drifted = 0
        for name in names:
            self.ready.add(name)
            if self.winner and name != self.winner:
                self.times.pop(name, None)
                self.challenger = name
                self._rechecking, self._recheck_s = "", 0.0
            elif self.winner:
                self._recent = []

    def drop(self, name: str, reason: str) -> None:
        """Never run ``name`` again (torch's schedule over the memory budget, ``reason`` says by
        how much): it is not measured and cannot win. The winner is kept."""
        if name in self._dropped or name == self.winner:
            return
        self._dropped.add(name)
        self.times.pop(name, None)
        self.events.append(f"{name} left out: {reason}")

    def duplicate(self, name: str, twin: str) -> None:
        """The planner's plan ``name`` is the very order of ``twin``: measuring it again would
        only measure noise, so it is not measured (and does not challenge)."""
        self._planning = False
        self._dropped.add(name)
        self.events.append(f"{name} planned the same order as {twin}; not measured separately")
        if self.winner:  # a re-plan on drift that changed nothing
            self._back_off()

    def _back_off(self) -> None:
        self._drift_needed = min(DRIFT_FRAMES_MAX, 2 * self._drift_needed)

    def observe_drift(self, drift: float) -> bool:
        """Feed the largest relative cost drift of the frame; True when a re-plan is due now."""
        if not self.winner or self._planning or self.challenger:
            return False
        self._drifted = self._drifted + 1 if drift > DRIFT_THRESHOLD else 0
        due = self._drifted >= self._drift_needed and self._since_plan >= max(1, self.replan_every)
        if due:
            self._drifted = 0
        return due

    def replan_target(self) -> str:
        """The planner candidate on the winner's placement ("" if there is none)."""
        place = self.placement_of(self.winner)
        return next((c.name for c in self.candidates if c.is_planner and c.placement == place), "")

    # ---- decisions -----------------------------------------------------------------------------
    def _decide(self) -> str:
        measured = {n: _estimate(t) for n, t in self.times.items() if t and n not in self._dropped}
        if not measured:
            measured = {n: _estimate(t) for n, t in self.times.items() if t}
        self.winner = min(measured, key=lambda n: measured[n])
        self._break_tie(measured)
        home = self.candidates[0].placement
        at_home = [n for n in measured if self.placement_of(n) == home]
        if at_home and self.placement_of(self.winner) != home:
            home_best = min(at_home, key=lambda n: measured[n])
            if measured[self.winner] > (1 - PLACEMENT_MARGIN) * measured[home_best]:
                self.events.append(
                    f"{self.winner} measured {1e3 * measured[self.winner]:.1f} ms on another placement, "
                    f"less than {PLACEMENT_MARGIN:.0%} faster than {home_best} "
                    f"{1e3 * measured[home_best]:.1f} ms: staying on {home_best}'s placement"
                )
                self.winner = home_best
        ranking = ", ".join(f"{n} {1e3 * t:.1f} ms" for n, t in sorted(measured.items(), key=lambda x: x[1]))
        self.events.append(f"explored {len(measured)} schedules ({ranking}); running {self.winner}")
        if not self._by_name[self.winner].is_planner:
            planned = [n for n in measured if self._by_name[n].is_planner]
            for name in planned:
                self.events.append(self._loss_reason(name, self.winner, measured))
        return self.winner

    def _break_tie(self, measured: dict[str, float]) -> None:
        """Of the candidates on the winner's placement within :data:`TIE_MARGIN` of it, run the
        one with the lowest predicted activation peak (see the module docstring)."""
        place, best = self.placement_of(self.winner), measured[self.winner]
        tied = [
            n for n in measured if self.placement_of(n) == place and measured[n] <= (1 + TIE_MARGIN) * best
        ]
        if len(tied) < 2 or any(n not in self.peaks for n in tied):
            return
        lean = min(tied, key=lambda n: (self.peaks[n], measured[n]))
        if lean == self.winner or self.peaks[lean] >= self.peaks[self.winner]:
            return
        self.events.append(
            f"{lean} and {self.winner} measured within {TIE_MARGIN:.0%} ({1e3 * measured[lean]:.1f} "
            f"and {1e3 * best:.1f} ms): a tie at this precision; {lean} has the lower activation "
            f"peak ({self.peaks[lean]:g} against {self.peaks[self.winner]:g} micro-batch "
            "activations per rank), paired re-checks decide from here"
        )
        self.winner = lean

    def _settle_challenge(self, name: str) -> None:
        challenger_t = _estimate(self.times[name])
        base = _estimate(self._recent) if self._recent else float("inf")
        if challenger_t < base:
            self.events.append(
                f"re-planned {name} measured {1e3 * challenger_t:.1f} ms against {self.winner}'s "
                f"{1e3 * base:.1f} ms; running {name}"
            )
            self.winner = name
            self._recent = list(self.times[name])
            self._drift_needed = DRIFT_FRAMES
        else:
            self.events.append(self._loss_reason(name, self.winner, {name: challenger_t, self.winner: base}))
            self._back_off()
        self.challenger = ""

    def _loss_reason(self, planned: str, winner: str, measured: dict[str, float]) -> str:
        got, best = measured[planned], measured[winner]
        text = (
            f"the planner's plan {planned} lost: measured {1e3 * got:.1f} ms/frame against "
            f"{winner} {1e3 * best:.1f} ms"
        )
        p_plan, p_win = self.predicted.get(planned), self.predicted.get(winner)
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

    def exploration_cost_s(self) -> float:
        """Seconds the exploring frames cost beyond running the winner: sum of (frame - winner
        median); frames faster than the median count negative, so timing noise cancels out."""
        if not self.winner or not self.explore_s:
            return 0.0
        ref = statistics.median(self._recent or self.times.get(self.winner) or self.explore_s)  # typical pace
        return sum(t - ref for t in self.explore_s)
