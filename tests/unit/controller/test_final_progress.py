"""The final figures of a finished job: rank 0's termination message into ``status.progress``.

The pure merge (``policy_progress``), the state machine that applies it when a job succeeds or
fails, the status patch it turns into, and the launcher's termination message that carries it
(its 4096-byte limit included), read back by the operator's own parser.
"""

from __future__ import annotations

import json
from typing import Any

from controller_builders import SETTINGS, Pod, at, job, ready
from hyperframe.constants import TERMINATION_MESSAGE_MAX_BYTES
from hyperframe.controller.policy_progress import final_progress, progress_from_termination
from hyperframe.controller.state_machine import reconcile
from hyperframe.controller.status import JobStatus, Phase
from hyperframe_runtime.launcher import LaunchResult

NODES = {n: ready(n) for n in ("n1", "n2")}
FINAL = {
    "frame": 20,
    "totalFrames": 20,
    "step": 20,
    "loss": 1.25,
    "samplesPerSecond": 310.5,
    "etaSeconds": 0.0,
}
POSTED = {"frame": 0, "totalFrames": 20, "step": 0, "updatedAt": "2026-01-01T11:59:00Z"}


def launch_message(
    progress: dict[str, Any] | None, *, ok: bool = True, reason: str = "all ranks finished"
) -> str:
    return LaunchResult(
        ok=ok, exit_code=0 if ok else 1, reason=reason, progress=progress
    ).to_termination_message()


def running(progress: dict[str, Any] | None = None, **changes: Any) -> tuple[dict[str, Any], JobStatus]:
    """A running 2-node job's stored status, raw (as the API server holds it) and parsed."""
    first = reconcile(job(), JobStatus(), (), NODES, at(0), SETTINGS).status
    raw = {**first.replace(phase=Phase.RUNNING, **changes).to_dict(), "progress": progress}
    return raw, JobStatus.from_dict(raw)


def test_a_job_ending_before_its_next_progress_write_gets_the_final_figures() -> None:
    raw, stored = running(POSTED)
    pods = [Pod(0).on("n1").exited(0, launch_message(FINAL)).obj(), Pod(1).on("n2").running().obj()]
    plan = reconcile(job(), stored, pods, NODES, at(30), SETTINGS)
    assert plan.status.phase == Phase.SUCCEEDED
    patch = plan.status.to_patch(raw)
    assert patch["phase"] == "Succeeded"
    assert patch["progress"] == {**FINAL, "updatedAt": "2026-01-01T12:00:30Z"}


def test_a_failed_job_takes_rank0s_figures_of_the_current_gang_only() -> None:
    _, stored = running(POSTED, restarts=1, gang_generation=1)
    earlier = {**FINAL, "frame": 17, "step": 17}
    pods = [
        Pod(0, generation=0).on("n1").exited(1, launch_message(earlier, ok=False)).obj(),
        Pod(0, generation=1).on("n1").exited(1, launch_message({**FINAL, "frame": 9}, ok=False)).obj(),
        Pod(1, generation=1).on("n2").exited(1, launch_message({**FINAL, "frame": 99}, ok=False)).obj(),
    ]
    plan = reconcile(job(backoff_limit=1), stored, pods, NODES, at(30), SETTINGS)
    assert plan.status.phase == Phase.FAILED
    assert plan.status.progress is not None and plan.status.progress["frame"] == 9


def test_without_a_final_update_the_posted_figures_stay() -> None:
    raw, stored = running(POSTED)
    killed = Pod(0).on("n1").exited(0, "").obj()  # e.g. SIGKILLed launcher: no message at all
    plan = reconcile(job(), stored, [killed, Pod(1).on("n2").running().obj()], NODES, at(30), SETTINGS)
    assert plan.status.phase == Phase.SUCCEEDED
    assert "progress" not in plan.status.to_patch(raw)


def test_a_running_job_never_writes_progress_and_a_finished_one_writes_it_once() -> None:
    raw, stored = running(POSTED)
    pods = [Pod(0).on("n1").running().obj(), Pod(1).on("n2").running().obj()]
    assert "progress" not in reconcile(job(), stored, pods, NODES, at(5), SETTINGS).status.to_patch(raw)

    done = [Pod(0).on("n1").exited(0, launch_message(FINAL)).obj()]
    first = reconcile(job(), stored, done, NODES, at(30), SETTINGS).status
    written = first.to_dict()
    again = reconcile(job(), JobStatus.from_dict(written), done, NODES, at(90), SETTINGS).status
    assert again.to_patch(written) == {}, "the same final update is not written again (nor restamped)"


def test_a_figure_the_final_update_lacks_is_removed_from_status() -> None:
    raw, stored = running({**POSTED, "loss": 3.0, "samplesPerSecond": 9.0})
    no_loss = {"frame": 1, "totalFrames": 20, "step": 1}  # the first frame's loss was NaN
    done = [Pod(0).on("n1").exited(1, launch_message(no_loss, ok=False)).obj()]
    status = reconcile(job(backoff_limit=0), stored, done, NODES, at(30), SETTINGS).status
    progress = status.to_patch(raw)["progress"]
    assert progress["frame"] == 1 and progress["loss"] is None and progress["samplesPerSecond"] is None


def test_final_progress_merge() -> None:
    now = at(60)
    assert final_progress(POSTED, None, now) == POSTED
    assert final_progress(None, None, now) is None
    assert final_progress(POSTED, FINAL, now) == {**FINAL, "updatedAt": "2026-01-01T12:01:00Z"}
    stored = {**FINAL, "updatedAt": "2026-01-01T11:00:00Z"}
    assert final_progress(stored, FINAL, now) is stored


def test_unreadable_or_foreign_termination_messages_carry_no_progress() -> None:
    good = launch_message(FINAL)
    assert progress_from_termination(good) == FINAL
    for message in (
        "",
        "killed",
        good[: len(good) // 2],  # cut
        json.dumps({"version": 1, "ok": True, "exit_code": 0, "node": "n1"}),  # a gate report
        launch_message({"frame": "twenty"}),
        launch_message({"loss": 1.0}),  # no frame
        json.dumps([1, 2]),
    ):
        assert progress_from_termination(message) is None, message


def test_a_bad_figure_in_the_termination_message_loses_only_itself() -> None:
    # Before the codec read it, one bad figure dropped the trainer's whole final update.
    message = launch_message({**FINAL, "etaSeconds": -1.0, "loss": float("nan")})
    assert progress_from_termination(message) == {
        k: v for k, v in FINAL.items() if k not in ("etaSeconds", "loss")
    }


def test_the_launch_message_stays_whole_within_the_kubelet_limit() -> None:
    worst = {k: (2**63 - 1 if isinstance(v, int) else -1.2345678901234567e308) for k, v in FINAL.items()}
    reason = '"\\\u00e9\u4e2d\U0001f525\n' * 2000  # escapes and multi-byte characters, far over the limit
    result = LaunchResult(
        ok=False, exit_code=1, reason=reason, failed_ranks=list(range(1000)), progress=worst
    )
    message = result.to_termination_message()
    assert len(message.encode()) <= TERMINATION_MESSAGE_MAX_BYTES
    data = json.loads(message)
    assert data["progress"] == worst and data["exit_code"] == 1 and data["ok"] is False
    assert data["reason"] and reason.startswith(data["reason"]), "the reason is cut, not mangled"
    assert len(data["failed_ranks"]) == 64
    short = LaunchResult(ok=True, exit_code=0, reason="done").to_termination_message()
    assert json.loads(short)["reason"] == "done" and "progress" not in json.loads(short)
