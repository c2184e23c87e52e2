"""What the simulated nodes look like and the annotations that drive the simulated pod lifecycle.

These names are the contract between the project's KWOK Stages (`stages/*.yaml`) and the tests
that use them; docs/local-cluster.md documents them and a unit test checks that every annotation
named here is read by a Stage. Pure: builders return plain dicts, nothing talks to a cluster.

Pod annotations (set them at creation, or patch them onto a pod later):

- ``sim.hyperframe.dev/init-exit-code``: non-zero makes an init container fail with that code
  (pod ends Failed). Absent or "0": init containers complete.
- ``sim.hyperframe.dev/init-message``: termination message of the init container(s), on success
  and on failure.
- ``sim.hyperframe.dev/init-container``: which init container fails (default: the first).
- ``sim.hyperframe.dev/init-duration``: how long init containers run (Go duration, e.g. "2s").
- ``sim.hyperframe.dev/exit-code``: once present on a Running pod, every container exits with it:
  "0" ends the pod Succeeded, anything else Failed. Absent: the pod runs until deleted.
- ``sim.hyperframe.dev/message``: termination message of the containers when they exit.
- ``sim.hyperframe.dev/run-duration``: how long the pod keeps running before it exits.

Node annotation:

- ``sim.hyperframe.dev/not-ready: "<message>"``: the node reports Ready=False with that message
  until the annotation is removed.

How the init containers of every pod on one node end (a "bad node" failing its smoke gate, or a
node passing with a chosen report) is set with `hyperframe_devcluster.faults.set_init_outcome`
(or `fail_init_containers_on_node`), since a pod Stage cannot read its
node's annotations.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Final

import yaml

__all__ = [
    "ANNOTATION_EXIT_CODE",
    "ANNOTATION_INIT_CONTAINER",
    "ANNOTATION_INIT_DURATION",
    "ANNOTATION_INIT_EXIT_CODE",
    "ANNOTATION_INIT_MESSAGE",
    "ANNOTATION_MESSAGE",
    "ANNOTATION_NODE_NOT_READY",
    "ANNOTATION_RUN_DURATION",
    "DEFAULT_INIT_MESSAGE",
    "GPUS_PER_NODE",
    "GPU_PRODUCT",
    "GPU_PRODUCT_LABEL",
    "GPU_RESOURCE",
    "GPU_TAINT_KEY",
    "GPU_TAINT_VALUE",
    "GPU_TOLERATION",
    "KWOK_NODE_ANNOTATION",
    "LABEL_SIMULATED",
    "POD_ANNOTATIONS",
    "RDMA_PER_NODE",
    "RDMA_RESOURCE",
    "SIM_PREFIX",
    "gpu_node",
    "gpu_node_name",
    "project_stages",
    "stage_files",
    "stage_text",
    "system_node",
    "system_node_name",
]

SIM_PREFIX: Final = "sim.hyperframe.dev/"

ANNOTATION_INIT_EXIT_CODE: Final = SIM_PREFIX + "init-exit-code"
ANNOTATION_INIT_MESSAGE: Final = SIM_PREFIX + "init-message"
ANNOTATION_INIT_CONTAINER: Final = SIM_PREFIX + "init-container"
ANNOTATION_INIT_DURATION: Final = SIM_PREFIX + "init-duration"
ANNOTATION_EXIT_CODE: Final = SIM_PREFIX + "exit-code"
ANNOTATION_MESSAGE: Final = SIM_PREFIX + "message"
ANNOTATION_RUN_DURATION: Final = SIM_PREFIX + "run-duration"
ANNOTATION_NODE_NOT_READY: Final = SIM_PREFIX + "not-ready"

POD_ANNOTATIONS: Final = (
    ANNOTATION_INIT_EXIT_CODE,
    ANNOTATION_INIT_MESSAGE,
    ANNOTATION_INIT_CONTAINER,
    ANNOTATION_INIT_DURATION,
    ANNOTATION_EXIT_CODE,
    ANNOTATION_MESSAGE,
    ANNOTATION_RUN_DURATION,
)

# Termination message of a completed init container when the pod does not choose one.
DEFAULT_INIT_MESSAGE: Final = "simulated by KWOK: init container completed"

# The simulated hardware.
GPU_RESOURCE: Final = "nvidia.com/gpu"
GPUS_PER_NODE: Final = 8
RDMA_RESOURCE: Final = "rdma/rdma_shared_device_a"
RDMA_PER_NODE: Final = 1000
GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
GPU_PRODUCT: Final = "NVIDIA-H200"
GPU_TAINT_KEY: Final = "nvidia.com/gpu"
GPU_TAINT_VALUE: Final = "present"
GPU_TOLERATION: Final[dict[str, str]] = {
    "key": GPU_TAINT_KEY,
    "operator": "Equal",
    "value": GPU_TAINT_VALUE,
    "effect": "NoSchedule",
}
# KWOK manages only nodes with this annotation (see components.KWOK_MANAGE_ANNOTATION).
KWOK_NODE_ANNOTATION: Final[dict[str, str]] = {"kwok.x-k8s.io/node": "fake"}
LABEL_SIMULATED: Final = "hyperframe.dev/simulated-node"


def gpu_node_name(index: int) -> str:
    return f"hf-gpu-{index}"


def system_node_name(index: int) -> str:
    return f"hf-system-{index}"


def _node(
    name: str, address: str, labels: dict[str, str], capacity: dict[str, str], taints: list[dict[str, str]]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {**KWOK_NODE_ANNOTATION, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                LABEL_SIMULATED: "true",
                **labels,
            },
        },
        "spec": {"taints": taints},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
        },
    }


def gpu_node(index: int) -> dict[str, Any]:
    """An 8x H200 node: GPUs, RDMA, CPU, memory; tainted so only pods tolerating GPUs land."""
    name = gpu_node_name(index)
    return _node(
        name,
        f"10.0.0.{10 + index}",
        labels={
            GPU_PRODUCT_LABEL: GPU_PRODUCT,
            "nvidia.com/gpu.count": str(GPUS_PER_NODE),
            "nvidia.com/gpu.present": "true",
            "node.kubernetes.io/instance-type": "sim-h200x8",
            "topology.kubernetes.io/zone": "sim-zone-a",
        },
        capacity={
            GPU_RESOURCE: str(GPUS_PER_NODE),
            RDMA_RESOURCE: str(RDMA_PER_NODE),
            "cpu": "192",
            "memory": "2Ti",
            "ephemeral-storage": "28Ti",
            "pods": "110",
        },
        taints=[{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": "NoSchedule"}],
    )


def system_node(index: int) -> dict[str, Any]:
    """An untainted CPU-only node for everything that is not a GPU workload."""
    return _node(
        system_node_name(index),
        f"10.0.1.{10 + index}",
        labels={"node.kubernetes.io/instance-type": "sim-cpu", "topology.kubernetes.io/zone": "sim-zone-a"},
        capacity={"cpu": "32", "memory": "128Gi", "ephemeral-storage": "1Ti", "pods": "110"},
        taints=[],
    )


def stage_files() -> list[Traversable]:
    """The Stage manifests shipped in this package (`stages/*.yaml`)."""
    folder = resources.files("hyperframe_devcluster").joinpath("stages")
    return sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)


def stage_text(file_name: str) -> str:
    return resources.files("hyperframe_devcluster").joinpath("stages", file_name).read_text()


def project_stages() -> list[dict[str, Any]]:
    """The project's KWOK Stage objects, installed by `up`."""
    return [yaml.safe_load(f.read_text()) for f in stage_files()]
