"""Cross-field rules of a HyperFrameJob spec, in CEL: the API server enforces them from the CRD,
and ``hyperframe render`` and the operator evaluate the same rules (hyperframe.api.schema_rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from hyperframe.api.fields import Rule
from hyperframe.constants import CONFIG_MOUNT_PATH, STATUS_TOKEN_DIR

if TYPE_CHECKING:
    from hyperframe.api.job import JobSpec

__all__ = [
    "JOB_SPEC_RULES",
    "POLICIES_NEEDING_DEPTH",
    "RESERVED_MOUNT_PATHS",
    "RESERVED_VOLUME_PREFIX",
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


JOB_SPEC_RULES: Final[tuple[Rule, ...]] = (
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
        cel=f"self.parallelism.pipeline * self.parallelism.data == self.nodes * {_RANKS_CEL}",
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
        cel=f"!(self.frames.schedulePolicy in {_DEPTH_POLICIES_CEL}) "
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
        cel="self.frames.schedulePolicy != 'interleaved1f1b' "
        "|| self.frames.microBatchesPerFrame % self.parallelism.pipeline == 0",
        message="interleaved1f1b needs microBatchesPerFrame to be a multiple of pipeline",
        message_format=_INTERLEAVED,
        message_args=("self.frames.microBatchesPerFrame", "self.parallelism.pipeline"),
        fix="use a multiple of parallelism.pipeline",
        field_path=".frames.microBatchesPerFrame",
    ),
    Rule(
        cel="!has(self.frames.checkpoint) || self.volumes.exists(v, v.name == self.frames.checkpoint.volume)",
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
        cel="!has(self.frames.checkpoint) || self.volumeMounts.all(m, m.mountPath != self.frames.checkpoint.path "
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
