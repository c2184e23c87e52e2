"""``hyperframe-smoke``: the init container's command.

Reads the resolved job config and the env, runs this node's gate, prints the table to stdout,
writes the compact JSON report to the termination-message path and exits with the
:class:`~hyperframe.constants.SmokeExit` code (0 pass, 1 check failed, 2 config error, 3 timeout).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from hyperframe.constants import TERMINATION_MESSAGE_PATH, SmokeExit
from hyperframe.smoke_report import SmokeReport

from hyperframe_runtime.jobenv import DEFAULT_CONFIG_PATH, JobEnv, JobEnvError, load_job, node_name
from hyperframe_runtime.smoke.probe import select_probe
from hyperframe_runtime.smoke.settings import gate_config
from hyperframe_runtime.smoke.table import format_table

__all__ = ["main", "write_termination_message"]


def write_termination_message(report: SmokeReport, path: str) -> None:
    """Write the compact report where the kubelet reads it; a missing path only warns (local runs)."""
    try:
        Path(path).write_text(report.to_termination_message(), encoding="utf-8")
    except OSError as exc:
        print(
            f"hyperframe-smoke: warning: cannot write the report to {path}: {exc.strerror}", file=sys.stderr
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hyperframe-smoke",
        description="HyperFrame startup gate: device checks and a job-wide all-reduce. "
        "Exit codes: 0 pass, 1 a check failed, 2 config error, 3 timeout.",
    )
    parser.add_argument("--config", default=str(DEFAULT_CONFIG_PATH), help="resolved job config (job.json)")
    parser.add_argument(
        "--termination-log", default=TERMINATION_MESSAGE_PATH, help="where to write the compact JSON report"
    )
    return parser


def _terminate(signum: int, _frame: FrameType | None) -> None:
    # Unwinds the agent so that its cleanup kills the rank processes.
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    env = dict(os.environ)
    started = time.monotonic()
    try:
        job = load_job(args.config)
        config = gate_config(job, JobEnv.from_env(env), node_name=node_name(env))
        probe = select_probe(config, env)
    except JobEnvError as exc:
        report = SmokeReport.failure(
            exc.reason_id, str(exc), node=node_name(env), duration_s=time.monotonic() - started
        )
        print(format_table(report, []), flush=True)
        write_termination_message(report, args.termination_log)
        return int(SmokeExit.CONFIG)
    if not job.smoke.enabled:
        print("HyperFrame smoke gate: disabled by the runtime's smoke.enabled=false; passing", flush=True)
        return int(SmokeExit.PASS)
    from hyperframe_runtime.smoke.node import run_node  # torch import after the cheap checks

    result = run_node(config, probe)
    print(format_table(result.report, result.own), flush=True)
    write_termination_message(result.report, args.termination_log)
    return result.report.exit_code


if __name__ == "__main__":
    sys.exit(main())
