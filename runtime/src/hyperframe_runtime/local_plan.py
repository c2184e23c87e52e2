"""What ``hyperframe local`` runs, derived from the manifests the operator would create (pure).

The job is rendered exactly as in a cluster; this module reads the ConfigMap's ``job.json`` and,
per pod, the smoke-gate and trainer commands and their env, then rewrites only what differs on one
machine: the rendezvous address (127.0.0.1 and a free port), the config path, and the pod-only
facts of the gate (the memory-backed /dev/shm size and RDMA devices, which no local process gets).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.constants import (
    CONFIG_FILE_NAME,
    CONFIG_MOUNT_PATH,
    ENV_STATUS_TOKEN_FILE,
    ENV_STATUS_URL,
    INIT_CONTAINER_NAME,
    LABEL_RANK,
    MAIN_CONTAINER_NAME,
)

__all__ = [
    "COMMAND_MODULES",
    "Command",
    "LocalNode",
    "LocalPlan",
    "ProgressFigures",
    "localize",
    "parse_progress_line",
    "plan",
]

COMMAND_MODULES: Final[Mapping[str, str]] = {
    "hyperframe-smoke": "hyperframe_runtime.smoke.cli",
    "hyperframe-launch": "hyperframe_runtime.launcher",
}
"""The images' console scripts, run locally as ``python -m MODULE`` (no PATH needed)."""

_CONFIG_PATH: Final = f"{CONFIG_MOUNT_PATH}/{CONFIG_FILE_NAME}"
_LOCAL_HOST: Final = "127.0.0.1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    module: str
    args: tuple[str, ...]
    env: Mapping[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalNode:
    node_rank: int
    pod_name: str
    gate: Command | None
    """The smoke-gate init container, or None when the runtime disabled the gate."""
    trainer: Command


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalPlan:
    job: ResolvedJobConfig
    job_json: str
    nodes: tuple[LocalNode, ...]


def _command(container: Mapping[str, Any], pod_name: str) -> Command:
    command = list(container.get("command") or [])
    if len(command) != 1 or command[0] not in COMMAND_MODULES:
        raise ValueError(f"pod {pod_name} container {container.get('name')}: unexpected command {command}")
    env = {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}
    return Command(module=COMMAND_MODULES[command[0]], args=tuple(container.get("args") or ()), env=env)


def plan(objects: Sequence[Mapping[str, Any]]) -> LocalPlan:
    """Read the rendered objects (as ``hyperframe.render.render_job`` returns them)."""
    configmaps = [o for o in objects if o.get("kind") == "ConfigMap"]
    if len(configmaps) != 1 or CONFIG_FILE_NAME not in configmaps[0].get("data", {}):
        raise ValueError(f"expected one ConfigMap with {CONFIG_FILE_NAME}, found {len(configmaps)}")
    rendered = ResolvedJobConfig.from_json(str(configmaps[0]["data"][CONFIG_FILE_NAME]))
    # This machine's /dev/shm is not the pod's emptyDir, and no device plugin hands out RDMA devices.
    smoke = dataclasses.replace(rendered.smoke, shm_size_bytes=0, rdma_enabled=False, rdma_resource_name=None)
    job = dataclasses.replace(rendered, smoke=smoke)
    job_json = job.to_json()
    nodes = []
    for pod in (o for o in objects if o.get("kind") == "Pod"):
        name = str(pod["metadata"]["name"])
        spec = pod["spec"]
        inits = [c for c in spec.get("initContainers") or [] if c.get("name") == INIT_CONTAINER_NAME]
        mains = [c for c in spec.get("containers") or [] if c.get("name") == MAIN_CONTAINER_NAME]
        if len(mains) != 1:
            raise ValueError(f"pod {name}: no {MAIN_CONTAINER_NAME} container")
        nodes.append(
            LocalNode(
                node_rank=int(pod["metadata"]["labels"][LABEL_RANK]),
                pod_name=name,
                gate=_command(inits[0], name) if inits else None,
                trainer=_command(mains[0], name),
            )
        )
    nodes.sort(key=lambda n: n.node_rank)
    if [n.node_rank for n in nodes] != list(range(job.nodes)):
        raise ValueError(
            f"expected pods for node ranks 0..{job.nodes - 1}, found {[n.node_rank for n in nodes]}"
        )
    return LocalPlan(job=job, job_json=job_json, nodes=tuple(nodes))


def localize(command: Command, *, port: int, config_path: str, extra_env: Mapping[str, str] = {}) -> Command:
    """The same command for this machine: loopback rendezvous, local config path, no status URL."""
    env = dict(command.env)
    for key in ("MASTER_ADDR", "PET_MASTER_ADDR"):
        if key in env:
            env[key] = _LOCAL_HOST
    for key in ("MASTER_PORT", "PET_MASTER_PORT"):
        if key in env:
            env[key] = str(port)
    if "HYPERFRAME_CONFIG" in env:
        env["HYPERFRAME_CONFIG"] = config_path
    for key in (ENV_STATUS_URL, ENV_STATUS_TOKEN_FILE):
        env.pop(key, None)
    env.update(extra_env)
    args = tuple(config_path if a == _CONFIG_PATH else a for a in command.args)
    return Command(module=command.module, args=args, env=env)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressFigures:
    frame: int
    total_frames: int
    loss: float
    samples_per_second: float


# Reads what hyperframe_runtime.progress.format_line writes (a test keeps the two in step).
_PROGRESS: Final = re.compile(
    r"frame (?P<frame>\d+)/(?P<total>\d+) step \d+ loss (?P<loss>[-+\d.eEinfa]+) (?P<sps>[\d.]+) samples/s"
)


def parse_progress_line(line: str) -> ProgressFigures | None:
    """The figures of a per-frame progress line anywhere in ``line``, or None."""
    match = _PROGRESS.search(line)
    if match is None:
        return None
    return ProgressFigures(
        frame=int(match["frame"]),
        total_frames=int(match["total"]),
        loss=float(match["loss"]),
        samples_per_second=float(match["sps"]),
    )
