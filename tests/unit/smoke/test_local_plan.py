"""Local-mode planning: the rendered pods become local commands with only the address changed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.render import render_job
from hyperframe_runtime.local_plan import LocalPlan, localize, parse_progress_line, plan
from hyperframe_runtime.progress import ProgressUpdate, format_line

REPO = Path(__file__).resolve().parents[3]


def _plan(name: str) -> tuple[LocalPlan, dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all((REPO / "examples" / f"{name}.yaml").read_text()))
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    return plan(render_job(copy.deepcopy(job), copy.deepcopy(runtime))), job, runtime


def test_every_pod_becomes_a_node_with_its_gate_and_trainer() -> None:
    local, _, _ = _plan("cpu-2node")
    assert [n.node_rank for n in local.nodes] == [0, 1]
    assert local.job.world_size == 4
    for node in local.nodes:
        assert node.gate is not None and node.gate.module == "hyperframe_runtime.smoke.cli"
        assert node.trainer.module == "hyperframe_runtime.launcher"
        assert node.gate.env["NODE_RANK"] == str(node.node_rank)


def test_localize_changes_only_address_port_and_config_path() -> None:
    local, _, _ = _plan("cpu-2node")
    gate = local.nodes[1].gate
    assert gate is not None
    moved = localize(gate, port=12345, config_path="/tmp/x/job.json", extra_env={"MARK": "1"})
    assert moved.env["MASTER_ADDR"] == moved.env["PET_MASTER_ADDR"] == "127.0.0.1"
    assert moved.env["MASTER_PORT"] == moved.env["PET_MASTER_PORT"] == "12345"
    assert "/tmp/x/job.json" in moved.args and "/etc/hyperframe/job.json" not in moved.args
    unchanged = {k: v for k, v in gate.env.items() if "MASTER" not in k and k != "HYPERFRAME_CONFIG"}
    assert unchanged.items() <= moved.env.items() and moved.env["MARK"] == "1"


def test_disabled_gate_means_no_gate_command() -> None:
    _, job, runtime = _plan("cpu-tiny")
    runtime["spec"]["smoke"]["enabled"] = False
    local = plan(render_job(job, runtime))
    assert all(n.gate is None for n in local.nodes)


def test_progress_parser_reads_what_the_trainer_writes() -> None:
    update = ProgressUpdate(
        frame=3, totalFrames=10, step=3, loss=5.4762, samplesPerSecond=6.04, etaSeconds=12.0
    )
    line = "2026-11-29 13:06:58,635 hyperframe.progress INFO " + format_line(update)
    figures = parse_progress_line(line)
    assert figures is not None
    assert (figures.frame, figures.total_frames, figures.loss) == (3, 10, 5.4762)
    assert figures.samples_per_second == 6.0
    assert parse_progress_line("frame 1: loss 5.5, 3.8 samples/s") is None


def test_gpu_nodes_get_disjoint_device_slices() -> None:
    from hyperframe_runtime.local import node_gpus

    assert node_gpus(0, 1, None) == {}
    assert node_gpus(2, 0, None) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert node_gpus(2, 1, None) == {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert node_gpus(1, 1, "4, 6") == {"CUDA_VISIBLE_DEVICES": "6"}


def test_local_job_json_drops_the_pods_shm_size_and_rdma() -> None:
    docs = list(yaml.safe_load_all((REPO / "examples" / "gpu-rdma.yaml").read_text()))
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    objects = render_job(job, runtime)
    (configmap,) = [o for o in objects if o["kind"] == "ConfigMap"]
    rendered = ResolvedJobConfig.from_json(configmap["data"]["job.json"])
    assert rendered.smoke.shm_size_bytes == 128 << 30 and rendered.smoke.rdma_enabled
    local = plan(objects)
    assert ResolvedJobConfig.from_json(local.job_json) == local.job
    smoke = local.job.smoke
    assert (smoke.shm_size_bytes, smoke.rdma_enabled, smoke.rdma_resource_name) == (0, False, None)
    assert local.job.world_size == rendered.world_size and local.job.smoke.enabled == rendered.smoke.enabled
