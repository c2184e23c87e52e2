"""Frame-boundary checkpoints with ``torch.distributed.checkpoint`` (DCP).

A snapshot after frame ``k`` (``k`` frames done) lives in ``<dir>/frame-<k:06d>/``:

- the DCP shards: every rank's model parameters and AdamW state, keyed by parameter name
  (``model/<name>``, ``optim/<name>/exp_avg`` ...). Names are unique across stages, so the keys
  of different pipeline ranks never collide; data-parallel replicas hold the same keys and DCP
  writes them once.
- ``meta.json``, written by global rank 0 after every rank's shards are on disk: frames done,
  global step, the training config and the plan (the in-frame order table). A snapshot without
  ``meta.json`` is incomplete and never resumed from.

Resume loads the newest complete snapshot in place; data is a function of the frame index, so a
resumed run computes exactly what the uninterrupted run would have.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

__all__ = ["Snapshot", "latest_snapshot", "load_snapshot", "save_snapshot", "snapshot_dir"]

META_FILE: Final = "meta.json"
_DIR_RE: Final = re.compile(r"^frame-(\d{6,})$")


@dataclass(frozen=True)
class Snapshot:
    """What ``meta.json`` of a complete snapshot says."""

    path: Path
    frames_done: int
    global_step: int
    plan: dict[str, Any]
    config: dict[str, Any]


def snapshot_dir(root: str | Path, frames_done: int) -> Path:
    return Path(root) / f"frame-{frames_done:06d}"


def latest_snapshot(root: str | Path) -> Snapshot | None:
    """The complete snapshot with the most frames done under ``root``, or None."""
    base = Path(root)
    if not base.is_dir():
        return None
    best: tuple[int, Path] | None = None
    for child in base.iterdir():
        match = _DIR_RE.match(child.name)
        if match and (child / META_FILE).is_file():
            frames = int(match.group(1))
            if best is None or frames > best[0]:
                best = (frames, child)
    if best is None:
        return None
    meta = json.loads((best[1] / META_FILE).read_text(encoding="utf-8"))
    return Snapshot(
        path=best[1],
        frames_done=int(meta["frames_done"]),
        global_step=int(meta["global_step"]),
        plan=dict(meta["plan"]),
        config=dict(meta["config"]),
    )


def _named_parameters(modules: Mapping[int, nn.Module]) -> dict[str, nn.Parameter]:
    named: dict[str, nn.Parameter] = {}
    for stage, module in sorted(modules.items()):
        for name, param in module.named_parameters():
            if name in named:
                raise ValueError(
                    f"model: parameter name {name!r} appears in two stages (stage {stage} and an earlier "
                    "one); checkpoints are keyed by name, so stage modules must use unique names"
                )
            named[name] = param
    return named


def _ensure_adamw_state(optimizer: torch.optim.Optimizer) -> None:
    # AdamW creates its state lazily at the first step; a resume loads into it, so create it
    # the way AdamW would (zeros, step 0) when it does not exist yet.
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state[param]
            if not state:
                state["step"] = torch.tensor(0.0)
                state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)


def _state_dict(modules: Mapping[int, nn.Module], optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    if not isinstance(optimizer, torch.optim.AdamW):
        raise TypeError(f"checkpoints support the trainer's AdamW, got {type(optimizer).__name__}")
    _ensure_adamw_state(optimizer)
    state: dict[str, Any] = {}
    for name, param in _named_parameters(modules).items():
        state[f"model/{name}"] = param.detach()
        for key, value in optimizer.state[param].items():
            state[f"optim/{name}/{key}"] = value
    return state


def save_snapshot(
    root: str | Path,
    *,
    frames_done: int,
    global_step: int,
    modules: Mapping[int, nn.Module],
    optimizer: torch.optim.Optimizer,
    plan: dict[str, Any],
    config: dict[str, Any],
) -> Path:
    """Save this rank's part of the snapshot (collective: every rank calls it)."""
    path = snapshot_dir(root, frames_done)
    dcp_save(_state_dict(modules, optimizer), checkpoint_id=str(path))
    dist.barrier()
    if dist.get_rank() == 0:
        meta = {"frames_done": frames_done, "global_step": global_step, "plan": plan, "config": config}
        tmp = path / (META_FILE + ".tmp")
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path / META_FILE)
    dist.barrier()
    return path


def load_snapshot(
    snapshot: Snapshot, *, modules: Mapping[int, nn.Module], optimizer: torch.optim.Optimizer
) -> None:
    """Load this rank's parameters and optimizer state from ``snapshot`` in place (collective)."""
    state = _state_dict(modules, optimizer)
    with torch.no_grad():
        dcp_load(state, checkpoint_id=str(snapshot.path))
