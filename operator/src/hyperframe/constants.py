"""Names and numbers shared by the API, the renderer, the operator and the runtime.

This module is the single source for them: the runtime (smoke gate, launcher) imports it
too, so the operator and the pods can never disagree on a label, a path or an exit code.
It must stay import-light (no kopf, no kubernetes, no torch).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = [
    "ANNOTATION_RESTART_COUNT",
    "API_VERSION",
    "CONFIG_FILE_NAME",
    "CONFIG_MOUNT_PATH",
    "ENV_NODE_NAME",
    "ENV_STATUS_TOKEN_FILE",
    "ENV_STATUS_URL",
    "GROUP",
    "INIT_CONTAINER_NAME",
    "JOB_KIND",
    "JOB_PLURAL",
    "LABEL_GENERATION",
    "LABEL_JOB",
    "LABEL_MANAGED_BY",
    "LABEL_OPERATOR_LEADER",
    "LABEL_RANK",
    "LABEL_ROLE",
    "MAIN_CONTAINER_NAME",
    "MANAGED_BY",
    "MAX_PROGRESS_METRICS",
    "PROGRESS_METRIC_NAME_MAX",
    "RESERVED_ENV",
    "RUNTIME_KIND",
    "RUNTIME_PLURAL",
    "STATUS_CA_FILE_NAME",
    "STATUS_TOKEN_AUDIENCE",
    "STATUS_TOKEN_DIR",
    "TERMINATION_MESSAGE_MAX_BYTES",
    "TERMINATION_MESSAGE_PATH",
    "VERSION",
    "SmokeExit",
    "TrainExit",
]

GROUP: Final = "hyperframe.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
JOB_KIND: Final = "HyperFrameJob"
JOB_PLURAL: Final = "hyperframejobs"
RUNTIME_KIND: Final = "HyperFrameRuntime"
RUNTIME_PLURAL: Final = "hyperframeruntimes"

# Labels on every object the operator renders.
LABEL_JOB: Final = "hyperframe.dev/job-name"
LABEL_RANK: Final = "hyperframe.dev/node-rank"
LABEL_ROLE: Final = "hyperframe.dev/role"  # "master" for node rank 0, "worker" otherwise
LABEL_OPERATOR_LEADER: Final = f"{GROUP}/operator-leader"
"""On the operator pod that holds the Lease (value ``true``); the chart's Service selects it."""
# Which gang incarnation a pod belongs to; bumped on every gang restart so that pods of an
# old incarnation can never be mistaken for the current one.
LABEL_GENERATION: Final = "hyperframe.dev/gang-generation"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "hyperframe-operator"
ANNOTATION_RESTART_COUNT: Final = "hyperframe.dev/restart-count"

INIT_CONTAINER_NAME: Final = "smoke-gate"
MAIN_CONTAINER_NAME: Final = "trainer"


class SmokeExit(IntEnum):
    """Exit codes of the smoke gate, as in NVSentinel preflight, plus a timeout code.

    The operator classifies init-container terminations with these; the gate exits with them.
    """

    PASS = 0
    """Every check passed."""
    FAIL = 1
    """A check failed (bad device, low bus bandwidth): the node is excluded and the gang restarts."""
    CONFIG = 2
    """The job or environment is misconfigured: retrying cannot help, the job fails at once."""
    TIMEOUT = 3
    """A step (rendezvous, collective) did not finish in time; the missing ranks are named."""


class TrainExit(IntEnum):
    """Exit codes of the trainer (``hyperframe-train``, one per rank) and of the main container
    (``hyperframe-launch``), which passes its ranks' code on.

    The operator's failure policy classifies main-container terminations with these.
    """

    OK = 0
    """Every frame ran."""
    FAILED = 1
    """A crash (an exception in a frame, a lost peer): the gang restarts, counted against backoffLimit."""
    CONFIG = 2
    """The job cannot run as configured (a bad field, a snapshot of another model or layout):
    retrying cannot help, the job fails at once."""
    PREEMPTED = 75
    """Stopped by SIGTERM (preemption, node drain, pod deletion) at a frame boundary after the
    snapshot of that frame (if checkpoints are on): the gang restarts and resumes, not counted
    against backoffLimit. 75 is ``EX_TEMPFAIL`` of sysexits.h ("try again later")."""


TERMINATION_MESSAGE_PATH: Final = "/dev/termination-log"
# The kubelet truncates termination messages to 4096 bytes.
TERMINATION_MESSAGE_MAX_BYTES: Final = 4096

# The resolved job config (ConfigMap) is mounted here in every pod.
CONFIG_MOUNT_PATH: Final = "/etc/hyperframe"
CONFIG_FILE_NAME: Final = "job.json"
# The CA of the operator's progress endpoint, next to job.json in the job's ConfigMap (HTTPS only).
STATUS_CA_FILE_NAME: Final = "status-ca.crt"

# Progress reporting from the runtime to the operator's status endpoint.
ENV_STATUS_URL: Final = "HYPERFRAME_STATUS_URL"
ENV_STATUS_TOKEN_FILE: Final = "HYPERFRAME_STATUS_TOKEN_FILE"
# The renderer mounts a projected service-account token with this audience at STATUS_TOKEN_DIR/token;
# the operator's status endpoint accepts only tokens for this audience (TokenReview).
STATUS_TOKEN_AUDIENCE: Final = "hyperframe.dev/status"
STATUS_TOKEN_DIR: Final = "/var/run/secrets/hyperframe.dev/status"
# User-named metrics in status.progress.metrics: at most this many (the runtime keeps the first ones
# by name and warns), names of at most PROGRESS_METRIC_NAME_MAX characters.
MAX_PROGRESS_METRICS: Final = 64
PROGRESS_METRIC_NAME_MAX: Final = 63

# The Kubernetes node a pod runs on (downward API, spec.nodeName), so smoke reports name the node.
ENV_NODE_NAME: Final = "NODE_NAME"

# Environment names the renderer owns; a job that sets one of them is rejected.
RESERVED_ENV: Final = frozenset(
    {
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "NODE_RANK",
        "NPROC_PER_NODE",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
        "PET_NNODES",
        "PET_NODE_RANK",
        "PET_NPROC_PER_NODE",
        "HYPERFRAME_JOB_NAME",
        "HYPERFRAME_CONFIG",
        ENV_STATUS_URL,
        ENV_STATUS_TOKEN_FILE,
        ENV_NODE_NAME,
    }
)
