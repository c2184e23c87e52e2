"""Smoke-gate wall time on CPU (gloo): 2 and 4 ranks, one and two nodes.

    .venv/bin/python bench/smoke_gate.py [--runs 3] [--json]

Each case renders examples/cpu-tiny.yaml (procsPerNode and nodes adjusted) exactly as the
operator would and runs ``hyperframe-smoke`` once per node as separate processes, as the pods'
init containers would. Printed per case (median over runs):

- wall: from starting the node processes until the last one exits: the cost a job pays;
- gate: the gate's own ``duration_s`` (after imports: host checks, forking ranks, rendezvous,
  group init, all-reduces, report);
- busbw at the largest all-reduce size (1 MiB over loopback: a sanity figure, not a network one).

The gap between wall and gate is the Python + torch import of the node agent.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from hyperframe.render import render_job
from hyperframe.smoke_report import SmokeReport
from hyperframe_runtime.local_plan import localize, plan

REPO = Path(__file__).resolve().parents[1]
CASES = ((1, 2), (1, 4), (2, 2))  # (nodes, ranks per node)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _plan(nodes: int, procs: int) -> Any:
    docs = list(yaml.safe_load_all((REPO / "examples" / "cpu-tiny.yaml").read_text()))
    job = copy.deepcopy(next(d for d in docs if d["kind"] == "HyperFrameJob"))
    runtime = copy.deepcopy(next(d for d in docs if d["kind"] == "HyperFrameRuntime"))
    job["spec"].update({"nodes": nodes, "procsPerNode": procs})
    job["spec"]["parallelism"] = {"pipeline": 2, "data": nodes * procs // 2}
    return plan(render_job(job, runtime))


def run_case(nodes: int, procs: int, tmp: Path) -> dict[str, float]:
    local = _plan(nodes, procs)
    config = tmp / "job.json"
    config.write_text(local.job_json)
    port = _free_port()
    started = time.monotonic()
    running = []
    for node in local.nodes:
        assert node.gate is not None
        gate = localize(node.gate, port=port, config_path=str(config))
        log = tmp / f"t{node.node_rank}.json"
        proc = subprocess.Popen(
            [sys.executable, "-m", gate.module, *gate.args, "--termination-log", str(log)],
            env={**os.environ, **gate.env},
            stdout=subprocess.DEVNULL,
        )
        running.append((proc, log))
    reports = []
    for proc, log in running:
        if proc.wait(timeout=600) != 0:
            raise SystemExit(f"gate failed: {log.read_text()}")
        reports.append(SmokeReport.from_termination_message(log.read_text()))
    wall = time.monotonic() - started
    return {
        "wall_s": wall,
        "gate_s": max(r.duration_s for r in reports),
        "busbw_gbps": reports[0].busbw_gbps or 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for nodes, procs in CASES:
            runs = [run_case(nodes, procs, Path(tmp)) for _ in range(args.runs)]
            results.append(
                {
                    "nodes": nodes,
                    "ranks_per_node": procs,
                    "ranks": nodes * procs,
                    **{key: statistics.median(r[key] for r in runs) for key in runs[0]},
                    "runs": args.runs,
                }
            )
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"smoke gate on CPU/gloo, median of {args.runs} run(s), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'nodes':>5} {'ranks/node':>10} {'ranks':>5} {'wall s':>7} {'gate s':>7} {'busbw GB/s':>10}")
    for r in results:
        print(
            f"{r['nodes']:>5} {r['ranks_per_node']:>10} {r['ranks']:>5} {r['wall_s']:>7.2f} {r['gate_s']:>7.2f} "
            f"{r['busbw_gbps']:>10.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
