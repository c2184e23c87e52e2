"""Cross-field rules of a HyperFrameJob spec, in CEL: the API server enforces them from the CRD,
and ``hyperframe render`` and the operator evaluate the same rules (hyperframe.api.schema_rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from hyperframe.api.fields import Rule
from hyperframe.constants import CONFIG_MOUNT_PATH, STATUS_TOKEN_DIR

if TYPE_CHECKING:
    from hyperframe.api.job import Checkpoint, JobSpec

__all__ = [
    "JOB_SPEC_RULES",
    "POLICIES_NEEDING_DEPTH",
    "RESERVED_MOUNT_PATHS",
    "RESERVED_VOLUME_PREFIX",
    "SCRIPT_RULES",
    "checkpoint_of",
    "procs_per_node",
]

# Schedules that fill the pipeline with one micro-batch per stage before the steady state, so
# fewer micro-batches per frame than pipeline stages cannot run (torch raises on it).
POLICIES_NEEDING_DEPTH: Final[tuple[str, ...]] = ("1f1b", "interleaved1f1b", "zbv")


def procs_per_node(spec: JobSpec) -> int:
    """Ranks per node: one per GPU, or procsPerNode for CPU jobs (0 when unset, an invalid job)."""
    if spec.gpus_per_node > 0:
        return spec.gpus_per_node
    return spec.procs_per_node or 0


def checkpoint_of(spec: JobSpec) -> Checkpoint | None:
    """spec.frames.checkpoint; None without it or without frames (a script's checkpoints are its own)."""
    return spec.frames.checkpoint if spec.frames is not None else None


_PROCS_MISMATCH = "a GPU job runs one rank per GPU, but procsPerNode (%d) != gpusPerNode (%d)"
_PRODUCT = "pipeline (%d) x data (%d) = %d, but nodes (%d) x %s (%d) = %d"
_DEPTH = "%s needs at least one micro-batch per pipeline stage, but microBatchesPerFrame (%d) < pipeline (%d)"
_INTERLEAVED = "interleaved1f1b needs microBatchesPerFrame (%d) to be a multiple of pipeline (%d)"
_CKPT_VOLUME = "volume %s is not in spec.volumes"
_RANKS_CEL = "(self.gpusPerNode > 0 ? self.gpusPerNode : (has(self.procsPerNode) ? self.procsPerNode : 0))"


_DEPTH_POLICIES_CEL = "[" + ", ".join(f"'{p}'" for p in POLICIES_NEEDING_DEPTH) + "]"

# The renderer adds volumes named hyperframe-* and mounts them at these paths.
RESERVED_VOLUME_PREFIX: Final = "hyperframe-"
RESERVED_MOUNT_PATHS: Final[tuple[str, ...]] = ("/dev/shm", CONFIG_MOUNT_PATH, STATUS_TOKEN_DIR)
_RESERVED_MOUNTS_CEL = "[" + ", ".join(f"'{p}'" for p in RESERVED_MOUNT_PATHS) + "]"


_SCRIPT_CEL = "has(self.entrypoint.script)"
_NEEDS_FRAMES = "builtin and module entrypoints train in frames, so spec.frames is required"
_NEEDS_PARALLELISM = "builtin and module entrypoints need spec.parallelism"
_SCRIPT_NO_FRAMES = "a script runs its own training loop and takes no spec.frames"
_SCRIPT_NO_PARALLELISM = "a script lays out its own ranks and takes no spec.parallelism"
_SCRIPT_NO_DATA = "a script reads its own data and takes no spec.data"


SCRIPT_RULES: Final[tuple[Rule, ...]] = (
    Rule(
        cel=f"{_SCRIPT_CEL} || has(self.frames)",
        message=_NEEDS_FRAMES,
        fix="add spec.frames (at least frames.frames), or run your own loop with entrypoint.script",
        field_path=".frames",
        reason="FieldValueRequired",
    ),
    Rule(
        cel=f"{_SCRIPT_CEL} || has(self.parallelism)",
        message=_NEEDS_PARALLELISM,
        fix="add spec.parallelism with pipeline x data equal to the number of ranks",
        field_path=".parallelism",
        reason="FieldValueRequired",
    ),
    Rule(
        cel=f"!{_SCRIPT_CEL} || !has(self.frames)",
        message=_SCRIPT_NO_FRAMES,
        fix="remove spec.frames; the script's own arguments (entrypoint.script.args) set its steps "
        "and checkpoints, and runPolicy.terminationGracePeriodSeconds its time after SIGTERM",
        field_path=".frames",
        reason="FieldValueForbidden",
    ),
    Rule(
        cel=f"!{_SCRIPT_CEL} || !has(self.parallelism)",
        message=_SCRIPT_NO_PARALLELISM,
        fix="remove spec.parallelism; torchrun gives the script WORLD_SIZE = nodes x ranks per node",
        field_path=".parallelism",
        reason="FieldValueForbidden",
    ),
    Rule(
        cel=f"!{_SCRIPT_CEL} || !has(self.data)",
        message=_SCRIPT_NO_DATA,
        fix="remove spec.data; mount the data with spec.volumes and spec.volumeMounts and pass its path in entrypoint.script.args",
        field_path=".data",
        reason="FieldValueForbidden",
    ),
)
"""What a script job takes and what it does not (frames, parallelism and data are the runtime's)."""


JOB_SPEC_RULES: Final[tuple[Rule, ...]] = (
    *SCRIPT_RULES,
    Rule(
        cel="self.gpusPerNode > 0 || has(self.procsPerNode)",
        message="a CPU job (gpusPerNode 0) needs procsPerNode",
        fix="set procsPerNode to the number of ranks per node",
        field_path=".procsPerNode",
        reason="FieldValueRequired",
    ),
    Rule(
        cel="self.gpusPerNode == 0 || !has(self.procsPerNode) || self.procsPerNode == self.gpusPerNode",
        message="a GPU job runs one rank per GPU, so procsPerNode must equal gpusPerNode",
        message_format=_PROCS_MISMATCH,
        message_args=("self.procsPerNode", "self.gpusPerNode"),
        fix="remove procsPerNode",
        field_path=".procsPerNode",
    ),
    Rule(
        cel=f"!has(self.parallelism) || self.parallelism.pipeline * self.parallelism.data == self.nodes * {_RANKS_CEL}",
        message="pipeline x data must equal nodes x ranks per node",
        message_format=_PRODUCT,
        message_args=(
            "self.parallelism.pipeline",
            "self.parallelism.data",
            "self.parallelism.pipeline * self.parallelism.data",
            "self.nodes",
            "self.gpusPerNode > 0 ? 'gpusPerNode' : 'procsPerNode'",
            _RANKS_CEL,
            f"self.nodes * {_RANKS_CEL}",
        ),
        fix="make pipeline x data equal to the number of ranks",
        field_path=".parallelism",
    ),
    Rule(
        cel=f"!has(self.frames) || !has(self.parallelism) || !(self.frames.schedulePolicy in {_DEPTH_POLICIES_CEL}) "
        "|| self.frames.microBatchesPerFrame >= self.parallelism.pipeline",
        message="this schedule needs at least one micro-batch per pipeline stage",
        message_format=_DEPTH,
        message_args=(
            "self.frames.schedulePolicy",
            "self.frames.microBatchesPerFrame",
            "self.parallelism.pipeline",
        ),
        fix="raise frames.microBatchesPerFrame to at least parallelism.pipeline, or use gpipe/hyperframe",
        field_path=".frames.microBatchesPerFrame",
    ),
    Rule(
        cel="!has(self.frames) || !has(self.parallelism) || self.frames.schedulePolicy != 'interleaved1f1b' "
        "|| self.frames.microBatchesPerFrame % self.parallelism.pipeline == 0",
        message="interleaved1f1b needs microBatchesPerFrame to be a multiple of pipeline",
        message_format=_INTERLEAVED,
        message_args=("self.frames.microBatchesPerFrame", "self.parallelism.pipeline"),
        fix="use a multiple of parallelism.pipeline",
        field_path=".frames.microBatchesPerFrame",
    ),
    Rule(
        cel="!has(self.frames) || !has(self.frames.checkpoint) || self.volumes.exists(v, v.name == self.frames.checkpoint.volume)",
        message="the checkpoint volume is not in spec.volumes",
        message_format=_CKPT_VOLUME,
        message_args=("self.frames.checkpoint.volume",),
        fix="add a volume with that name to spec.volumes",
        field_path=".frames.checkpoint.volume",
    ),
    Rule(
        cel="self.volumeMounts.all(m, self.volumes.exists(v, v.name == m.name))",
        message="a volumeMount names a volume that is not in spec.volumes",
        fix="add the volume to spec.volumes or fix the mount's name",
        field_path=".volumeMounts",
    ),
    Rule(
        cel=f"self.volumes.all(v, !v.name.startsWith('{RESERVED_VOLUME_PREFIX}'))",
        message=f"volume names starting with {RESERVED_VOLUME_PREFIX} are reserved for the volumes HyperFrame adds",
        fix="rename the volume (and its mounts)",
        field_path=".volumes",
        reason="FieldValueForbidden",
    ),
    Rule(
        cel=f"self.volumeMounts.all(m, !(m.mountPath in {_RESERVED_MOUNTS_CEL}))",
        message="a volumeMount uses a path where HyperFrame mounts its own volume ("
        + ", ".join(RESERVED_MOUNT_PATHS)
        + ")",
        fix="mount it somewhere else; /dev/shm is sized by the runtime's shmSize (or the shmSize override)",
        field_path=".volumeMounts",
        reason="FieldValueForbidden",
    ),
    Rule(
        cel="!has(self.frames) || !has(self.frames.checkpoint) || self.volumeMounts.all(m, m.mountPath != self.frames.checkpoint.path "
        "|| m.name == self.frames.checkpoint.volume)",
        message="another volume is mounted at the checkpoint path",
        fix="mount frames.checkpoint.volume there, or change frames.checkpoint.path",
        field_path=".frames.checkpoint.path",
    ),
    Rule(
        cel="has(self.procsPerNode) == has(oldSelf.procsPerNode)",
        message="procsPerNode cannot be added or removed after creation",
        fix="delete and re-create the job to change its shape",
        field_path=".procsPerNode",
        reason="FieldValueForbidden",
    ),
)
