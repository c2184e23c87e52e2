"""What a pod knows about its job: the resolved job config file plus the rendezvous env.

Shared by the smoke gate and the launcher so that both read, cross-check and reject the same
things the same way. The renderer sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE (ranks), NODE_RANK,
NPROC_PER_NODE and PET_NNODES (nodes), plus the PET_* twins torchrun reads; the config file says what the job
asked for. A missing or malformed variable, or a disagreement between the two, is a config error
(the gate's exit 2) that names the variable and the fix.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hyperframe.api.codec import check, parse_lenient
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.fields import json_name, value_rules
from hyperframe.api.introspect import model_fields
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


# The variables the renderer sets, each with its torchrun twin (either one is read).
_TWINS: Final[dict[str, str]] = {
    "MASTER_ADDR": "PET_MASTER_ADDR",
    "MASTER_PORT": "PET_MASTER_PORT",
    "PET_NNODES": "NNODES",
    "NODE_RANK": "PET_NODE_RANK",
    "NPROC_PER_NODE": "PET_NPROC_PER_NODE",
}
_SET_BY_THE_OPERATOR: Final = (
    "the operator sets it in every pod and local mode sets it for you; set it when running by hand"
)
_RE_RENDER: Final = "re-render the job instead of editing pod env by hand"


def node_rank_errors(node_rank: int, nnodes: int) -> list[FieldError]:
    """The rule between NODE_RANK and PET_NNODES, for every config read from the pod's env."""
    if node_rank < nnodes:
        return []
    return [
        FieldError(
            "NODE_RANK",
            f"{node_rank} is outside 0..{nnodes - 1} (PET_NNODES={nnodes} nodes)",
            "the pods are numbered from 0 to PET_NNODES - 1; set it in that range",
        )
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobEnv:
    """This pod's place in the job, from the environment. Each field's rules are declared with it
    and checked by the job API's codec; an error names the variable as ``VAR: problem: fix``."""

    master_addr: str = field(metadata=value_rules(json="MASTER_ADDR", min_length=1))
    master_port: int = field(metadata=value_rules(json="MASTER_PORT", minimum=1, maximum=65535))
    nnodes: int = field(metadata=value_rules(json="PET_NNODES", minimum=1))
    node_rank: int = field(metadata=value_rules(json="NODE_RANK", minimum=0))
    nproc_per_node: int = field(metadata=value_rules(json="NPROC_PER_NODE", minimum=1))

    def __post_init__(self) -> None:
        errors = check(self)
        if not errors:
            errors.extend(node_rank_errors(self.node_rank, self.nnodes))
        _refuse(errors)

    @property
    def world_size(self) -> int:
        """Ranks in the job."""
        return self.nnodes * self.nproc_per_node

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JobEnv:
        """Read the rendezvous env; raises :class:`JobEnvError` naming every bad variable: a
        missing or unreadable one is ``config.missing-env``, a wrong size ``config.world-size``."""
        raw: dict[str, Any] = {}
        unset: list[FieldError] = []
        for f, shape in model_fields(cls):
            name = json_name(f)
            text = env.get(name, "").strip() or env.get(_TWINS[name], "").strip()
            if text:
                raw[name] = int(text) if shape.kind == "int" and re.fullmatch(r"[+-]?[0-9]+", text) else text
            else:
                unset.append(FieldError(f"{name} / {_TWINS[name]}", "not set", _SET_BY_THE_OPERATOR))
        result, errors = parse_lenient(cls, raw)  # the rule between fields raises in __post_init__
        unreadable = any(isinstance(raw.get(e.path), str) and e.path != "MASTER_ADDR" for e in errors)
        errors = [*unset, *(e for e in errors if e.path in raw)]
        if result is None or errors:
            _refuse(errors, "config.missing-env" if unset or unreadable else None)
        assert result is not None
        world = env.get("WORLD_SIZE", "").strip()
        if world and world != str(result.world_size):
            n, p, ranks = result.nnodes, result.nproc_per_node, result.world_size
            problem = f"{world}, but PET_NNODES ({n}) x NPROC_PER_NODE ({p}) = {ranks}"
            _refuse([FieldError("WORLD_SIZE", problem, f"WORLD_SIZE counts ranks; set it to {ranks}")])
        return result

    def check_against(self, job: ResolvedJobConfig) -> None:
        """The env must describe the job the config file describes."""
        errors = []
        if self.nnodes != job.nodes:
            problem = f"{self.nnodes} nodes in the env, but job.json says nodes={job.nodes}"
            errors.append(FieldError("PET_NNODES", problem, _RE_RENDER))
        if self.nproc_per_node != job.procs_per_node:
            problem = f"{self.nproc_per_node} in the env, but job.json says procsPerNode={job.procs_per_node}"
            errors.append(FieldError("NPROC_PER_NODE", problem, _RE_RENDER))
        if not errors and self.world_size != job.world_size:
            problem = f"{self.world_size} ranks, but job.json says worldSize={job.world_size}"
            errors.append(FieldError("PET_NNODES x NPROC_PER_NODE", problem, _RE_RENDER))
        _refuse(errors, "config.world-size")


def _refuse(errors: list[FieldError], reason: str | None = None) -> None:
    """Raise every problem at once; the reason is the first one's (the rendezvous address and
    port: ``config.missing-env``; the job's size: ``config.world-size``), unless given."""
    if errors:
        first = errors[0].path
        default = "config.missing-env" if first.startswith("MASTER_") else "config.world-size"
        raise JobEnvError(reason or default, str(SpecError(errors)))


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
