"""Bringing a cluster up fails loudly and cleanly.

Covers: a component that cannot start fails `up` with its name, what was awaited and the tail
of its own log, and `up` leaves no process of that cluster running (no separate session
cluster is needed: etcd starts, then a deliberately broken kube-apiserver).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hyperframe_devcluster import ClusterConfig, ComponentNotReadyError, LocalCluster, components, paths

pytestmark = pytest.mark.cluster


def test_a_component_that_cannot_start_fails_up_with_its_log_tail_and_nothing_keeps_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if paths.missing_binaries():
        pytest.fail(
            f"control plane not built ({', '.join(paths.missing_binaries())}); run `make cluster-build`"
        )
    real = components.apiserver_command
    monkeypatch.setattr(
        components, "apiserver_command", lambda *args: [*real(*args), "--no-such-flag-for-this-test"]
    )
    cluster = LocalCluster(
        ClusterConfig(state_dir=tmp_path / "cluster", die_with_parent=True, start_timeout_s=60)
    )

    with pytest.raises(ComponentNotReadyError) as failure:
        cluster.up(reuse=False)

    message = str(failure.value)
    assert message.startswith("kube-apiserver exited while waiting for /readyz")
    assert str(cluster.config.log_file("kube-apiserver")) in message
    assert "unknown flag: --no-such-flag-for-this-test" in message
    assert cluster.running_components() == []
