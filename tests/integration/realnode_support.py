"""Helpers for tests on the real nodes: pods pinned to one (`hf-real-0` by default) and images pushed by digest."""

from __future__ import annotations

from typing import Any

from hyperframe_devcluster import node_config, oci, rootfs
from hyperframe_devcluster.kube import Kubectl, poll

__all__ = ["debian_python_image", "pod_phase", "real_node_pod", "wait_phase"]


def debian_python_image(registry: str) -> str:
    """A Debian bookworm + python3 image (debootstrap, cached), pushed; returns `repo@sha256:...`."""
    layer = oci.tar_layer(rootfs.debian_rootfs(("python3", "ca-certificates")))
    image = oci.OciImage(layers=[layer], cmd=["/bin/bash"])
    digest = oci.push(registry, "hyperframe-test/debian-python", "bookworm", image)
    return f"{registry}/hyperframe-test/debian-python@{digest}"


def real_node_pod(
    name: str, image: str, command: list[str], *, node: str | None = node_config.NODE_NAME, **spec: Any
) -> dict[str, Any]:
    """A pod that only a real node runs (its label and its taint's toleration); `node` picks which
    (hf-real-0 by default; None: any real node)."""
    labels = spec.pop("labels", {})
    selector = {node_config.REAL_NODE_LABEL: "true"}
    if node is not None:
        selector["kubernetes.io/hostname"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": selector,
            "tolerations": [
                {"key": node_config.REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}
            ],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": image, "command": command}],
            **spec,
        },
    }


def pod_phase(kubectl: Kubectl, namespace: str, name: str) -> str:
    result = kubectl.run("get", "pod", name, "-n", namespace, "-o", "jsonpath={.status.phase}", check=False)
    return result.stdout.strip()


def wait_phase(kubectl: Kubectl, namespace: str, name: str, phases: set[str], timeout_s: float = 120) -> str:
    return poll(
        lambda: pod_phase(kubectl, namespace, name),
        lambda phase: phase in phases,
        timeout_s=timeout_s,
        what=f"pod {namespace}/{name} to reach {sorted(phases)}",
    )
