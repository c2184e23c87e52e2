"""Multi-process driver for the pipeline tests: ``python harness.py CASES.json OUT_DIR``.

It spawns ``world`` CPU ranks on one gloo process group (one start-up for many cases, because
importing torch dominates on a small CI machine) and runs each case on them:

- ``grad``: one frame of the given TrainConfig without the optimizer step; every rank's
  gradients are gathered and rank 0 saves ``OUT_DIR/<name>.pt`` ({param name: grad}, losses).
- ``train``: ``FrameLoop`` over the config's frames; rank 0 saves the per-frame losses and the
  order digest each frame ran (``OUT_DIR/<name>.json``). ``"replan_to"`` optionally swaps in a
  plan made from given costs before the frame of that index (costs of ``pipeline`` stages: one
  stage per rank, so the stages move to that placement); ``"copy_snapshot"`` first copies an
  earlier case's snapshot directory into this case's checkpoint dir (a resume). The digest is
  that of the plan the frame ran (the hyperframe policy may switch schedules between frames);
  ``data_positions`` are the data loader's positions after each frame (-1: the model's data).
- ``clip``: one frame of the given TrainConfig without the optimizer step, then the recipe's
  global-norm clipping (``pipeline.recipe.clip_grad_norm``) to ``max_norm``; rank 0 saves
  ``OUT_DIR/<name>.pt`` ({"norm": the norm every rank computed, "grads": the clipped grads}).
- ``select``: ``FrameLoop`` over the config's frames with ``"forced"`` plans (candidate name ->
  ``"serial"``: every micro-batch through the whole pipeline before the next starts); rank 0
  saves the schedule of each frame, the selector's events and the losses, and per frame the
  activation costs of the plan it ran and the predicted activation peaks (plan's, 1F1B's), and
  the activation costs of the planner's last plan of each candidate (run or not).

The parent (pytest) compares the results with a single-process reference.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import traceback
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.pipeline.frame_loop import FrameLoop
from hyperframe_runtime.pipeline.planning import FramePlan, orders_digest, plan_from_costs
from hyperframe_runtime.pipeline.recipe import clip_grad_norm
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.ir import Action, OpKind, Placement


def _grad_case(case: dict[str, Any], out: Path) -> None:
    loop = FrameLoop(TrainConfig.from_dict(case["config"]))
    metrics = loop.run_frame(step=False)
    grads = {
        name: p.grad.detach().clone()
        for module in loop.modules.values()
        for name, p in module.named_parameters()
        if p.grad is not None
    }
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, grads)
    if dist.get_rank() == 0:
        merged: dict[str, torch.Tensor] = {}
        for part in gathered:
            merged.update(part)
        torch.save(
            {
                "grads": merged,
                "loss": metrics.loss,
                "orders": {r: [str(a) for a in acts] for r, acts in loop.plan.orders.items()},
            },
            out / f"{case['name']}.pt",
        )
    loop.close()


def _clip_case(case: dict[str, Any], out: Path) -> None:
    loop = FrameLoop(TrainConfig.from_dict(case["config"]))
    loop.run_frame(step=False)
    params = [p for module in loop.modules.values() for p in module.parameters()]
    norm = clip_grad_norm(params, case["max_norm"], loop.groups.pp_group, loop.device)
    grads = {
        name: p.grad.detach().clone()
        for module in loop.modules.values()
        for name, p in module.named_parameters()
        if p.grad is not None
    }
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (norm, grads))
    if dist.get_rank() == 0:
        merged: dict[str, torch.Tensor] = {}
        for _, part in gathered:
            merged.update(part)
        torch.save({"norms": [n for n, _ in gathered], "grads": merged}, out / f"{case['name']}.pt")
    loop.close()


def _train_case(case: dict[str, Any], out: Path) -> None:
    config = TrainConfig.from_dict(case["config"])
    _copy_snapshot(case, config)
    loop = FrameLoop(config)
    start = loop.frames_done
    losses: list[float] = []
    digests: list[str] = []
    positions: list[int] = []
    while loop.frames_done < config.frames:
        if case.get("replan_to") is not None and loop.frames_done == case["replan_to"]["frame"]:
            costs = CostModel.from_mapping(case["replan_to"]["costs"])
            placement = (
                Placement.one_per_rank(config.pipeline) if costs.num_stages == config.pipeline else None
            )
            loop.set_plan(plan_from_costs(config, placement or loop.plan.placement, costs))
        losses.append(loop.run_frame().loss)
        digests.append(orders_digest(loop.plan.orders))
        positions.append(loop.batches.state().get("position", -1))
        loop.after_frame()
    loop.close()
    if dist.get_rank() == 0:
        payload = {
            "start": start,
            "losses": losses,
            "digests": digests,
            "snapshots": loop.result.snapshots,
            "boundaries": list(loop.layer_boundaries or ()),
            "events": loop.result.events,
            "data_positions": positions,
        }
        (out / f"{case['name']}.json").write_text(json.dumps(payload), encoding="utf-8")


def _serial_plan(config: TrainConfig) -> FramePlan:
    # Every micro-batch runs forward through all stages and back before the next one starts.
    p, m = config.pipeline, config.microbatches_per_frame
    orders: dict[int, list[Action]] = {r: [] for r in range(p)}
    for mb in range(m):
        for s in range(p):
            orders[s].append(Action(s, OpKind.F, mb))
        for s in reversed(range(p)):
            orders[s].append(Action(s, OpKind.B, mb))
    return FramePlan(config.policy, Placement.one_per_rank(p), orders, m, split_backward=False)


def _copy_snapshot(case: dict[str, Any], config: TrainConfig) -> None:
    if case.get("copy_snapshot") and dist.get_rank() == 0:
        # Keep only one snapshot of an earlier case: "the job was interrupted after that frame".
        source = Path(case["copy_snapshot"])
        shutil.copytree(source, Path(config.checkpoint_dir) / source.name)
    dist.barrier()


def _select_case(case: dict[str, Any], out: Path) -> None:
    config = TrainConfig.from_dict(case["config"])
    forced = {name: replace(_serial_plan(config), schedule=name) for name in case["forced"]}
    _copy_snapshot(case, config)
    loop = FrameLoop(config, forced_plans=forced)
    result = loop.run()
    choice = loop.choice
    assert choice is not None
    if dist.get_rank() == 0:
        payload = {
            "schedules": [m.schedule for m in result.metrics],
            "exploring": [m.exploring for m in result.metrics],
            "losses": [m.loss for m in result.metrics],
            "events": result.events,
            "start": result.start_frame,
            "winner": choice.selector.winner,
            "activation": [list(p.costs.activation) if p.costs else [] for p in result.plans],
            "peaks": [[m.activation_peak_bytes, m.activation_peak_1f1b_bytes] for m in result.metrics],
            "planned": {n: list(p.costs.activation) for n, p in choice.plans.items() if p.costs},
        }
        (out / f"{case['name']}.json").write_text(json.dumps(payload), encoding="utf-8")


def _worker(rank: int, world: int, port: int, cases: list[dict[str, Any]], out: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=300))
    try:
        for case in cases:
            cases_by_kind = {
                "grad": _grad_case,
                "clip": _clip_case,
                "train": _train_case,
                "select": _select_case,
            }
            cases_by_kind[case["kind"]](case, Path(out))
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)  # do not hang the other ranks' collectives
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
        _worker,
        args=(spec["world"], _free_port(), spec["cases"], sys.argv[2]),
        nprocs=spec["world"],
        start_method="spawn",
    )


if __name__ == "__main__":
    main()
