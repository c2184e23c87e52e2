"""The training configuration of one HyperFrame run: the single input of ``hyperframe-train``.

Every rank reads the same JSON file (``hyperframe-train --config PATH``). The launcher maps the
operator's resolved job config onto this class; local mode and tests build it directly. The class is
self-contained on purpose (no import of the operator's API models) so that the runtime can be used
without the operator, and it validates itself on construction: a bad value raises ``ValueError``
naming the field and the fix. JSON is read by the job API's codec (:mod:`hyperframe.api.codec`,
pure Python, no models), so its key and type errors read like the job API's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

from hyperframe.api.codec import check, parse
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.fields import value_rules

__all__ = [
    "POLICIES",
    "Policy",
    "TrainConfig",
    "default_stages_per_rank",
]

Policy = Literal["hyperframe", "gpipe", "1f1b", "interleaved1f1b", "zbv"]
POLICIES: Final[tuple[str, ...]] = get_args(Policy)

Device = Literal["cpu", "cuda"]
Backend = Literal["", "gloo", "nccl"]
LayerSplit = Literal["auto", "even", "measured"]
Optimizer = Literal["adamw", "sgd"]
LrSchedule = Literal["constant", "cosine", "linear"]
Precision = Literal["auto", "fp32", "bf16"]

_JOB_ID_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")

# Value rules of single fields, applied by the codec (on parse and on construction: check).
_AT_LEAST_0: Final = value_rules(minimum=0)
_AT_LEAST_1: Final = value_rules(minimum=1)
_FRACTION: Final = value_rules(minimum=0, maximum=1, exclusive_maximum=True)

# Policies whose orders need exactly this many stages per rank.
_FIXED_STAGES_PER_RANK: Final[dict[str, int]] = {"gpipe": 1, "1f1b": 1, "interleaved1f1b": 2, "zbv": 2}


def default_stages_per_rank(policy: str) -> int:
    """Stages each rank holds when ``stages_per_rank`` is 0 (auto) for ``policy``."""
    if policy in _FIXED_STAGES_PER_RANK:
        return _FIXED_STAGES_PER_RANK[policy]
    return 2  # hyperframe defaults to the V-shape placement (two stages per rank).


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """One training run. Field names are the JSON keys (snake_case)."""

    # ---- model (the built-in GPT; ignored where a user model defines its own) -------------------
    model: str = "gpt"
    """``"gpt"`` for the built-in GPT on synthetic tokens, or ``"package.module:function"`` naming a
    user factory ``function(config)`` returning a ``hyperframe_runtime.models.TorchModel`` (an
    ordinary module the runtime cuts) or a hand-split ``ModelSpec`` (see docs/runtime.md)."""
    model_args: dict[str, Any] = field(default_factory=dict)
    """Free-form JSON object for a user factory (``entrypoint.module.args`` of the job): the factory
    reads it as ``config.model_args``. Ignored by the built-in GPT."""
    vocab_size: int = field(default=256, metadata=_AT_LEAST_1)
    """Token vocabulary of the built-in GPT and of its synthetic data."""
    seq_len: int = field(default=32, metadata=_AT_LEAST_1)
    """Tokens per sample."""
    d_model: int = field(default=64, metadata=_AT_LEAST_1)
    """Hidden width of the built-in GPT; a multiple of ``n_heads``."""
    n_heads: int = field(default=4, metadata=_AT_LEAST_1)
    """Attention heads per block."""
    n_layers: int = field(default=4, metadata=_AT_LEAST_1)
    """Transformer blocks, at least one per pipeline stage; split as evenly as they go over the
    stages or by measured costs (``layer_split``)."""

    # ---- parallel layout ----------------------------------------------------------------------------
    pipeline: int = field(default=1, metadata=_AT_LEAST_1)
    """Pipeline-parallel degree (ranks per pipeline)."""
    data: int = field(default=1, metadata=_AT_LEAST_1)
    """Data-parallel degree (pipeline replicas). ``pipeline * data`` must equal WORLD_SIZE."""
    policy: Policy = "hyperframe"
    """Schedule policy: ``hyperframe`` (cost-model planner), or torch's ``gpipe``, ``1f1b``,
    ``interleaved1f1b`` or ``zbv`` orders, all run by the same executor."""
    stages_per_rank: int = field(default=0, metadata=_AT_LEAST_0)
    """Model stages per rank; 0 = the policy's default. gpipe and 1f1b need 1, interleaved1f1b 2
    (looped placement), zbv 2 (V-shape). hyperframe takes 1 (one stage per rank) or 2 (V-shape,
    the default)."""

    # ---- frames -------------------------------------------------------------------------------------
    microbatches_per_frame: int = field(default=8, metadata=_AT_LEAST_1)
    """Micro-batches per frame; one frame is one optimizer step."""
    micro_batch_size: int = field(default=2, metadata=_AT_LEAST_1)
    """Samples per micro-batch (per data-parallel replica)."""
    frames: int = field(default=10, metadata=_AT_LEAST_1)
    """Frames (optimizer steps) to run in total, counting those done before a resume."""
    replan_every: int = field(default=0, metadata=_AT_LEAST_0)
    """hyperframe: 0 runs the unit-cost plan throughout; K > 0 measures the candidate schedules in
    the first frames, keeps the fastest and re-plans when measured costs drift, at most once every
    K frames (``pipeline.selection``)."""
    layer_split: LayerSplit = "auto"
    """How the model's layers are split over the pipeline stages. ``even``: as evenly as they go.
    ``measured``: the first frames (``pipeline.partitioning.PARTITION_FRAMES``) run the even split
    and time every op; from those timings the runtime derives per-layer costs and each rank's
    speed, re-splits the layers so that the rank loads balance (V-aware for a V placement) when
    that is predicted at least ``pipeline.partitioning.SPLIT_MARGIN`` faster than the even split,
    and continues on that split, exactly (weights and AdamW state move by parameter name). Needs a
    model with the per-layer hook (``ModelSpec.build_layers``; the built-in GPT has it) and one
    stage per rank or a V (not interleaved1f1b's looped placement). ``auto`` (the default):
    ``measured`` where the hyperframe policy measures its schedules (``replan_every`` > 0) on a
    pipeline of two or more ranks and the model has the per-layer hook, ``even`` otherwise
    (:meth:`measures_layer_split`)."""
    memory_limit: int = field(default=0, metadata=_AT_LEAST_0)
    """Planner's activation budget per rank, in micro-batch activations of the placement's heaviest
    stage (a rank holding 2 stages with one micro-batch in flight on each uses at most 2); 0 = 1F1B's
    peak. Once the stages' bytes are measured the budget is this many heaviest-stage bytes
    (``pipeline.memory``). Set at most one of ``memory_limit`` and ``memory_limit_bytes``."""
    memory_limit_bytes: int = field(default=0, metadata=_AT_LEAST_0)
    """Planner's activation budget per rank in bytes, against each stage's measured activation bytes
    per micro-batch; 0 = 1F1B's peak. Applies from the first plan made from measured costs."""
    planner_time_budget_s: float = field(default=0.2, metadata=_AT_LEAST_0)
    """Seconds the planner may spend improving an order."""

    # ---- data (docs/runtime.md "Your data"; ``hyperframe_runtime.data``) ---------------------------
    data_shards: str = ""
    """Directory of token shards (``hyperframe data prepare``) the model trains on; "" = none.
    Samples are windows of ``seq_len + 1`` tokens; the built-in GPT needs every token below
    ``vocab_size``. Set at most one of ``data_shards`` and ``data_factory``; with neither the
    model's own ``make_batch`` (the built-in GPT: synthetic tokens) gives the data."""
    data_factory: str = ""
    """``"package.module:function"``: ``function(config)`` returns a map-style
    ``torch.utils.data.Dataset`` whose items are ``(inputs, targets)`` tensors; "" = none."""
    data_workers: int = field(default=0, metadata=_AT_LEAST_0)
    """DataLoader worker processes per rank reading ahead (``data_shards``/``data_factory``);
    0 reads in the training process, inside the frame."""
    data_prefetch: int = field(default=2, metadata=_AT_LEAST_1)
    """Micro-batches each worker keeps in flight (DataLoader ``prefetch_factor``)."""

    # ---- checkpoints and observability ------------------------------------------------------------
    checkpoint_dir: str = ""
    """Directory for ``torch.distributed.checkpoint`` snapshots; "" = no checkpoints. The snapshots
    live in its sub-folder ``job_id`` (or in it directly when ``job_id`` is ""), and a run resumes
    from the newest complete snapshot found there (``pipeline.checkpoint``)."""
    checkpoint_every: int = field(default=0, metadata=_AT_LEAST_0)
    """Save a snapshot every this many frames (and after the last); 0 = only after the last frame."""
    checkpoint_keep: int = field(default=3, metadata=_AT_LEAST_0)
    """Complete snapshots to keep: after each save the older complete ones are deleted (the newest
    complete one and incomplete ones never are); 0 keeps them all."""
    job_id: str = ""
    """The job these snapshots belong to: the folder under ``checkpoint_dir`` they live in. The
    launcher sets ``<job name>-<job uid>`` (a re-created job starts afresh), local mode
    ``<job name>-local``; "" = ``checkpoint_dir`` itself."""
    trace_dir: str = ""
    """Directory for the Chrome/Perfetto trace, per-frame metrics (``metrics.jsonl``), TensorBoard
    event files (``tensorboard/``) and plan/actual Gantt SVGs, all appended every frame; "" = none."""

    # ---- optimisation and runtime (the recipe: pipeline.recipe) -----------------------------------
    seed: int = 0
    """Seed for weights, synthetic data and the global torch RNG; every rank derives the same model
    and batches."""
    optimizer: Optimizer = "adamw"
    """``adamw`` (``torch.optim.AdamW`` with ``betas`` and decoupled ``weight_decay``) or ``sgd``
    (``torch.optim.SGD`` with ``momentum`` and ``weight_decay``)."""
    lr: float = field(default=1e-3, metadata=value_rules(minimum=0, exclusive_minimum=True))
    """Peak learning rate: the rate after warmup (and throughout with the ``constant`` schedule)."""
    betas: tuple[float, float] = field(default=(0.9, 0.999), metadata=_FRACTION)
    """AdamW's moment decay rates, each in [0, 1)."""
    momentum: float = field(default=0.0, metadata=_FRACTION)
    """SGD momentum, in [0, 1)."""
    weight_decay: float = field(default=0.01, metadata=_AT_LEAST_0)
    """Weight decay (AdamW: decoupled), >= 0."""
    lr_schedule: LrSchedule = "constant"
    """After warmup: ``constant`` (``lr``), or ``cosine`` / ``linear`` decay from ``lr`` to
    ``min_lr`` at the last frame (``frames``)."""
    warmup_frames: int = field(default=0, metadata=_AT_LEAST_0)
    """Frames of linear warmup: frame ``i`` (0-based) of the warmup steps with ``lr * (i + 1) /
    warmup_frames``. At most ``frames``."""
    min_lr: float = field(default=0.0, metadata=_AT_LEAST_0)
    """Learning rate the decay ends at; at most ``lr``."""
    grad_clip_norm: float = field(default=0.0, metadata=_AT_LEAST_0)
    """Clip the gradients to this global L2 norm (over every parameter of every pipeline stage, after
    the data-parallel average) before each step; 0 = no clipping."""
    activation_checkpointing: bool = False
    """Recompute each transformer block's activations in the backward instead of keeping them
    (``torch.utils.checkpoint``; the built-in GPT's blocks, a ``TorchModel``'s container entries).
    Less activation memory, about one more forward."""
    precision: Precision = "auto"
    """``fp32``, or ``bf16`` autocast (cuda only; LayerNorm and loss stay fp32); ``auto`` = bf16 on
    cuda, fp32 on cpu."""
    device: Device = "cpu"
    """``cpu`` or ``cuda``."""
    backend: Backend = ""
    """torch.distributed backend; "" = ``nccl`` on cuda, ``gloo`` on cpu."""

    def __post_init__(self) -> None:
        errors = check(self)  # the value rules of each field
        errors += [] if errors else list(self._rules())
        if errors:
            raise SpecError(errors)

    def _rules(self) -> Iterator[FieldError]:
        """The rules between fields (and the field rules the declared ones cannot say)."""
        if self.data_shards and self.data_factory:
            yield FieldError("data_factory", "set together with data_shards", "keep one of them")
        if self.data_factory and ":" not in self.data_factory:
            yield FieldError(
                "data_factory", f"{self.data_factory!r} is not 'package.module:function'", "name the function"
            )
        if self.job_id in (".", "..") or not _JOB_ID_CHARS.issuperset(self.job_id):
            yield FieldError(
                "job_id",
                f"{self.job_id!r} is not one folder name of letters, digits, '.', '_' and '-'",
                "the launcher uses <job name>-<job uid>",
            )
        if self.device == "cpu" and self.backend == "nccl":
            yield FieldError("backend", "'nccl' needs device 'cuda'", "use 'gloo' (or '') with device 'cpu'")
        if self.model != "gpt" and ":" not in self.model:
            yield FieldError(
                "model", f"{self.model!r} is not 'gpt' or 'package.module:function'", "name one of them"
            )
        if self.d_model % self.n_heads:
            yield FieldError(
                "d_model",
                f"{self.d_model} is not a multiple of n_heads ({self.n_heads})",
                "pick d_model divisible by n_heads",
            )
        if self.memory_limit and self.memory_limit_bytes:
            yield FieldError(
                "memory_limit_bytes",
                "set together with memory_limit",
                "keep one (memory_limit_bytes for a budget in bytes) and set the other to 0",
            )
        fixed = _FIXED_STAGES_PER_RANK.get(self.policy)
        stages_ok = fixed is None or self.stages_per_rank in (0, fixed)
        if not stages_ok:
            yield FieldError(
                "stages_per_rank",
                f"policy {self.policy!r} needs {fixed} stage(s) per rank, got {self.stages_per_rank}",
                f"set it to {fixed} or 0 (auto)",
            )
        if fixed is None and self.stages_per_rank not in (0, 1, 2):  # hyperframe
            yield FieldError(
                "stages_per_rank",
                f"hyperframe places 1 stage per rank or 2 in a V, got {self.stages_per_rank}",
                "set it to 1, 2 or 0 (auto)",
            )
        elif stages_ok and self.model == "gpt" and self.n_layers < self.num_stages:
            yield FieldError(
                "n_layers",
                f"{self.n_layers} blocks cannot fill pipeline ({self.pipeline}) x stages_per_rank "
                f"({self.effective_stages_per_rank}) = {self.num_stages} stages",
                f"use at least {self.num_stages} (one block per stage)",
            )
        if self.policy == "interleaved1f1b" and self.microbatches_per_frame % self.pipeline:
            yield FieldError(
                "microbatches_per_frame",
                f"interleaved1f1b needs a multiple of pipeline ({self.pipeline}), got {self.microbatches_per_frame}",
                f"use a multiple of {self.pipeline}",
            )
        if self.layer_split == "measured" and self.policy == "interleaved1f1b":
            yield FieldError(
                "layer_split",
                "'measured' splits for one stage per rank or a V; interleaved1f1b's looped placement has no partitioner",
                "use layer_split 'even' or another policy",
            )
        yield from self._recipe_rules()

    def _recipe_rules(self) -> Iterator[FieldError]:
        """The optimizer schedule and precision (``pipeline.recipe`` runs them)."""
        if self.min_lr > self.lr:
            yield FieldError("min_lr", f"{self.min_lr} is above lr ({self.lr})", "lower it or raise lr")
        if self.warmup_frames > self.frames:
            yield FieldError(
                "warmup_frames",
                f"{self.warmup_frames} is above frames ({self.frames})",
                "shorten the warmup or train more frames",
            )
        if self.precision == "bf16" and self.device == "cpu":
            yield FieldError(
                "precision", "'bf16' autocast runs on cuda only", "use 'fp32' (or 'auto') with device 'cpu'"
            )

    # ---- derived ------------------------------------------------------------------------------------
    @property
    def bf16_autocast(self) -> bool:
        """Whether the stages run under bf16 autocast (``precision``, resolved for ``device``)."""
        return self.precision == "bf16" or (self.precision == "auto" and self.device == "cuda")

    def measures_layer_split(self, has_layer_hook: bool) -> bool:
        """Whether the layers are re-split by measured costs (see ``layer_split``), for a model
        that has (``has_layer_hook``) or lacks the per-layer hook."""
        if self.layer_split == "measured":
            return True
        return (
            self.layer_split == "auto"
            and has_layer_hook
            and self.policy == "hyperframe"
            and self.replan_every > 0
            and self.pipeline > 1
        )

    @property
    def effective_stages_per_rank(self) -> int:
        """``stages_per_rank`` with 0 resolved to the policy default."""
        return self.stages_per_rank or default_stages_per_rank(self.policy)

    @property
    def num_stages(self) -> int:
        """Model stages in one pipeline."""
        return self.pipeline * self.effective_stages_per_rank

    @property
    def world_size(self) -> int:
        """Ranks this config needs: ``pipeline * data``."""
        return self.pipeline * self.data

    @property
    def samples_per_frame(self) -> int:
        """Samples consumed per frame over all data-parallel replicas."""
        return self.microbatches_per_frame * self.micro_batch_size * self.data

    def resolved_backend(self) -> str:
        """The backend to initialise: ``backend`` or the device's default."""
        return self.backend or ("nccl" if self.device == "cuda" else "gloo")

    def check_world_size(self, world_size: int) -> None:
        """Raise if the launcher started a different number of ranks than the layout needs."""
        if world_size != self.world_size:
            raise ValueError(
                f"pipeline ({self.pipeline}) x data ({self.data}) = {self.world_size}, but WORLD_SIZE is "
                f"{world_size}; launch {self.world_size} ranks or change pipeline/data"
            )

    # ---- JSON ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the same keys ``from_dict`` reads)."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """Pretty JSON text of this config."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrainConfig:
        """Build from a mapping with the API's codec: unknown keys and wrong types are errors
        (:class:`~hyperframe.api.errors.SpecError`, a ``ValueError``), each ``key: problem: fix``."""
        if not isinstance(raw, dict):
            raise ValueError(f"training config must be a JSON object, got {type(raw).__name__}")
        return parse(cls, raw, path="")

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        """Parse JSON text (see ``from_dict``)."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"training config is not valid JSON: {exc}") from exc
        return cls.from_dict(raw)

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        """Read a JSON file (see ``from_dict``)."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))
