"""Frame-boundary checkpoints that every rank agrees on, with ``torch.distributed.checkpoint`` (DCP).

The snapshots of one job live in its own folder, ``<checkpoint_dir>/<job_id>/``
(:func:`job_dir`; the launcher's job id is ``<job name>-<job uid>``, so a re-created job on the
same volume never resumes another run). A snapshot after frame ``k`` (``k`` frames done) lives in
``<job folder>/frame-<k:06d>/``:

- the DCP shards of every rank: model and optimizer state from
  ``torch.distributed.checkpoint.state_dict.get_state_dict`` (the optimizer state flattened, so
  that every entry is keyed by parameter name). Names are unique across stages, so the keys of
  different pipeline ranks never collide and a snapshot does not depend on the pipeline split;
  data-parallel replicas hold the same keys and DCP writes them once.
- ``rank-state/rank-<r>.pt``: rank ``r``'s own state besides the model and optimizer (the
  learning-rate schedule's position and the RNG state, ``pipeline.recipe``), written before its
  commit marker; read back by :func:`load_rank_state`.
- ``committed/rank-<r>``: rank ``r``'s commit marker, written after its shards are on disk.
- ``meta.json``: written by global rank 0 only after a barrier and after it has seen every rank's
  marker: frames done, global step, world size, the training config and the plan. **A snapshot
  is complete exactly when ``meta.json`` exists**; nothing else is ever resumed from.

A save runs the phases of :data:`SAVE_PHASES`; a job killed at any point leaves either a complete
snapshot or an incomplete directory that the next save of that frame replaces. Besides the model
and the optimizer, a save takes named extra states (``extra``: DCP ``Stateful`` objects or
state dicts, e.g. an LR scheduler or a data-loader position), loaded back by the same names.
After a save, rank 0 deletes the complete snapshots older than the newest ``keep``
(:func:`snapshots_to_prune`); incomplete directories are never deleted by pruning.

Resume (:func:`resume_snapshot`, collective) first checks that ``checkpoint_dir`` is one volume
every rank shares (every rank writes a file, every rank must see all of them), then global rank 0
chooses the newest complete snapshot and broadcasts it; every rank checks that it sees that same
snapshot as its newest and complete, and all ranks fail together, naming what each rank sees,
when they do not. A snapshot saved by another world size, parallel layout or model is refused
(:func:`snapshot_mismatch`, :class:`SnapshotMismatchError`, a configuration error) instead of
loaded. Data is a function of the frame index, so a resumed run computes exactly what the
uninterrupted run would have.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

__all__ = [
    "IDENTITY_FIELDS",
    "SAVE_PHASES",
    "CheckpointError",
    "SavePhase",
    "Snapshot",
    "SnapshotMismatchError",
    "agree_on_snapshot",
    "check_shared_volume",
    "check_snapshot_matches",
    "complete_snapshots",
    "job_dir",
    "latest_snapshot",
    "load_rank_state",
    "load_snapshot",
    "prune_snapshots",
    "resume_snapshot",
    "save_snapshot",
    "snapshot_dir",
    "snapshot_mismatch",
    "snapshots_to_prune",
]

log = logging.getLogger(__name__)

META_FILE: Final = "meta.json"
COMMITTED_DIR: Final = "committed"
RANK_STATE_DIR: Final = "rank-state"
VOLUME_CHECK_DIR: Final = ".volume-check"
_DIR_RE: Final = re.compile(r"^frame-(\d{6,})$")
_OPTIONS: Final = StateDictOptions(flatten_optimizer_state_dict=True)

SavePhase = Literal["cleared", "shards-written", "committed", "all-committed", "complete"]
SAVE_PHASES: Final[tuple[SavePhase, ...]] = (
    "cleared",
    "shards-written",
    "committed",
    "all-committed",
    "complete",
)
"""What a rank has done when :func:`save_snapshot` reports each phase, in order:

- ``cleared``: rank 0 removed an incomplete directory of this frame left by a killed save;
- ``shards-written``: DCP returned (this rank's shards and DCP's ``.metadata`` are written);
- ``committed``: this rank's commit marker is written;
- ``all-committed``: after a barrier (rank 0: and after checking every marker), before ``meta.json``;
- ``complete``: rank 0 wrote ``meta.json``; the snapshot is complete.
"""


_RESERVED_STATE: Final = frozenset({"model", "optim"})

IDENTITY_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "layout": ("pipeline", "data"),
    "model": ("model", "model_args", "vocab_size", "seq_len", "d_model", "n_heads", "n_layers"),
}
"""Training-config keys a snapshot must share with the run that resumes it, by what they are
(besides the world size). The schedule policy, the placement and the frame size may differ: the
state is keyed by parameter name, and the plan is reused only where it fits."""


class CheckpointError(RuntimeError):
    """The checkpoint volume or its snapshots are unusable; the message says how to fix it."""


class SnapshotMismatchError(CheckpointError):
    """The newest complete snapshot was saved by another world size, layout or model: a
    configuration error (retrying cannot help), not a crash."""


@dataclass(frozen=True)
class Snapshot:
    """What ``meta.json`` of a complete snapshot says."""

    path: Path
    frames_done: int
    global_step: int
    plan: dict[str, Any]
    config: dict[str, Any]
    world_size: int = 0
    """Ranks of the job that saved it (0 in snapshots written before this field existed)."""
    data: dict[str, Any] | None = None
    """The data loader's position (``hyperframe_runtime.data``); None when the data is a function
    of the frame index (the model's ``make_batch``) or in snapshots written before this field."""


def job_dir(checkpoint_dir: str | Path, job_id: str) -> Path:
    """The folder of one job's snapshots: ``<checkpoint_dir>/<job_id>`` ("" = ``checkpoint_dir``)."""
    return Path(checkpoint_dir) / job_id if job_id else Path(checkpoint_dir)


def snapshot_dir(root: str | Path, frames_done: int) -> Path:
    return Path(root) / f"frame-{frames_done:06d}"


def complete_snapshots(root: str | Path) -> list[int]:
    """Frames done of every complete snapshot under ``root`` as this process sees it, ascending."""
    base = Path(root)
    if not base.is_dir():
        return []
    frames = []
    for child in base.iterdir():
        match = _DIR_RE.match(child.name)
        if match and (child / META_FILE).is_file():
            frames.append(int(match.group(1)))
    return sorted(frames)


def _read_snapshot(path: Path) -> Snapshot:
    meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    return Snapshot(
        path=path,
        frames_done=int(meta["frames_done"]),
        global_step=int(meta["global_step"]),
        plan=dict(meta["plan"]),
        config=dict(meta["config"]),
        world_size=int(meta.get("world_size", 0)),
        data=meta.get("data"),
    )


def latest_snapshot(root: str | Path) -> Snapshot | None:
    """The complete snapshot with the most frames done under ``root`` as this process sees it.

    Not collective: ranks must not resume from their own view; :func:`resume_snapshot` makes
    them agree."""
    frames = complete_snapshots(root)
    return _read_snapshot(snapshot_dir(root, frames[-1])) if frames else None


def snapshot_mismatch(snapshot: Snapshot, config: Mapping[str, Any], world_size: int) -> str | None:
    """What differs between ``snapshot`` and the run (its training ``config`` and ``world_size``)
    that would resume it, or None when it may be resumed."""
    diffs = []
    if snapshot.world_size and snapshot.world_size != world_size:
        diffs.append(f"world size {snapshot.world_size} (this run: {world_size})")
    for what, keys in IDENTITY_FIELDS.items():
        for key in keys:
            saved, mine = snapshot.config.get(key), config.get(key)
            if key in snapshot.config and saved != mine:
                diffs.append(f"{what} {key} {saved!r} (this run: {mine!r})")
    if not diffs:
        return None
    return (
        f"checkpoint_dir: the newest complete snapshot {snapshot.path} was saved by another run: "
        f"{'; '.join(diffs)}; run it with the settings it was saved with, or give this run a fresh "
        "checkpoint directory (a new job, or another checkpoint path)"
    )


def check_snapshot_matches(snapshot: Snapshot, config: Mapping[str, Any], world_size: int) -> None:
    """Raise :class:`SnapshotMismatchError` when ``snapshot`` does not fit the run (every rank
    reads the same ``meta.json``, so all ranks raise together)."""
    problem = snapshot_mismatch(snapshot, config, world_size)
    if problem is not None:
        raise SnapshotMismatchError(problem)


def snapshots_to_prune(complete: Sequence[int], keep: int) -> list[int]:
    """Frames done of the complete snapshots to delete so that the newest ``keep`` remain
    (``keep`` 0 keeps all; the newest complete snapshot always stays)."""
    if keep <= 0:
        return []
    return sorted(complete)[: -max(keep, 1)]


def prune_snapshots(root: str | Path, keep: int) -> list[int]:
    """Delete the complete snapshots under ``root`` older than the newest ``keep`` (not collective:
    rank 0 calls it after a save); returns what it deleted. Incomplete directories are left alone:
    one may be a save in progress, and a later save of that frame replaces a stale one."""
    doomed = snapshots_to_prune(complete_snapshots(root), keep)
    for frames in doomed:
        _clear_incomplete(snapshot_dir(root, frames))  # meta.json first: never a complete-looking husk
    return doomed


# ---- state: model and optimizer through torch.distributed.checkpoint.state_dict ---------------


def _check_unique_names(modules: Mapping[int, nn.Module]) -> None:
    seen: dict[str, int] = {}
    for stage, module in sorted(modules.items()):
        for name in module.state_dict():
            if name in seen:
                raise ValueError(
                    f"model: state key {name!r} appears in stage {seen[name]} and stage {stage}; "
                    "checkpoints are keyed by name, so stage modules must use unique names"
                )
            seen[name] = stage


def _merge(target: nn.Module, source: nn.Module) -> None:
    """Register ``source``'s parameters, buffers and children on ``target`` under the same names,
    merging children that both hold (two stages' ``blocks`` ModuleDicts)."""
    persistent = set(source.state_dict(keep_vars=True))
    for name, param in source.named_parameters(recurse=False):
        target.register_parameter(name, param)
    for name, buffer in source.named_buffers(recurse=False):
        target.register_buffer(name, buffer, persistent=name in persistent)
    for name, child in source.named_children():
        existing = dict(target.named_children()).get(name)
        if existing is None:
            target.add_module(name, child)
            continue
        if not isinstance(existing, _MergedNode):
            node = _MergedNode()
            _merge(node, existing)
            target.add_module(name, node)
            existing = node
        _merge(existing, child)


class _MergedNode(nn.Module):
    """A name-only container; it is never called."""


def _rank_model(modules: Mapping[int, nn.Module]) -> nn.Module:
    """One module whose state-dict keys are exactly the stage modules' own keys (no stage prefix),
    so that one optimizer over several stages maps onto parameter names."""
    _check_unique_names(modules)
    if len(modules) == 1:
        return next(iter(modules.values()))
    merged = _MergedNode()
    for _, module in sorted(modules.items()):
        _merge(merged, module)
    return merged


def _state(
    modules: Mapping[int, nn.Module],
    optimizer: torch.optim.Optimizer,
    extra: Mapping[str, Any] | None = None,
) -> tuple[nn.Module, dict[str, Any]]:
    clash = sorted(_RESERVED_STATE & set(extra or {}))
    if clash:
        raise ValueError(
            f"extra: state name(s) {clash} are reserved for the model and optimizer; rename them"
        )
    model = _rank_model(modules)
    model_state, optim_state = get_state_dict(model, optimizer, options=_OPTIONS)
    return model, {"model": model_state, "optim": optim_state, **(extra or {})}


# ---- saving -----------------------------------------------------------------------------------


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _marker(path: Path, rank: int) -> Path:
    return path / COMMITTED_DIR / f"rank-{rank}"


def _clear_incomplete(path: Path) -> None:
    # meta.json goes first, so that a kill during the removal leaves an incomplete directory.
    (path / META_FILE).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)


def _rank_state_file(path: Path, rank: int) -> Path:
    return path / RANK_STATE_DIR / f"rank-{rank}.pt"


def _save_rank_state(path: Path, rank: int, state: Mapping[str, Any]) -> None:
    target = _rank_state_file(path, rank)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    with tmp.open("wb") as handle:
        torch.save(dict(state), handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, target)


def _rank0_verdict(problem: str | None) -> str | None:
    """Rank 0's ``problem`` on every rank (so that all ranks raise together instead of hanging)."""
    box: list[str | None] = [problem if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def save_snapshot(
    root: str | Path,
    *,
    frames_done: int,
    global_step: int,
    modules: Mapping[int, nn.Module],
    optimizer: torch.optim.Optimizer,
    plan: dict[str, Any],
    config: dict[str, Any],
    data: dict[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    keep: int = 0,
    on_phase: Callable[[SavePhase], None] | None = None,
    rank_state: Mapping[str, Any] | None = None,
) -> Path:
    """Save this rank's part of the snapshot (collective: every rank calls it).

    ``data`` is the loader position every data-parallel replica resumes from (each replica reads
    its own part of one order, and all consume the same number of samples per frame, so rank 0's
    position is every replica's). ``rank_state`` (tensors and plain values) is this rank's own
    state, saved before its commit marker (:func:`load_rank_state`). ``extra`` adds named states
    (DCP ``Stateful`` objects or state dicts) next to the model and optimizer. Once the snapshot is
    complete, rank 0 keeps the newest ``keep`` complete snapshots (0 = all; :func:`prune_snapshots`).
    ``on_phase`` is called on this rank after each phase of :data:`SAVE_PHASES` (progress
    reporting; the tests kill ranks there)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    path = snapshot_dir(root, frames_done)

    def phase(name: SavePhase) -> None:
        log.debug("snapshot %s: %s on rank %d", path.name, name, rank)
        if on_phase is not None:
            on_phase(name)

    if rank == 0 and path.exists():
        _clear_incomplete(path)
    dist.barrier()
    phase("cleared")

    _, state = _state(modules, optimizer, extra)
    dcp_save(state, checkpoint_id=str(path))
    if rank_state is not None:
        _save_rank_state(path, rank, rank_state)
    phase("shards-written")

    marker = _marker(path, rank)
    marker.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(
        marker, json.dumps({"rank": rank, "frames_done": frames_done, "host": socket.gethostname()})
    )
    phase("committed")

    dist.barrier()
    problem = None
    if rank == 0:
        missing = [r for r in range(world) if not _marker(path, r).is_file()]
        if missing:
            problem = (
                f"checkpoint_dir: {path} is missing the commit markers of rank(s) {missing} although "
                "every rank wrote one; the directory is not one volume shared by every rank (mount a "
                "ReadWriteMany volume there on every node)"
            )
    problem = _rank0_verdict(problem)
    if problem is not None:
        raise CheckpointError(problem)
    phase("all-committed")

    if rank == 0:
        meta = {
            "frames_done": frames_done,
            "global_step": global_step,
            "world_size": world,
            "plan": plan,
            "config": config,
        }
        if data:
            meta["data"] = data
        _write_atomically(path / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
        pruned = prune_snapshots(root, keep)
        if pruned:
            log.info("checkpoint keep %d: deleted the snapshots after frame(s) %s", keep, _ranks(pruned))
    phase("complete")
    dist.barrier()
    return path


# ---- resuming ---------------------------------------------------------------------------------


def check_shared_volume(root: str | Path) -> None:
    """Fail on every rank unless ``root`` is one directory every rank can write and sees written.

    Collective. Every rank writes ``.volume-check/<run token>/rank-<r>`` and then looks for every
    other rank's file; a per-node volume (emptyDir, hostPath, a ReadWriteOnce claim per pod)
    fails here, at start, instead of as a resume from different snapshots later."""
    rank, world = dist.get_rank(), dist.get_world_size()
    token: list[str | None] = [uuid.uuid4().hex if rank == 0 else None]
    dist.broadcast_object_list(token, src=0)
    probe = Path(root) / VOLUME_CHECK_DIR / str(token[0])
    error = ""
    try:
        probe.mkdir(parents=True, exist_ok=True)
        (probe / f"rank-{rank}").write_text(socket.gethostname(), encoding="utf-8")
    except OSError as exc:
        error = f"cannot write there: {exc}"
    dist.barrier()
    missing = [r for r in range(world) if not (probe / f"rank-{r}").is_file()]
    views: list[tuple[int, str, list[int], str] | None] = [None] * world
    dist.all_gather_object(views, (rank, socket.gethostname(), missing, error))
    dist.barrier()  # every rank has looked before rank 0 removes the probe
    if rank == 0:
        shutil.rmtree(probe, ignore_errors=True)
    problems = [
        f"rank {r} on {host}: {err or 'does not see the files of rank(s) ' + _ranks(miss)}"
        for r, host, miss, err in (v for v in views if v is not None)
        if err or miss
    ]
    if problems:
        raise CheckpointError(
            f"checkpoint_dir: {root} is not one volume shared by every rank ({'; '.join(problems)}). "
            "Mount the same ReadWriteMany volume (NFS, CephFS, a cloud file store) at that path on "
            "every node, or run the job on one node."
        )


def _ranks(ranks: Sequence[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def agree_on_snapshot(views: Sequence[Sequence[int]], chosen: int | None) -> str | None:
    """Why the ranks cannot resume from ``chosen`` (rank 0's newest), or None when they agree.

    ``views[r]`` lists the complete snapshots rank ``r`` sees. Every rank must see ``chosen`` as
    its newest complete snapshot (or none at all when ``chosen`` is None)."""
    newest = [max(view) if view else None for view in views]
    if all(n == chosen for n in newest):
        return None

    def name(frames: int | None) -> str:
        return "none" if frames is None else f"frame-{frames:06d}"

    seen = "; ".join(f"rank {r}: {name(n)}" for r, n in enumerate(newest))
    return (
        f"ranks see different newest complete snapshots (rank 0 chose {name(chosen)}; {seen}); "
        "every rank must mount the same checkpoint volume, and a snapshot must not be edited "
        "while the job starts"
    )


def resume_snapshot(root: str | Path) -> Snapshot | None:
    """The snapshot every rank resumes from, or None for a fresh start (collective).

    Checks the volume (:func:`check_shared_volume`); then rank 0 chooses its newest complete
    snapshot and broadcasts it, and every rank fails with the same message unless all of them
    see that snapshot as their newest complete one."""
    check_shared_volume(root)
    mine = complete_snapshots(root)
    choice: list[int | None] = [(mine[-1] if mine else None) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(choice, src=0)
    views: list[list[int] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(views, mine)
    problem = agree_on_snapshot([v or [] for v in views], choice[0])
    if problem is not None:
        raise CheckpointError(f"checkpoint_dir: {root}: {problem}")
    return None if choice[0] is None else _read_snapshot(snapshot_dir(root, choice[0]))


def load_snapshot(
    snapshot: Snapshot,
    *,
    modules: Mapping[int, nn.Module],
    optimizer: torch.optim.Optimizer,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Load this rank's model, optimizer and ``extra`` states from ``snapshot`` in place
    (collective; ``extra`` by the names it was saved with)."""
    model, state = _state(modules, optimizer, extra)
    dcp_load(state, checkpoint_id=str(snapshot.path))
    set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"], options=_OPTIONS
    )


def load_rank_state(snapshot: Snapshot, rank: int) -> dict[str, Any] | None:
    """Rank ``rank``'s own state saved with ``snapshot`` (``save_snapshot(rank_state=...)``), or
    None when it saved none (older snapshots) or had fewer ranks than ``rank + 1``."""
    if snapshot.world_size and rank >= snapshot.world_size:
        return None
    target = _rank_state_file(snapshot.path, rank)
    if not target.is_file():
        return None
    state = torch.load(target, map_location="cpu", weights_only=True)
    return dict(state)
