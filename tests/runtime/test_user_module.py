"""A user model module (``entrypoint.module``): its args reach the factory, and its mistakes are
configuration errors.

The job's ``entrypoint.module.args`` become ``TrainConfig.model_args`` (the launcher's mapping)
and the factory reads them. A module that does not import, a missing or non-callable factory, a
factory of the wrong signature or one that returns something else fail as configuration errors:
the real ``hyperframe-train`` exits 2 naming the module, the field and the fix, and ``hyperframe
local`` (launcher, torchrun, trainer) exits 2 too; the operator's failure policy classifies the
launcher's exit as permanent (no gang restart).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hyperframe.api.models import parse_job, parse_runtime
from hyperframe.api.resolve import resolve
from hyperframe.controller.observed import ContainerEnd, ObservedPod
from hyperframe.controller.policy_failure import find_failures
from hyperframe.controller.policy_smoke import GateVerdict
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.launcher import train_config
from hyperframe_runtime.models.spec import ModelLoadError, load_model_spec

REPO = Path(__file__).resolve().parents[2]
USER_MODELS = Path(__file__).with_name("user_models")
NO_GATES = GateVerdict(started=True, all_passed=True, failures=(), exclude_nodes=(), results={})
ARGS = {"layers": 2, "width": 16, "note": {"nested": [1, "two"]}}


def _docs(name: str = "cpu-tiny") -> list[dict[str, object]]:
    return list(yaml.safe_load_all((REPO / "examples" / f"{name}.yaml").read_text()))


def _with_module(
    docs: list[dict[str, object]], name: str, args: object = None, seq_len: int | None = None
) -> list[dict[str, object]]:
    for doc in docs:
        if doc["kind"] == "HyperFrameJob":
            spec = doc["spec"]
            assert isinstance(spec, dict)
            module: dict[str, object] = {"name": name}
            if args is not None:
                module["args"] = args
            if seq_len is not None:
                module["seqLen"] = seq_len
            spec["entrypoint"] = {"module": module}
        else:
            spec = doc["spec"]
            assert isinstance(spec, dict)
            spec["smoke"]["enabled"] = False
    return docs


def test_job_args_reach_the_factory() -> None:
    runtime, job = _with_module(_docs(), "args_model:sized", ARGS)
    resolved = resolve(parse_job(job), parse_runtime(runtime)).config
    config = train_config(resolved)
    assert config.model == "args_model:sized" and config.model_args == ARGS
    sys.path.insert(0, str(USER_MODELS))
    try:
        from args_model import ArgsSpec

        spec = load_model_spec(TrainConfig.from_json(config.to_json()))  # as hyperframe-train reads it
    finally:
        sys.path.remove(str(USER_MODELS))
    assert isinstance(spec, ArgsSpec) and spec.args == ARGS
    assert spec.num_layers == 2 and spec.build_stage(0, 1).blocks["0"].qkv.in_features == 16


@pytest.mark.parametrize("seq_len", [None, 48])
def test_the_jobs_sequence_length_reaches_the_factory(seq_len: int | None) -> None:
    runtime, job = _with_module(_docs(), "args_model:sized", ARGS, seq_len=seq_len)
    config = train_config(resolve(parse_job(job), parse_runtime(runtime)).config)
    expected = seq_len or 32  # entrypoint.module.seqLen's default
    assert config.seq_len == expected
    sys.path.insert(0, str(USER_MODELS))
    try:
        spec = load_model_spec(TrainConfig.from_json(config.to_json()))
    finally:
        sys.path.remove(str(USER_MODELS))
    assert spec.tokens_per_sample == expected  # what the factory read as config.seq_len
    assert spec.build_stage(0, 1).pos_emb.num_embeddings == expected


@pytest.mark.parametrize(
    ("model", "expect"),
    [
        (
            "no_such_package_xyz.model:build",
            ["module 'no_such_package_xyz.model' does not import", "install the package"],
        ),
        (
            "args_model:missing",
            ["has no callable 'missing' (missing)", "def missing(config) -> TorchModel` (or ModelSpec)"],
        ),
        ("args_model:NOT_CALLABLE", ["has no callable 'NOT_CALLABLE' (not callable)"]),
        ("args_model:two_args", ["cannot be called as two_args(config)", "takes exactly one argument"]),
        ("args_model:not_a_spec", ["returned dict, expected", "return a TorchModel or a ModelSpec"]),
    ],
)
def test_hyperframe_train_exits_2_naming_the_module_and_the_fix(
    tmp_path: Path, model: str, expect: list[str]
) -> None:
    path = tmp_path / "train.json"
    path.write_text(TrainConfig(model=model, model_args=ARGS).to_json(), encoding="utf-8")
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "PYTHONPATH": str(USER_MODELS)}
    proc = subprocess.run(
        [sys.executable, "-m", "hyperframe_runtime.train", "--config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "entrypoint.module.name (training config: model)" in proc.stderr
    for text in expect:
        assert text in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_load_model_spec_raises_a_config_error() -> None:
    with pytest.raises(ModelLoadError, match="does not import"):
        load_model_spec(TrainConfig(model="no_such_package_xyz:build"))


@pytest.mark.slow
def test_a_module_that_does_not_import_fails_the_job_as_a_config_error(tmp_path: Path) -> None:
    """Launcher, torchrun and trainer for real (``hyperframe local``); then the operator's policy."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(_with_module(_docs(), "no_such_package_xyz.model:build")))
    work = tmp_path / "work"
    proc = subprocess.run(
        [sys.executable, "-m", "hyperframe.cli", "local", str(path), "--workdir", str(work)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "module 'no_such_package_xyz.model' does not import" in out
    assert "install the package in the framework image" in out
    message = (work / "launch-node0.json").read_text()
    assert json.loads(message)["exit_code"] == 2
    pod = ObservedPod(
        name="cpu-tiny-g0-0",
        job="cpu-tiny",
        rank=0,
        generation=0,
        phase="Failed",
        node="node-0",
        deleting_since=None,
        gate_started=True,
        gate_end=None,
        main_started=True,
        main_end=ContainerEnd(exit_code=2, reason="Error", message=message),
    )
    (failure,) = find_failures([pod], num_nodes=1, gates=NO_GATES, dead_node_pods=set())
    assert failure.permanent, failure
    assert "configuration error" in failure.message
