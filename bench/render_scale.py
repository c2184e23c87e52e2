"""Renderer scale: time to parse, resolve and render one HyperFrameJob of N nodes (no cluster).

    .venv/bin/python bench/render_scale.py [--nodes 2,64,512,1024] [--repeat 3] [--json]

Renders examples/gpu-pipeline.yaml resized to N nodes x 8 GPUs (pipeline 4) with an operator-style
context (generation, excluded nodes, status URL) and prints, per N, the best of --repeat runs:
total ms, ms per pod, and the size of the `hyperframe render` YAML. Also prints how long
parse_job takes for one job. The operator renders once per gang (re)start, so ms per pod bounds
how fast it can create the pods of a large gang. Numbers depend on the machine and its load;
they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

import yaml
from hyperframe.api.models import parse_job
from hyperframe.render import RenderContext, render_job
from hyperframe.render.yamlout import dump_manifests

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpu-pipeline.yaml"
CTX = RenderContext(gang_generation=3, excluded_nodes=("node-a", "node-b"), status_url="https://op:8443/p")


def _pair() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")) if d]
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    job["metadata"]["uid"] = "00000000-0000-0000-0000-000000000001"
    return job, runtime


def measure(nodes: int, repeat: int) -> dict[str, float]:
    job, runtime = _pair()
    job = copy.deepcopy(job)
    job["spec"]["nodes"] = nodes
    job["spec"]["parallelism"] = {"pipeline": 4, "data": nodes * 2}
    best = float("inf")
    objects: list[dict[str, Any]] = []
    for _ in range(repeat):
        start = time.perf_counter()
        objects = render_job(job, runtime, CTX)
        best = min(best, time.perf_counter() - start)
    return {
        "nodes": nodes,
        "objects": len(objects),
        "total_ms": best * 1000,
        "ms_per_pod": best * 1000 / nodes,
        "yaml_kib": len(dump_manifests(objects)) / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="2,64,512,1024")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(int(n), args.repeat) for n in args.nodes.split(",")]
    job, _ = _pair()
    start = time.perf_counter()
    for _ in range(100):
        parse_job(job)
    parse_ms = (time.perf_counter() - start) * 10
    if args.json:
        print(json.dumps({"render": rows, "parse_job_ms": parse_ms}, indent=2))
        return
    print(f"{'nodes':>6} {'objects':>8} {'total ms':>10} {'ms/pod':>8} {'YAML KiB':>9}")
    for r in rows:
        print(
            f"{r['nodes']:>6} {r['objects']:>8} {r['total_ms']:>10.1f} {r['ms_per_pod']:>8.2f} {r['yaml_kib']:>9.1f}"
        )
    print(f"parse_job: {parse_ms:.2f} ms per job")


if __name__ == "__main__":
    main()
