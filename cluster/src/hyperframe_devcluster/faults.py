"""Faults injected into a running local cluster: node init outcomes, NotReady nodes, pod exits.

A node init outcome ("every pod bound to node X: its init container, e.g. the smoke gate, ends
with exit code N and termination message M") is a KWOK Stage created at run time. It selects
pods by `.spec.nodeName`, because a pod Stage cannot read its node's annotations, and the
operator creates the pods itself, so a test cannot annotate them before they run. A failing
outcome is derived from `stages/pod-init-fail.yaml`, a passing one from
`stages/pod-init-complete.yaml` (only the selector, code and message differ), so pods behave
exactly as when annotated. Its weight (1) beats the project's default Stages (weight 0), so it
applies deterministically; there is at most one outcome Stage per node (setting another
replaces it), because KWOK picks at random among matching Stages of positive weight.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Final

import yaml

from .kube import Kubectl
from .sim import (
    ANNOTATION_EXIT_CODE,
    ANNOTATION_INIT_EXIT_CODE,
    ANNOTATION_MESSAGE,
    ANNOTATION_NODE_NOT_READY,
    stage_text,
)

__all__ = [
    "NODE_FAULT_LABEL",
    "clear_node_faults",
    "fail_init_containers_on_node",
    "finish_pod",
    "init_outcome_stage",
    "node_fault_stage",
    "set_init_outcome",
    "set_node_not_ready",
    "set_node_ready",
]

NODE_FAULT_LABEL: Final = "sim.hyperframe.dev/fault-node"
_OVERRIDES: Final = "{{/* hyperframe:overrides */}}"
_MAX_MESSAGE_BYTES: Final = 4096  # what a kubelet keeps of a termination message


def _stage_name(node: str) -> str:
    return f"hyperframe-node-fault-{node}"


def init_outcome_stage(
    node: str, *, exit_code: int, message: str, container: str | None = None
) -> dict[str, Any]:
    """The Stage that ends the init container of every pod bound to `node` this way (pure).

    exit_code 0: the init containers complete with `message` and the pod runs; 1..255: the init
    container (`container`, default the first) fails with it and the pod ends Failed.
    """
    if not 0 <= exit_code <= 255:
        raise ValueError(f"exit_code: {exit_code} is not an exit code; use 0..255")
    if len(message.encode()) > _MAX_MESSAGE_BYTES:
        raise ValueError(
            f"message: {len(message.encode())} bytes; a kubelet keeps at most {_MAX_MESSAGE_BYTES}"
        )
    if exit_code == 0 and container is not None:
        raise ValueError(
            "container: only a failing outcome picks one init container; 0 completes all of them"
        )
    base = "pod-init-fail.yaml" if exit_code else "pod-init-complete.yaml"
    stage: dict[str, Any] = copy.deepcopy(yaml.safe_load(stage_text(base)))
    stage["metadata"] = {"name": _stage_name(node), "labels": {NODE_FAULT_LABEL: node}}
    spec = stage["spec"]
    spec["weight"] = 1
    expressions = [
        e for e in spec["selector"]["matchExpressions"] if ANNOTATION_INIT_EXIT_CODE not in e["jq"]["key"]
    ]
    expressions.append({"jq": {"key": ".spec.nodeName", "operator": "In", "values": [node]}})
    spec["selector"]["matchExpressions"] = expressions
    # Go template string literals accept JSON string syntax.
    overrides = f"{{{{ $message = {json.dumps(message)} }}}}"
    if exit_code:
        overrides += f"{{{{ $code = {json.dumps(str(exit_code))} }}}}"
    if container is not None:
        overrides += f"{{{{ $target = {json.dumps(container)} }}}}"
    patch = spec["steps"][0]["patch"]
    if _OVERRIDES not in patch["template"]:
        raise RuntimeError(f"stages/{base} lost its overrides marker; node outcomes cannot be derived")
    patch["template"] = patch["template"].replace(_OVERRIDES, overrides)
    for step in spec["steps"][1:]:
        if "event" in step:
            step["event"]["message"] = f"init container failed on bad node {node} (simulated by KWOK)"
    return stage


def node_fault_stage(
    node: str, *, exit_code: int, message: str, container: str | None = None
) -> dict[str, Any]:
    """The Stage that fails the init container of every pod bound to `node` (pure)."""
    if exit_code == 0:
        raise ValueError("exit_code: 0 is not a failure; use 1..255 (or init_outcome_stage for a pass)")
    return init_outcome_stage(node, exit_code=exit_code, message=message, container=container)


def set_init_outcome(
    kubectl: Kubectl, node: str, *, exit_code: int, message: str, container: str | None = None
) -> str:
    """From now on, init containers of pods bound to `node` end with `exit_code` and `message`.

    Replaces an earlier outcome of that node. Returns the Stage name; `clear_node_faults` removes
    it. Pods already past init are not touched.
    """
    stage = init_outcome_stage(node, exit_code=exit_code, message=message, container=container)
    kubectl.apply([stage])
    return str(stage["metadata"]["name"])


def fail_init_containers_on_node(
    kubectl: Kubectl, node: str, *, exit_code: int = 1, message: str, container: str | None = None
) -> str:
    """Make `node` a bad node: init containers of pods bound to it fail (see `set_init_outcome`)."""
    stage = node_fault_stage(node, exit_code=exit_code, message=message, container=container)
    kubectl.apply([stage])
    return str(stage["metadata"]["name"])


def clear_node_faults(kubectl: Kubectl, node: str | None = None) -> None:
    """Remove the init outcome Stage of `node` (of every node when None)."""
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
