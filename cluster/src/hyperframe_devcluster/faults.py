"""Faults injected into a running local cluster: bad nodes, NotReady nodes, pods told to exit.

A "bad node" (every pod bound to it fails its init container, e.g. the smoke gate) is a KWOK
Stage created at run time: it selects pods by `.spec.nodeName`, because a pod Stage cannot read
its node's annotations, and the operator creates the pods itself, so a test cannot annotate them
before they run. Its weight (1) beats the project's default Stages (weight 0), so it applies
deterministically. It is derived from `stages/pod-init-fail.yaml`, so a node fault fails a pod
exactly like a pod annotated with `sim.hyperframe.dev/init-exit-code`.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Final

import yaml

from .kube import Kubectl
from .sim import ANNOTATION_EXIT_CODE, ANNOTATION_MESSAGE, ANNOTATION_NODE_NOT_READY, stage_text

__all__ = [
    "NODE_FAULT_LABEL",
    "clear_node_faults",
    "fail_init_containers_on_node",
    "finish_pod",
    "node_fault_stage",
    "set_node_not_ready",
    "set_node_ready",
]

NODE_FAULT_LABEL: Final = "sim.hyperframe.dev/fault-node"
_OVERRIDES: Final = "{{/* hyperframe:overrides */}}"
_MAX_MESSAGE_BYTES: Final = 4096  # what a kubelet keeps of a termination message


def _stage_name(node: str) -> str:
    return f"hyperframe-node-fault-{node}"


def node_fault_stage(
    node: str, *, exit_code: int, message: str, container: str | None = None
) -> dict[str, Any]:
    """The Stage that fails the init container of every pod bound to `node` (pure)."""
    if not 1 <= exit_code <= 255:
        raise ValueError(f"exit_code: {exit_code} is not a failure; use 1..255")
    if len(message.encode()) > _MAX_MESSAGE_BYTES:
        raise ValueError(
            f"message: {len(message.encode())} bytes; a kubelet keeps at most {_MAX_MESSAGE_BYTES}"
        )
    base = yaml.safe_load(stage_text("pod-init-fail.yaml"))
    stage: dict[str, Any] = copy.deepcopy(base)
    stage["metadata"] = {"name": _stage_name(node), "labels": {NODE_FAULT_LABEL: node}}
    spec = stage["spec"]
    spec["weight"] = 1
    expressions = [
        e
        for e in spec["selector"]["matchExpressions"]
        if "sim.hyperframe.dev/init-exit-code" not in e["jq"]["key"]
    ]
    expressions.append({"jq": {"key": ".spec.nodeName", "operator": "In", "values": [node]}})
    spec["selector"]["matchExpressions"] = expressions
    # Go template string literals accept JSON string syntax.
    overrides = f"{{{{ $code = {json.dumps(str(exit_code))} }}}}{{{{ $message = {json.dumps(message)} }}}}"
    if container is not None:
        overrides += f"{{{{ $target = {json.dumps(container)} }}}}"
    patch = spec["steps"][0]["patch"]
    if _OVERRIDES not in patch["template"]:
        raise RuntimeError(
            "stages/pod-init-fail.yaml lost its overrides marker; node faults cannot be derived"
        )
    patch["template"] = patch["template"].replace(_OVERRIDES, overrides)
    spec["steps"][1]["event"]["message"] = f"init container failed on bad node {node} (simulated by KWOK)"
    return stage


def fail_init_containers_on_node(
    kubectl: Kubectl, node: str, *, exit_code: int = 1, message: str, container: str | None = None
) -> str:
    """Make `node` a bad node: from now on, init containers of pods bound to it fail.

    Returns the Stage name; `clear_node_faults` removes it. Pods already past init are not touched.
    """
    stage = node_fault_stage(node, exit_code=exit_code, message=message, container=container)
    kubectl.apply([stage])
    return str(stage["metadata"]["name"])


def clear_node_faults(kubectl: Kubectl, node: str | None = None) -> None:
    """Remove the bad-node Stage of `node` (of every node when None)."""
    selector = f"{NODE_FAULT_LABEL}={node}" if node else NODE_FAULT_LABEL
    kubectl.run("delete", "stages.kwok.x-k8s.io", "-l", selector, "--ignore-not-found", "--wait=false")


def set_node_not_ready(kubectl: Kubectl, node: str, message: str = "simulated node failure") -> None:
    """The node reports Ready=False (with `message`) until `set_node_ready`."""
    kubectl.annotate("node", node, {ANNOTATION_NODE_NOT_READY: message})


def set_node_ready(kubectl: Kubectl, node: str) -> None:
    kubectl.annotate("node", node, {ANNOTATION_NODE_NOT_READY: None})


def finish_pod(kubectl: Kubectl, namespace: str, pod: str, *, exit_code: int = 0, message: str = "") -> None:
    """Make a running pod's containers exit with `exit_code` (0: Succeeded, else Failed)."""
    kubectl.annotate(
        "pod", pod, {ANNOTATION_EXIT_CODE: str(exit_code), ANNOTATION_MESSAGE: message}, namespace=namespace
    )
