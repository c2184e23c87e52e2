"""The few facts about a HyperFrameJob that the state machine needs, as plain data.

Built from the API models by the reconciler; the policies never see the full spec, so they can be
tested with a handful of fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["CleanPodPolicy", "JobFacts", "PolicySettings", "RunPolicy", "UnschedulableAction"]


class CleanPodPolicy(StrEnum):
    ALL = "All"
    """Delete every pod when the job finishes."""
    RUNNING = "Running"
    """Delete the pods that still run; keep finished ones for their logs."""
    NONE = "None"
    """Keep every pod (debugging); pods that still run keep running."""


class UnschedulableAction(StrEnum):
    """What the operator does with a gang that stays unschedulable past the bound."""

    FAIL = "Fail"
    """Fail the job with reason ``Unschedulable`` (pods deleted as for any failed job)."""
    WAIT = "Wait"
    """Keep the job Pending with the ``Unschedulable`` condition until the gang is placed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPolicy:
    backoff_limit: int = 3
    """Gang restarts allowed before the job fails."""
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.RUNNING
    suspend: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFacts:
    namespace: str
    name: str
    generation: int
    """``metadata.generation``: copied into observedGeneration of the status and its conditions."""
    num_nodes: int
    """Pods per gang: one per node rank."""
    run_policy: RunPolicy
    deleting: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySettings:
    """Operator-wide knobs the policies use (from :class:`~hyperframe.controller.config.OperatorConfig`)."""

    restart_backoff_seconds: float = 10.0
    restart_backoff_max_seconds: float = 300.0
    node_not_ready_grace_seconds: float = 30.0
    terminating_grace_seconds: float = 60.0
    unschedulable_timeout_seconds: float = 300.0
    unschedulable_action: UnschedulableAction = UnschedulableAction.FAIL
