"""The real nodes' device fault: the file a node shows its pods, and the job hooks that read it.

Covers: `fail_device_check` writing the indices the gate's file hook reads (and refusing none),
`clear_device_fault` removing them, and `job_fault_hooks` mounting the one host path every node
binds its own fault directory over, read-only, with the gate's variable naming the file there.
The faults themselves run against real nodes in tests/e2e/test_node_faults.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hyperframe_devcluster import node_faults
from hyperframe_devcluster.cluster import LocalCluster
from hyperframe_devcluster.config import ClusterConfig
from hyperframe_devcluster.node import RealNode, faults_host_path
from hyperframe_devcluster.pki import Pki
from hyperframe_runtime.smoke.probe import ENV_SIMULATE_MISSING_DEVICE_FILE


def _node(tmp_path: Path, index: int) -> RealNode:
    return RealNode(ClusterConfig(state_dir=tmp_path), Pki(tmp_path / "pki"), index)


def test_a_device_fault_is_a_file_of_that_node_only(tmp_path: Path) -> None:
    first, second = _node(tmp_path, 0), _node(tmp_path, 1)
    node_faults.fail_device_check(second, devices=(0, 1))

    assert (second.layout.faults_dir / node_faults.DEVICE_FAULT_FILE).read_text() == "0,1\n"
    assert not (first.layout.faults_dir / node_faults.DEVICE_FAULT_FILE).exists()
    node_faults.clear_device_fault(second)
    assert not (second.layout.faults_dir / node_faults.DEVICE_FAULT_FILE).exists()
    with pytest.raises(ValueError, match="devices"):
        node_faults.fail_device_check(second, devices=())


def test_the_job_hooks_mount_the_shared_host_path_and_name_the_file_for_the_gate(tmp_path: Path) -> None:
    hooks = node_faults.job_fault_hooks(LocalCluster(ClusterConfig(state_dir=tmp_path)))

    [volume] = hooks["volumes"]
    assert volume["hostPath"] == {"path": str(faults_host_path(tmp_path)), "type": "Directory"}
    [mount] = hooks["volumeMounts"]
    assert mount == {"name": volume["name"], "mountPath": node_faults.FAULTS_MOUNT_PATH, "readOnly": True}
    [env] = hooks["env"]
    assert env == {
        "name": ENV_SIMULATE_MISSING_DEVICE_FILE,
        "value": f"{node_faults.FAULTS_MOUNT_PATH}/{node_faults.DEVICE_FAULT_FILE}",
    }
