"""Bringing a cluster up fails loudly and cleanly.

Covers: `up` first stops what a crashed earlier run left in the same state directory (found
through its pid files); a component that cannot start fails `up` with its name, what was
awaited and the tail of its own log; and `up` leaves no process of that cluster running. No
session cluster is needed: etcd starts, then a deliberately broken kube-apiserver.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hyperframe_devcluster import ClusterConfig, ComponentNotReadyError, LocalCluster, components, paths
from hyperframe_devcluster.process import start_component

pytestmark = pytest.mark.cluster


def test_up_stops_stale_processes_and_a_failing_component_fails_it_with_its_log_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if paths.missing_binaries():
        pytest.fail(
            f"control plane not built ({', '.join(paths.missing_binaries())}); run `make cluster-build`"
        )
    real = components.apiserver_command
    monkeypatch.setattr(
        components,
        "apiserver_command",
        lambda *args, **kwargs: [*real(*args, **kwargs), "--no-such-flag-for-this-test"],
    )
    cluster = LocalCluster(
        ClusterConfig(state_dir=tmp_path / "cluster", die_with_parent=True, start_timeout_s=60)
    )
    # What a crashed run leaves behind: a live process recorded in a pid file of the directory.
    stale = start_component(
        [sys.executable, "-c", "import time; time.sleep(120)", str(cluster.config.state_dir)],
        cluster.config.log_file("kwok"),
        cluster.config.pid_file("kwok"),
        die_with_parent=True,
    )
    assert cluster.running_components() == ["kwok"]

    with pytest.raises(ComponentNotReadyError) as failure:
        cluster.up(reuse=False)

    message = str(failure.value)
    assert message.startswith("kube-apiserver exited while waiting for /readyz")
    assert str(cluster.config.log_file("kube-apiserver")) in message
    assert "unknown flag: --no-such-flag-for-this-test" in message
    assert cluster.running_components() == []
    assert stale.poll() is not None
