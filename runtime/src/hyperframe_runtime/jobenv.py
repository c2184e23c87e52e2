"""What a pod knows about its job: the resolved job config file plus the rendezvous env.

Shared by the smoke gate and the launcher so that both read, cross-check and reject the same
things the same way. The renderer sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE (ranks), NODE_RANK,
NPROC_PER_NODE and PET_NNODES (nodes), plus the PET_* twins torchrun reads; the config file says what the job
asked for. A missing or malformed variable, or a disagreement between the two, is a config error
(the gate's exit 2) that names the variable and the fix.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hyperframe.api.errors import SpecError
from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.constants import CONFIG_FILE_NAME, CONFIG_MOUNT_PATH
from hyperframe.version import RUNTIME_DISTRIBUTION, distribution_version

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "JobEnv",
    "JobEnvError",
    "check_runtime_version",
    "load_job",
    "node_name",
]

DEFAULT_CONFIG_PATH = Path(CONFIG_MOUNT_PATH) / CONFIG_FILE_NAME


class JobEnvError(ValueError):
    """The job config or the env is wrong; ``reason_id`` is a ``config.*`` smoke failure id."""

    def __init__(self, reason_id: str, message: str) -> None:
        super().__init__(message)
        self.reason_id = reason_id


@dataclass(frozen=True, slots=True, kw_only=True)
class JobEnv:
    """This pod's place in the job, from the environment."""

    master_addr: str
    master_port: int
    nnodes: int
    node_rank: int
    nproc_per_node: int

    @property
    def world_size(self) -> int:
        """Ranks in the job."""
        return self.nnodes * self.nproc_per_node

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JobEnv:
        def get(*names: str) -> str:
            for name in names:
                value = env.get(name, "").strip()
                if value:
                    return value
            raise JobEnvError(
                "config.missing-env",
                f"{' / '.join(names)}: not set; the operator sets it in every pod and local mode sets it "
                "for you; set it when running by hand",
            )

        def integer(*names: str) -> int:
            text = get(*names)
            try:
                return int(text)
            except ValueError:
                raise JobEnvError("config.missing-env", f"{names[0]}: {text!r} is not an integer") from None

        result = cls(
            master_addr=get("MASTER_ADDR", "PET_MASTER_ADDR"),
            master_port=integer("MASTER_PORT", "PET_MASTER_PORT"),
            nnodes=integer("PET_NNODES", "NNODES"),
            node_rank=integer("NODE_RANK", "PET_NODE_RANK"),
            nproc_per_node=integer("NPROC_PER_NODE", "PET_NPROC_PER_NODE"),
        )
        if not 0 < result.master_port < 65536:
            raise JobEnvError(
                "config.missing-env", f"MASTER_PORT: {result.master_port} is not a TCP port (1-65535)"
            )
        if result.nnodes < 1 or not 0 <= result.node_rank < result.nnodes:
            raise JobEnvError(
                "config.world-size",
                f"NODE_RANK: {result.node_rank} is outside 0..{result.nnodes - 1} (PET_NNODES={result.nnodes} nodes)",
            )
        if result.nproc_per_node < 1:
            raise JobEnvError("config.world-size", f"NPROC_PER_NODE: {result.nproc_per_node} must be >= 1")
        world = env.get("WORLD_SIZE", "").strip()
        if world and world != str(result.world_size):
            raise JobEnvError(
                "config.world-size",
                f"WORLD_SIZE: {world}, but PET_NNODES ({result.nnodes}) x NPROC_PER_NODE ({result.nproc_per_node}) "
                f"= {result.world_size}; WORLD_SIZE counts ranks, set it to {result.world_size}",
            )
        return result

    def check_against(self, job: ResolvedJobConfig) -> None:
        """The env must describe the job the config file describes."""
        if self.nnodes != job.nodes:
            raise JobEnvError(
                "config.world-size",
                f"PET_NNODES: {self.nnodes} nodes in the env, but job.json says nodes={job.nodes}; "
                "re-render the job instead of editing pod env by hand",
            )
        if self.nproc_per_node != job.procs_per_node:
            raise JobEnvError(
                "config.world-size",
                f"NPROC_PER_NODE: {self.nproc_per_node} in the env, but job.json says procsPerNode="
                f"{job.procs_per_node}; re-render the job instead of editing pod env by hand",
            )
        if self.world_size != job.world_size:
            raise JobEnvError(
                "config.world-size",
                f"PET_NNODES x NPROC_PER_NODE = {self.world_size}, but job.json says worldSize={job.world_size}",
            )


def check_runtime_version(job: ResolvedJobConfig, installed: str | None) -> None:
    """The image must hold the hyperframe-runtime the operator expects (``runtimeVersion`` of
    job.json; empty: not checked): a job image built FROM another framework image would run
    another gate and launcher than the operator rendered the pod for."""
    if not job.runtime_version or installed == job.runtime_version:
        return
    raise JobEnvError(
        "config.runtime-version",
        f"image {job.image or '(unknown)'}: it holds {RUNTIME_DISTRIBUTION} "
        f"{installed or '(not installed)'}, but the operator expects {job.runtime_version}; rebuild "
        "the image FROM the runtime's framework image (hyperframe image build DIR --from RUNTIME), "
        "or use the runtime of the operator's release",
    )


def load_job(path: str | os.PathLike[str], *, installed_runtime: str | None = None) -> ResolvedJobConfig:
    """Read the resolved job config; any problem is a ``config.invalid`` error naming the file,
    and an image whose hyperframe-runtime (``installed_runtime``, default: the installed one) is
    not the version the operator expects is a ``config.runtime-version`` error."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise JobEnvError(
            "config.invalid",
            f"{path}: cannot read the job config ({exc.strerror}); mount the job's ConfigMap there or pass --config",
        ) from None
    try:
        job = ResolvedJobConfig.from_json(text)
    except (SpecError, ValueError) as exc:
        raise JobEnvError("config.invalid", f"{path}: {exc}") from None
    check_runtime_version(job, installed_runtime or distribution_version(RUNTIME_DISTRIBUTION))
    return job


def node_name(env: Mapping[str, str]) -> str:
    """The Kubernetes node name (NODE_NAME, from the downward API), else this host's name."""
    return env.get("NODE_NAME") or socket.gethostname()
