"""``hyperframe local JOB.yaml``: run a HyperFrameJob as processes on this machine.

The job is rendered exactly as the operator renders it; each pod becomes a local process group
running the pod's own commands (``hyperframe-smoke``, then ``hyperframe-launch``) with the pod's
own env, except that ranks meet at 127.0.0.1 on a free port. First every node's gate runs, then
every node's launcher; per-frame progress lines stream through, and a summary ends the run.

Ctrl-C (or SIGTERM) stops everything: launchers get SIGTERM (torchrun forwards it to the ranks,
which stop at the next frame boundary after that frame's snapshot), stragglers get SIGKILL after
the job's terminationGracePeriodSeconds, and a final sweep kills any process still carrying this run's marker in
its environment, so no rank outlives the command.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Final, TextIO

from hyperframe.api.errors import SpecError
from hyperframe.api.manifests import add_job_file_arguments, load_documents, select_job_and_runtime
from hyperframe.render import render_job
from hyperframe.smoke_report import SmokeReport

from hyperframe_runtime.local_plan import (
    Command,
    LocalPlan,
    ProgressFigures,
    localize,
    parse_progress_line,
    plan,
)

__all__ = ["main"]

ENV_RUN_MARKER: Final = "HYPERFRAME_LOCAL_RUN"
"""Set in every process local mode starts (ranks inherit it): the no-orphan sweep looks for it."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Group:
    """One node's process (its own process group) and the thread copying its output."""

    node_rank: int
    proc: subprocess.Popen[str]
    pump: threading.Thread


@dataclass
class _Progress:
    lock: threading.Lock = field(default_factory=threading.Lock)
    frames: list[ProgressFigures] = field(default_factory=list)


class _Runner:
    def __init__(self, local: LocalPlan, workdir: Path, out: TextIO) -> None:
        self.local = local
        self.workdir = workdir
        self.out = out
        self.marker = uuid.uuid4().hex
        self.port = _free_port()
        self.config_path = workdir / "job.json"
        self.config_path.write_text(local.job_json, encoding="utf-8")
        self.groups: list[_Group] = []
        self.progress = _Progress()
        self.print_lock = threading.Lock()

    def say(self, line: str) -> None:
        with self.print_lock:
            print(line, file=self.out, flush=True)

    def _pump(self, node_rank: int, phase: str, stream: TextIO) -> None:
        for raw in stream:
            line = raw.rstrip("\n")
            figures = parse_progress_line(line)
            if figures is not None:
                with self.progress.lock:
                    self.progress.frames.append(figures)
            self.say(f"[node {node_rank} {phase}] {line}")

    def start(self, node_rank: int, phase: str, command: Command, extra_args: Sequence[str]) -> None:
        cmd = localize(
            command,
            port=self.port,
            config_path=str(self.config_path),
            extra_env={
                ENV_RUN_MARKER: self.marker,
                "PYTHONUNBUFFERED": "1",
                "HYPERFRAME_WORKDIR": str(self.workdir),
            },
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", cmd.module, *cmd.args, *extra_args],
            env={**os.environ, **cmd.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # our own group: Ctrl-C reaches us, and we stop it in order
        )
        assert proc.stdout is not None
        pump = threading.Thread(target=self._pump, args=(node_rank, phase, proc.stdout), daemon=True)
        pump.start()
        self.groups.append(_Group(node_rank=node_rank, proc=proc, pump=pump))

    def wait_all(self) -> dict[int, int]:
        codes = {g.node_rank: g.proc.wait() for g in self.groups}
        for g in self.groups:
            g.pump.join(timeout=5)
        self.groups = []
        return codes

    def stop(self) -> None:
        """SIGTERM every group, SIGKILL what is left after a grace period, then sweep by marker."""
        for g in self.groups:
            _signal_group(g.proc, signal.SIGTERM)
        deadline = time.monotonic() + self.local.job.termination_grace_period_seconds
        for g in self.groups:
            try:
                g.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(g.proc, signal.SIGKILL)
                g.proc.wait()
        self.groups = []
        sweep(self.marker)


def node_gpus(gpus_per_node: int, node_rank: int, visible: str | None) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES for one local "node" of a GPU job: its own slice of this machine's GPUs."""
    if gpus_per_node == 0:
        return {}
    pool = [d.strip() for d in visible.split(",")] if visible else [str(i) for i in range(1 << 10)]
    mine = pool[node_rank * gpus_per_node : (node_rank + 1) * gpus_per_node]
    return {"CUDA_VISIBLE_DEVICES": ",".join(mine)}


def _signal_group(proc: subprocess.Popen[str], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def sweep(marker: str) -> list[int]:
    """SIGKILL every process whose environment carries this run's marker; returns their pids."""
    needle = f"{ENV_RUN_MARKER}={marker}".encode()
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed


def _gate(runner: _Runner) -> int:
    local = runner.local
    gated = [n for n in local.nodes if n.gate is not None]
    if not gated:
        runner.say("smoke gate: disabled by the runtime (smoke.enabled: false)")
        return 0
    runner.say(f"== smoke gate: {len(gated)} node(s) x {local.job.procs_per_node} rank(s)")
    logs = {n.node_rank: runner.workdir / f"smoke-node{n.node_rank}.json" for n in gated}
    for node in gated:
        assert node.gate is not None
        runner.start(node.node_rank, "gate", node.gate, ["--termination-log", str(logs[node.node_rank])])
    codes = runner.wait_all()
    failed = {rank: code for rank, code in codes.items() if code != 0}
    if not failed:
        report = SmokeReport.from_termination_message(logs[0].read_text() if logs[0].exists() else "")
        busbw = f", busbw {report.busbw_gbps:g} GB/s" if report.busbw_gbps is not None else ""
        runner.say(f"== smoke gate passed in {report.duration_s:.1f}s{busbw}")
        return 0
    rank, code = min(failed.items())
    text = logs[rank].read_text() if logs[rank].exists() else ""
    report = SmokeReport.from_termination_message(text, exit_code=code)
    runner.say(f"== smoke gate FAILED on node {rank} (exit {code}) [{report.failed_check}]")
    runner.say(f"   reason: {report.reason}")
    runner.say(f"   remedy: {report.remedy}")
    return code


def _train(runner: _Runner) -> int:
    local = runner.local
    what = f"{local.job.frames.frames} frames" if local.job.frames is not None else "a script"
    runner.say(f"== training: {local.job.nodes} node(s) x {local.job.procs_per_node} rank(s), {what}")
    for node in local.nodes:
        log = runner.workdir / f"launch-node{node.node_rank}.json"
        runner.start(node.node_rank, "train", node.trainer, ["--termination-log", str(log)])
    codes = runner.wait_all()
    failed = {rank: code for rank, code in codes.items() if code != 0}
    if failed:
        rank, code = min(failed.items())
        log = runner.workdir / f"launch-node{rank}.json"
        runner.say(
            f"== training FAILED on node {rank} (exit {code}): {log.read_text() if log.exists() else 'no result'}"
        )
        return code
    return 0


def _summary(runner: _Runner, started: float) -> None:
    frames = runner.progress.frames
    elapsed = time.monotonic() - started
    if not frames:
        runner.say(f"== done in {elapsed:.1f}s (no progress lines seen)")
        return
    first, last = frames[0], frames[-1]
    trend = "fell" if last.loss < first.loss else "did NOT fall"
    runner.say(
        f"== done in {elapsed:.1f}s: {last.frame}/{last.total_frames} frames, loss {first.loss:.4f} -> "
        f"{last.loss:.4f} ({trend}), {last.samples_per_second:.1f} samples/s"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hyperframe local",
        description="Run a HyperFrameJob on this machine: render it as the operator would, run the smoke gate "
        "on every node, then train, as local processes (CPU/gloo).",
    )
    add_job_file_arguments(parser)
    parser.add_argument(
        "--workdir", default="", help="where to keep job.json, reports and logs (default: a temp dir)"
    )
    parser.add_argument("--skip-gate", action="store_true", help="do not run the smoke gate")
    return parser


def _load(args: argparse.Namespace) -> LocalPlan:
    docs = load_documents(args.job)
    extra = [d for path in args.runtime for d in load_documents(path)]
    job, runtime = select_job_and_runtime(docs, extra)
    return plan(render_job(job, runtime))


def _check_devices(local: LocalPlan) -> str | None:
    gpus = local.job.gpus_per_node * local.job.nodes
    if gpus == 0:
        return None
    import torch

    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have >= gpus:
        return None
    return (
        f"spec.gpusPerNode: the job needs {local.job.nodes} node(s) x {local.job.gpus_per_node} GPU(s) = {gpus}, "
        f"this machine has {have}; run a CPU job locally (gpusPerNode: 0, e.g. examples/cpu-tiny.yaml)"
    )


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        local = _load(args)
    except SpecError as exc:
        print(f"error: {args.job} is not a valid HyperFrameJob:", file=sys.stderr)
        for err in exc.errors:
            print(f"  {err}", file=sys.stderr)
        return 2
    problem = _check_devices(local)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix=f"hyperframe-local-{local.job.job.name}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    runner = _Runner(local, workdir, sys.stdout)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # Install both explicitly: a process started in the background by a non-interactive shell
    # inherits SIGINT as ignored, and Python then leaves it ignored, so Ctrl-C would do nothing.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    runner.say(
        f"hyperframe local: job {local.job.job.name}: {local.job.nodes} node(s) x {local.job.procs_per_node} rank(s), "
        f"{local.job.backend}, rendezvous 127.0.0.1:{runner.port}, files in {workdir}"
    )
    try:
        code = 0 if args.skip_gate else _gate(runner)
        if code == 0:
            code = _train(runner)
        if code == 0:
            _summary(runner, started)
        return code
    except KeyboardInterrupt:
        runner.say("== interrupted: stopping every node")
        runner.stop()
        return 130
    finally:
        runner.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
