"""Faults injected into the real nodes (`hf-real-*`): a bad device, a lost kubelet, a drain.

Every fault acts on the real components, never on the objects that report them:

- **a device the gate cannot see**: `fail_device_check(node, devices=(0,))` writes the node's
  fault file (`NodeLayout.faults_dir/missing-devices`). Each node's mount namespace shows its
  own fault directory at `faults_host_path(state_dir)`; a job that mounts it (`job_fault_hooks`)
  runs the smoke gate with `HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE_FILE` naming that file, so
  the gate on that node reports those devices missing (reason `device.count`, the node at fault)
  while the same job passes on the other nodes. `clear_device_fault(node)` removes the file.
- **a kubelet stopped**: `stop_kubelet(node)` stops the kubelet process; containerd and the
  containers keep running, as when a kubelet crashes. `lose_node(node)` also SIGKILLs every
  container, as when the machine dies. Either way the node controller marks the node NotReady
  once its lease is older than `--node-monitor-grace-period` (50 s by default).
  `restart_kubelet(cluster, node)` starts it again and waits for the node to be Ready.
- **a drain**: `cordon`/`uncordon`, and `drain` (`kubectl drain`: cordon, then evict through the
  Eviction API, so each container gets SIGTERM and its grace period).
"""

from __future__ import annotations

import dataclasses
import subprocess
from typing import Any, Final

from .cluster import LocalCluster
from .kube import Kubectl
from .node import RealNode, faults_host_path

__all__ = [
    "DEVICE_FAULT_FILE",
    "FAULTS_MOUNT_PATH",
    "clear_device_fault",
    "cordon",
    "drain",
    "fail_device_check",
    "job_fault_hooks",
    "lose_node",
    "restart_kubelet",
    "stop_kubelet",
    "uncordon",
]

DEVICE_FAULT_FILE: Final = "missing-devices"
FAULTS_MOUNT_PATH: Final = "/node-faults"
"""Where `job_fault_hooks` mounts the node's fault directory (read-only) in a job's containers."""
_VOLUME: Final = "node-faults"


def fail_device_check(node: RealNode, devices: tuple[int, ...] = (0,)) -> None:
    """From now on, the gate of a pod on `node` (see `job_fault_hooks`) finds `devices` missing."""
    if not devices or any(d < 0 for d in devices):
        raise ValueError(f"devices: {devices!r}: name one or more local device indices (0, 1, ...)")
    node.layout.faults_dir.mkdir(parents=True, exist_ok=True)
    (node.layout.faults_dir / DEVICE_FAULT_FILE).write_text(",".join(str(d) for d in devices) + "\n")


def clear_device_fault(node: RealNode) -> None:
    (node.layout.faults_dir / DEVICE_FAULT_FILE).unlink(missing_ok=True)


def job_fault_hooks(cluster: LocalCluster) -> dict[str, Any]:
    """`spec.volumes`, `spec.volumeMounts` and `spec.env` entries that let a job's gate read the
    fault file of whichever real node each pod runs on (merge them into a HyperFrameJob spec)."""
    return {
        "volumes": [
            {
                "name": _VOLUME,
                "hostPath": {"path": str(faults_host_path(cluster.config.state_dir)), "type": "Directory"},
            }
        ],
        "volumeMounts": [{"name": _VOLUME, "mountPath": FAULTS_MOUNT_PATH, "readOnly": True}],
        "env": [
            {
                "name": "HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE_FILE",
                "value": f"{FAULTS_MOUNT_PATH}/{DEVICE_FAULT_FILE}",
            }
        ],
    }


def stop_kubelet(node: RealNode) -> bool:
    """Stop the node's kubelet (its containers keep running); True if it was running."""
    return node.stop_kubelet()


def lose_node(node: RealNode) -> int:
    """The node dies: its kubelet stops and every container is SIGKILLed; returns how many
    processes were killed. containerd keeps running, so `restart_kubelet` brings the node back."""
    node.stop_kubelet()
    return node.kill_containers()


def restart_kubelet(cluster: LocalCluster, node: RealNode) -> None:
    """Start the node's kubelet again and wait until the node is Ready."""
    node.start_kubelet(cluster.rest())


def cordon(kubectl: Kubectl, node: str) -> None:
    kubectl.run("cordon", node)


def uncordon(kubectl: Kubectl, node: str) -> None:
    kubectl.run("uncordon", node)


def drain(
    kubectl: Kubectl, node: str, *, pod_selector: str | None = None, timeout_s: int = 300
) -> subprocess.CompletedProcess[str]:
    """`kubectl drain`: cordon `node`, then evict its pods (those matching `pod_selector` only, if
    given) and wait until they are gone. Eviction deletes each pod with its grace period, so the
    containers get SIGTERM first."""
    args = ["drain", node, "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={timeout_s}s"]
    if pod_selector is not None:
        args.append(f"--pod-selector={pod_selector}")
    return dataclasses.replace(kubectl, timeout_s=timeout_s + 30).run(*args, check=False)
