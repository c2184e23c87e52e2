"""Builds rendered CPU jobs and runs their smoke gates as real node processes (test helper)."""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hyperframe.render import render_job
from hyperframe.smoke_report import SmokeReport
from hyperframe_runtime.local_plan import LocalPlan, localize, plan

REPO = Path(__file__).resolve().parents[2]

Doc = dict[str, Any]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def example_plan(name: str, edit: Callable[[Doc, Doc], None] | None = None) -> LocalPlan:
    """Render ``examples/<name>.yaml`` (after ``edit(job, runtime)``) and plan it locally."""
    docs = list(yaml.safe_load_all((REPO / "examples" / f"{name}.yaml").read_text()))
    runtime = copy.deepcopy(next(d for d in docs if d["kind"] == "HyperFrameRuntime"))
    job = copy.deepcopy(next(d for d in docs if d["kind"] == "HyperFrameJob"))
    if edit is not None:
        edit(job, runtime)
    return plan(render_job(job, runtime))


@dataclass(frozen=True)
class GateRun:
    exit_code: int
    report: SmokeReport
    stdout: str
    log: Path
    """The termination log the gate wrote (what the kubelet hands the operator)."""


def run_gates(
    tmp: Path,
    local: LocalPlan,
    *,
    nodes: list[int] | None = None,
    env: Mapping[int, Mapping[str, str]] | None = None,
    timeout_s: float = 120,
) -> dict[int, GateRun]:
    """Run the gate of each node rank in ``nodes`` (default all) concurrently, as the pods would."""
    config = tmp / "job.json"
    config.write_text(local.job_json)
    port = free_port()
    procs = {}
    for node in local.nodes:
        if nodes is not None and node.node_rank not in nodes:
            continue
        assert node.gate is not None
        gate = localize(
            node.gate, port=port, config_path=str(config), extra_env=(env or {}).get(node.node_rank, {})
        )
        log = tmp / f"termination-{node.node_rank}.json"
        procs[node.node_rank] = (
            subprocess.Popen(
                [sys.executable, "-m", gate.module, *gate.args, "--termination-log", str(log)],
                env={**os.environ, **gate.env},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
            log,
        )
    runs = {}
    for rank, (proc, log) in procs.items():
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        finally:
            proc.kill()
        runs[rank] = GateRun(
            exit_code=proc.returncode,
            report=SmokeReport.from_termination_message(log.read_text() if log.exists() else ""),
            stdout=out,
            log=log,
        )
    return runs
