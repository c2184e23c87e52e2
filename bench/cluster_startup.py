"""Local control plane numbers: build time, warm start time, memory, pod start latency.

    .venv/bin/python bench/cluster_startup.py [--runs 3] [--json] [--cold-build]

- build: the per-binary build times that cluster/build.sh logged (build-times.tsv in the
  binary cache). Whether those were cold depends on the Go build cache when they ran; pass
  `--cold-build` to measure a truly cold build (empty binary cache and empty GOCACHE in a
  temporary directory; takes many minutes and all CPUs).
- warm start: `LocalCluster.up()` in a fresh state directory with the binaries already built,
  `--runs` times; per-step times of the median run.
- memory: resident set size of each component right after `up`, and again once 32 pods have
  been scheduled and run.
- pod start: seconds from creating 32 one-GPU pods until all are Running (scheduler + KWOK).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hyperframe_devcluster import ClusterConfig, LocalCluster, paths, poll, sim
from hyperframe_devcluster.config import COMPONENTS


def logged_build_times() -> dict[str, float]:
    """Latest logged build seconds of each pinned binary."""
    log = paths.bin_dir() / "build-times.tsv"
    times: dict[str, float] = {}
    if not log.exists():
        return times
    with log.open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["binary"] in paths.BINARIES and row["version"] == paths.pins().version_of(row["binary"]):
                times[row["binary"]] = float(row["seconds"])
    return times


def cold_build_seconds() -> float:
    with tempfile.TemporaryDirectory(prefix="hf-coldbuild-") as tmp:
        env = dict(os.environ, HYPERFRAME_BIN_CACHE=f"{tmp}/bin", GOCACHE=f"{tmp}/gocache")
        start = time.monotonic()
        subprocess.run(["bash", str(paths.repo_root() / "cluster" / "build.sh")], env=env, check=True)
        return time.monotonic() - start


def rss_mib(cluster: LocalCluster) -> dict[str, float]:
    result: dict[str, float] = {}
    for component in COMPONENTS:
        pid = cluster.pid(component)
        if pid is None:
            continue
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                result[component] = int(line.split()[1]) / 1024
    return result


def pod_start_seconds(cluster: LocalCluster, pods: int) -> float:
    kubectl = cluster.kubectl
    kubectl.run("create", "namespace", "bench")
    poll(
        lambda: kubectl.run("get", "serviceaccount", "default", "-n", "bench", check=False).returncode,
        lambda rc: rc == 0,
        timeout_s=60,
        what="serviceaccount bench/default",
    )
    manifests = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}"},
            "spec": {
                "restartPolicy": "Never",
                "tolerations": [sim.GPU_TOLERATION],
                "containers": [{"name": "c", "image": "x", "resources": {"limits": {sim.GPU_RESOURCE: "1"}}}],
            },
        }
        for i in range(pods)
    ]
    start = time.monotonic()
    kubectl.apply(manifests, namespace="bench")
    kubectl.run(
        "wait", "--for=jsonpath={.status.phase}=Running", "pods", "--all", "-n", "bench", "--timeout=120s"
    )
    return time.monotonic() - start


def run(runs: int, cold: bool) -> dict[str, Any]:
    results: dict[str, Any] = {"build_seconds_logged": logged_build_times()}
    if cold:
        results["cold_build_seconds"] = cold_build_seconds()
    starts = []
    with tempfile.TemporaryDirectory(prefix="hf-bench-") as tmp:
        for i in range(runs):
            cluster = LocalCluster(ClusterConfig(state_dir=Path(tmp) / f"run{i}", die_with_parent=True))
            try:
                report = cluster.up(reuse=False)
                starts.append((report.total_s, report.steps))
                if i == runs - 1:
                    results["rss_mib_ready"] = rss_mib(cluster)
                    results["pod_start_seconds_32_pods"] = pod_start_seconds(cluster, 32)
                    results["rss_mib_after_pods"] = rss_mib(cluster)
            finally:
                cluster.down()
    median = sorted(starts, key=lambda s: s[0])[len(starts) // 2]
    results["warm_start_seconds"] = [round(s[0], 2) for s in starts]
    results["warm_start_median_seconds"] = round(statistics.median(s[0] for s in starts), 2)
    results["warm_start_median_steps"] = {k: round(v, 2) for k, v in median[1].items()}
    results["load_average_1m"] = os.getloadavg()[0]
    results["cpus"] = os.cpu_count()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--cold-build", action="store_true", help="also time a build from empty caches")
    args = parser.parse_args()
    results = run(args.runs, args.cold_build)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    build = results["build_seconds_logged"]
    print(
        f"build (logged by build.sh): total {sum(build.values()):.0f}s  "
        + ", ".join(f"{k} {v:.0f}s" for k, v in build.items())
    )
    if "cold_build_seconds" in results:
        print(f"cold build (empty caches): {results['cold_build_seconds']:.0f}s")
    steps = ", ".join(f"{k} {v}s" for k, v in results["warm_start_median_steps"].items())
    print(
        f"warm start: median {results['warm_start_median_seconds']}s of {results['warm_start_seconds']} ({steps})"
    )
    for key in ("rss_mib_ready", "rss_mib_after_pods"):
        rss = results[key]
        print(
            f"{key}: total {sum(rss.values()):.0f} MiB  " + ", ".join(f"{k} {v:.0f}" for k, v in rss.items())
        )
    print(f"32 one-GPU pods created -> all Running: {results['pod_start_seconds_32_pods']:.1f}s")
    print(f"(machine: {results['cpus']} CPUs, 1-min load average {results['load_average_1m']:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
