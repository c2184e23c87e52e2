"""Chaos at a small scale: jobs arrive while the leader is SIGKILLed again and again and the API
server is restarted once (``bench/operator_chaos.py``'s run, with fewer jobs and kills).

It runs on a private KWOK-only cluster, not the session's, because it restarts that cluster's API
server (with an audit log, the evidence for the counts). At the end every job must be Succeeded
with no gang restart, every pod must have been created exactly once (no (job, generation, rank)
twice), and the API server must have seen no write from a replica outside its leadership term.
Nothing here depends on timing: each step waits for what it needs, and a slow machine only
makes the run longer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hyperframe_devcluster import ClusterConfig, LocalCluster, paths

from bench.operator_chaos import ChaosSettings, run_chaos

pytestmark = pytest.mark.cluster

SETTINGS = ChaosSettings(
    jobs=24,
    pods_per_job=2,
    clients=4,
    arrival_s=20.0,
    kill_every_s=6.0,
    min_kills=3,
    apiserver_restart_at_s=10.0,
    settle_timeout_s=240.0,
)


@pytest.fixture
def private_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    missing = paths.missing_binaries()
    if missing:
        pytest.fail(f"the local control plane is not built ({', '.join(missing)}): run `make cluster-build`")
    nodes = SETTINGS.jobs * SETTINGS.pods_per_job // 8 + 2
    cluster = LocalCluster(
        ClusterConfig(state_dir=tmp_path / "cluster", gpu_nodes=nodes, die_with_parent=True)
    )
    cluster.up(reuse=False)
    try:
        yield cluster
    finally:
        cluster.down()


def test_leader_kills_and_an_apiserver_restart_leave_no_duplicate_no_stray_write_and_no_stuck_job(
    private_cluster: LocalCluster, tmp_path: Path
) -> None:
    report = run_chaos(private_cluster, SETTINGS, tmp_path)
    print(report.summary())
    assert report.kills >= SETTINGS.min_kills and report.apiserver_restarts == 1
    assert report.takeovers >= report.kills, "each kill is followed by a takeover"
    assert report.duplicate_pods == []
    assert report.writes_outside_term == []
    assert report.stuck_jobs == []
    # The faults touch no pod: a gang whose creates a leader change cut short is completed from
    # status.gangCreation by the next leader, not restarted.
    assert report.max_restarts == 0, report.restarted_jobs
    # The audit log saw a create of every pod, and the leaders' writes: the counts above are real.
    expected = {
        f"chaos/chaos-{j:03d}-g0-{r}" for j in range(SETTINGS.jobs) for r in range(SETTINGS.pods_per_job)
    }
    assert report.pods_created == expected
    assert report.operator_writes > len(expected)
