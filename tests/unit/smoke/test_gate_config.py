"""Config errors of the gate and the launcher: env parsing, env vs job.json, exit 2 with the field named."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from hyperframe.constants import SmokeExit
from hyperframe.render import render_job
from hyperframe.smoke_report import SmokeReport
from hyperframe.version import distribution_version
from hyperframe_runtime import launcher
from hyperframe_runtime.jobenv import JobEnv, JobEnvError
from hyperframe_runtime.local_plan import plan
from hyperframe_runtime.smoke import cli
from hyperframe_runtime.smoke.probe import SimulatedProbe, SkippedProbe, select_probe
from hyperframe_runtime.smoke.settings import SHM_FLOOR_BYTES, gate_config, split_timeout

REPO = Path(__file__).resolve().parents[3]


def _rendered(name: str = "cpu-2node") -> tuple[str, dict[str, str]]:
    docs = list(yaml.safe_load_all((REPO / "examples" / f"{name}.yaml").read_text()))
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    local = plan(render_job(copy.deepcopy(job), copy.deepcopy(runtime)))
    gate = local.nodes[1].gate
    assert gate is not None
    return local.job_json, dict(gate.env)


def test_env_of_a_rendered_pod_parses() -> None:
    _, env = _rendered()
    parsed = JobEnv.from_env(env)
    assert (parsed.nnodes, parsed.node_rank, parsed.nproc_per_node, parsed.world_size) == (2, 1, 2, 4)


@pytest.mark.parametrize(
    ("change", "reason", "fragment"),
    [
        (
            {"NODE_RANK": None, "PET_NODE_RANK": None},
            "config.missing-env",
            "NODE_RANK / PET_NODE_RANK: not set",
        ),
        (
            {"MASTER_PORT": "http", "PET_MASTER_PORT": None},
            "config.missing-env",
            'MASTER_PORT: expected an integer, got string "http": use an integer >= 1 and <= 65535',
        ),
        (
            {"WORLD_SIZE": "3"},
            "config.world-size",
            "WORLD_SIZE: 3, but PET_NNODES (2) x NPROC_PER_NODE (2) = 4",
        ),
        ({"NODE_RANK": "2"}, "config.world-size", "NODE_RANK: 2 is outside 0..1"),
    ],
)
def test_bad_env_is_a_config_error_naming_the_variable(
    change: dict[str, str | None], reason: str, fragment: str
) -> None:
    _, env = _rendered()
    for key, value in change.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    with pytest.raises(JobEnvError) as err:
        JobEnv.from_env(env)
    assert err.value.reason_id == reason
    assert fragment in str(err.value)


def test_every_bad_variable_is_named_at_once_as_var_problem_fix() -> None:
    _, env = _rendered()
    env.update({"MASTER_PORT": "70000", "NPROC_PER_NODE": "two", "PET_NPROC_PER_NODE": "two"})
    env.pop("PET_NNODES"), env.pop("NNODES", None)
    with pytest.raises(JobEnvError) as err:
        JobEnv.from_env(env)
    assert err.value.reason_id == "config.missing-env"
    assert str(err.value).splitlines() == [
        "PET_NNODES / NNODES: not set: the operator sets it in every pod and local mode sets it for you; "
        "set it when running by hand",
        "MASTER_PORT: 70000 is above the maximum 65535: use a value <= 65535",
        'NPROC_PER_NODE: expected an integer, got string "two": use an integer >= 1',
    ]


def test_env_that_disagrees_with_job_json_is_rejected() -> None:
    job_json, env = _rendered()
    from hyperframe.api.resolved import ResolvedJobConfig

    job = ResolvedJobConfig.from_json(job_json)
    env.update({"PET_NNODES": "4", "NODE_RANK": "1", "WORLD_SIZE": "8"})
    with pytest.raises(JobEnvError, match=r"PET_NNODES: 4 nodes in the env, but job.json says nodes=2"):
        gate_config(job, JobEnv.from_env(env), node_name="n")


def _run_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], job_json: str
) -> tuple[int, SmokeReport]:
    config = tmp_path / "job.json"
    config.write_text(job_json)
    log = tmp_path / "termination-log"
    for key in [*list(env), "MASTER_ADDR", "NODE_RANK", "PET_NODE_RANK", "WORLD_SIZE"]:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code = cli.main(["--config", str(config), "--termination-log", str(log)])
    return code, SmokeReport.from_termination_message(log.read_text())


def test_cli_missing_env_exits_2_with_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job_json, env = _rendered()
    del env["NODE_RANK"], env["PET_NODE_RANK"]
    code, report = _run_cli(tmp_path, monkeypatch, env, job_json)
    assert code == SmokeExit.CONFIG == report.exit_code
    assert report.failed_check == "config.missing-env" and "NODE_RANK" in report.reason
    assert report.remedy


def test_cli_wrong_world_size_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job_json, env = _rendered()
    env["WORLD_SIZE"] = "6"
    code, report = _run_cli(tmp_path, monkeypatch, env, job_json)
    assert code == SmokeExit.CONFIG
    assert report.failed_check == "config.world-size" and "WORLD_SIZE: 6" in report.reason


def test_cli_unreadable_config_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, env = _rendered()
    code, report = _run_cli(tmp_path, monkeypatch, env, '{"nodes": "two"}')
    assert code == SmokeExit.CONFIG
    assert report.failed_check == "config.invalid" and "job.json" in report.reason


def test_cli_image_with_another_runtime_version_exits_2_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_json, env = _rendered()
    edited = json.dumps({**json.loads(job_json), "runtimeVersion": "0.0.9"})
    code, report = _run_cli(tmp_path, monkeypatch, env, edited)
    assert code == SmokeExit.CONFIG
    assert report.failed_check == "config.runtime-version"
    assert (
        f"hyperframe-runtime {distribution_version('hyperframe-runtime')}, but the operator expects 0.0.9"
        in report.reason
    )
    assert "hyperframe image build" in report.remedy


def test_launcher_config_errors_exit_2_and_write_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_json, env = _rendered()
    config = tmp_path / "job.json"
    config.write_text(job_json)
    log = tmp_path / "termination-log"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("NPROC_PER_NODE", "3")
    monkeypatch.setenv("WORLD_SIZE", "6")
    assert launcher.main(["--config", str(config), "--termination-log", str(log)]) == 2
    result = json.loads(log.read_text())
    assert result["ok"] is False and "NPROC_PER_NODE: 3" in result["reason"]


def test_launcher_maps_the_job_onto_the_trainer_config() -> None:
    job_json, env = _rendered()
    from hyperframe.api.resolved import ResolvedJobConfig

    job = ResolvedJobConfig.from_json(job_json)
    config = launcher.train_config(job)
    assert (config.pipeline, config.data, config.policy, config.frames) == (2, 2, "1f1b", 3)
    assert (config.d_model, config.n_layers, config.device, config.backend) == (64, 4, "cpu", "gloo")
    args = launcher.torchrun_args(job, JobEnv.from_env(env), "/tmp/t.json")
    assert "--node-rank=1" in args and "--nnodes=2" in args and "--max-restarts=0" in args
    assert args[-4:] == ["--module", "hyperframe_runtime.train", "--config", "/tmp/t.json"]


def test_timeout_split_leaves_room_inside_the_gate_limit() -> None:
    assert split_timeout(10, 900) == (6.0, 2.0)
    assert split_timeout(300, 900) == (240.0, 30.0)
    assert split_timeout(3600, 900) == (900.0, 60.0)  # capped by the job's rendezvous timeout
    for total in (10, 60, 120, 300, 3600):
        rendezvous, step = split_timeout(total, 900)
        assert 2 <= step <= 60 and step <= rendezvous <= total - step


def test_probe_selection_and_simulation_hook() -> None:
    job_json, env = _rendered()
    from hyperframe.api.resolved import ResolvedJobConfig

    config = gate_config(ResolvedJobConfig.from_json(job_json), JobEnv.from_env(env), node_name="n")
    assert select_probe(config, {}) == SkippedProbe()
    probe = select_probe(config, {"HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE": "1"})
    assert probe == SimulatedProbe(frozenset({1}))
    outcome = probe.check(1, config)
    assert outcome.failure is not None and outcome.failure.reason_id == "device.count"
    assert "device 1 is not visible" in outcome.failure.message
    assert probe.check(0, config).failure is None
    with pytest.raises(JobEnvError, match="comma-separated device indices"):
        select_probe(config, {"HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE": "gpu1"})


def test_the_node_level_simulation_hook_reads_the_nodes_file(tmp_path: Path) -> None:
    job_json, env = _rendered()
    from hyperframe.api.resolved import ResolvedJobConfig

    config = gate_config(ResolvedJobConfig.from_json(job_json), JobEnv.from_env(env), node_name="n")
    fault = tmp_path / "missing-devices"
    hook = {"HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE_FILE": str(fault)}
    assert select_probe(config, hook) == SkippedProbe()  # a healthy node has no such file
    fault.write_text("")
    assert select_probe(config, hook) == SkippedProbe()
    fault.write_text("0\n")
    assert select_probe(config, hook) == SimulatedProbe(frozenset({0}))
    # The direct form wins: it is the job's own setting.
    assert select_probe(config, {**hook, "HYPERFRAME_SMOKE_SIMULATE_MISSING_DEVICE": "1"}) == SimulatedProbe(
        frozenset({1})
    )
    fault.write_text("gpu0")
    with pytest.raises(JobEnvError, match="comma-separated device indices"):
        select_probe(config, hook)


def test_gate_checks_the_pods_shm_size_and_rdma_from_job_json() -> None:
    _, env = _rendered()
    from hyperframe.api.resolved import ResolvedJobConfig

    docs = list(yaml.safe_load_all((REPO / "examples" / "cpu-2node.yaml").read_text()))
    pair = [next(d for d in docs if d["kind"] == kind) for kind in ("HyperFrameJob", "HyperFrameRuntime")]
    (configmap,) = [o for o in render_job(*pair) if o["kind"] == "ConfigMap"]
    job = ResolvedJobConfig.from_json(configmap["data"]["job.json"])
    config = gate_config(job, JobEnv.from_env(env), node_name="n")
    # cpu-2node: shmSize 1Gi under a 4Gi memory limit; CPU jobs get no floor and no RDMA check.
    assert (config.shm_bytes, config.min_shm_bytes, config.require_rdma) == (1 << 30, 0, False)
    rdma = dataclasses.replace(
        job,
        gpus_per_node=2,
        backend="nccl",
        smoke=dataclasses.replace(job.smoke, rdma_enabled=True, rdma_resource_name="rdma/ib"),
    )
    config = gate_config(rdma, JobEnv.from_env(env), node_name="n")
    assert config.require_rdma and config.rdma_resource_name == "rdma/ib"
    assert config.min_shm_bytes == SHM_FLOOR_BYTES and config.shm_bytes == 1 << 30


def test_launcher_passes_the_layer_split_and_both_sides_agree_on_it() -> None:
    from typing import get_args

    from hyperframe.api import job as job_api
    from hyperframe.api.fields import field_meta
    from hyperframe.api.resolved import ResolvedJobConfig
    from hyperframe_runtime import config as runtime_config
    from hyperframe_runtime.pipeline.partitioning import PARTITION_FRAMES, SPLIT_MARGIN

    docs = list(yaml.safe_load_all((REPO / "examples" / "cpu-2node.yaml").read_text()))
    job = next(d for d in docs if d["kind"] == "HyperFrameJob")
    runtime = next(d for d in docs if d["kind"] == "HyperFrameRuntime")
    job["spec"]["frames"]["layerSplit"] = "measured"
    config = launcher.train_config(ResolvedJobConfig.from_json(plan(render_job(job, runtime)).job_json))
    assert config.layer_split == "measured"
    assert get_args(job_api.LayerSplit) == get_args(runtime_config.LayerSplit)
    # The CRD's description names the runtime's number of measuring frames.
    doc = next(field_meta(f).doc for f in dataclasses.fields(job_api.Frames) if f.name == "layer_split")
    assert f"the first {PARTITION_FRAMES} frames" in doc and f"{PARTITION_FRAMES} more frames" in doc
    assert f"at least {SPLIT_MARGIN:.0%} faster" in doc
    # Both sides default to auto.
    assert job_api.Frames.__dataclass_fields__["layer_split"].default == "auto"
    assert runtime_config.TrainConfig().layer_split == "auto"
