"""The splitter of ordinary models (``models.cutting``), in one process.

A ``TorchModel``'s module is built with its parameters on the meta device; a stage keeps only
its own modules under the full model's names, is materialised and initialised alone, and its
weights equal the unsplit model's (one seed per module name). Bad cut points are configuration
errors naming the field and the fix (``hyperframe-train`` exits 2). A stage move builds its new
stages without initialising them again. The hyperframe policy's candidates include one stage
per rank (1F1B) and the V for such a model. Tied copies on two stages of one rank get the sum of
their gradients.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models import TiedWeight, init_weights, load_model_spec
from hyperframe_runtime.models.cutting import meta_parameters
from hyperframe_runtime.models.spec import ModelLoadError
from hyperframe_runtime.pipeline.candidates import candidate_plans
from hyperframe_runtime.pipeline.stages import StageContext
from hyperframe_runtime.pipeline.tied import norm_params, sum_tied_grads
from hyperframe_runtime.pipeline.topology import ParallelGroups
from hyperframe_runtime.schedule.ir import Placement
from torch import nn

USER_MODELS = Path(__file__).resolve().parents[1] / "user_models"
FIELD = "entrypoint.module.name (training config: model): plain_model:build(config): TorchModel.cuts"


@pytest.fixture(autouse=True)
def _user_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(USER_MODELS))
    yield


def _config(**over: object) -> TrainConfig:
    return TrainConfig.from_dict({"model": "plain_model:build", "pipeline": 2, "seq_len": 8, **over})


def test_the_factory_builds_on_meta_and_each_stage_holds_only_its_own_modules() -> None:
    import plain_model

    with meta_parameters():  # as load_model_spec calls the factory
        made = plain_model.build(_config())
    assert all(p.is_meta for p in made.module.parameters())
    assert made.module.layers[0].up.weight.shape == (32, 16)
    spec = load_model_spec(_config())
    assert spec.num_layers == 4 and spec.has_layer_hook
    first, last = spec.build_layers(0, 2, range(0, 1)), spec.build_layers(1, 2, range(1, 4))
    names0 = [n for n, _ in first.named_parameters()]
    names1 = [n for n, _ in last.named_parameters()]
    assert names0[:2] == ["embed.weight", "layers.0.norm.weight"] and all("layers.1" not in n for n in names0)
    assert isinstance(first.head, nn.Identity) and isinstance(last.embed, nn.Identity)
    assert names1[0] == "layers.1.norm.weight" and names1[-1] == "head.bias"  # global indices kept
    assert not any(p.is_meta for m in (first, last) for p in m.parameters())
    full = plain_model.TinyLM(4)
    init_weights(full, seed=0)
    want = dict(full.named_parameters())
    assert sorted(names0 + names1) == sorted(want)
    for stage in (first, last):
        for name, param in stage.named_parameters():
            assert torch.equal(param, want[name]), name
    x = torch.randint(0, plain_model.VOCAB, (2, 8))
    assert torch.allclose(last(first(x)), full(x), atol=1e-6)


@pytest.mark.parametrize(
    ("args", "over", "expect"),
    [
        ({"cuts": "layerz"}, {}, ["'layerz' is not a module of the model", "cuts='layers'"]),
        (
            {"cuts": ["layers.0"]},
            {},
            ["after its first entry (layers.0", "leaving out the container's first"],
        ),
        (
            {"cuts": ["layers.2", "norm"]},
            {},
            ["are not all entries of one nn.ModuleList", "cut points inside it"],
        ),
        (
            {"cuts": ["layers.2"]},
            {"stages_per_rank": 2},
            ["cut into 2 piece(s) but pipeline (2) x", "give more cut"],
        ),
    ],
)
def test_bad_cuts_are_config_errors_naming_the_field_and_the_fix(
    args: dict[str, object], over: dict[str, object], expect: list[str]
) -> None:
    with pytest.raises(ModelLoadError) as caught:
        load_model_spec(_config(model_args=args, **over))
    assert str(caught.value).startswith(FIELD), caught.value
    for text in expect:
        assert text in str(caught.value)


def test_hyperframe_train_exits_2_on_bad_cuts(tmp_path: Path) -> None:
    path = tmp_path / "train.json"
    path.write_text(_config(model_args={"cuts": "layerz"}).to_json(), encoding="utf-8")
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "PYTHONPATH": str(USER_MODELS)}
    proc = subprocess.run(
        [sys.executable, "-m", "hyperframe_runtime.train", "--config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert FIELD in proc.stderr and "name the container of the repeated blocks" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_stage_move_builds_its_stages_without_initialising_them() -> None:
    import plain_model

    spec = load_model_spec(_config(model="plain_model:counting"))
    no_groups = cast("ParallelGroups", None)  # building stages needs no process group
    context = StageContext(_config(), spec, 0, no_groups, torch.device("cpu"))
    plain_model.INIT_CALLS.clear()
    context.build_stages(Placement.vshape(2))
    assert "Linear" in plain_model.INIT_CALLS
    plain_model.INIT_CALLS.clear()
    _, built = context.build_stages(Placement.one_per_rank(2), empty=True)
    assert plain_model.INIT_CALLS == [] and not any(p.is_meta for m in built.values() for p in m.parameters())


def test_the_hyperframe_policy_tries_1f1b_and_the_v_on_a_torch_model() -> None:
    config = _config(policy="hyperframe", replan_every=1)
    spec = load_model_spec(config)
    names = {c.name for c in candidate_plans(config, num_layers=spec.num_layers)[0]}
    assert {"1f1b", "gpipe", "zbv", "interleaved1f1b"} <= names
    two_pieces = _config(policy="hyperframe", replan_every=1, model_args={"cuts": ["layers.2"]})
    names = {c.name for c in candidate_plans(two_pieces, num_layers=2)[0]}
    assert "1f1b" in names and "zbv" not in names  # 2 pieces cannot fill the V's 4 stages


def test_tied_copies_on_two_stages_of_one_rank_get_the_summed_gradient() -> None:
    head, embed = nn.Linear(3, 2, bias=False), nn.Linear(3, 2, bias=False)
    stages = {0: nn.ModuleDict({"embed": embed}), 3: nn.ModuleDict({"head": head})}
    embed.weight.grad = torch.ones(2, 3)
    head.weight.grad = torch.full((2, 3), 2.0)
    tie = TiedWeight(("embed.weight", "head.weight"), (2, 3))
    sum_tied_grads(stages, [tie], None, torch.device("cpu"))
    assert torch.equal(embed.weight.grad, torch.full((2, 3), 3.0))
    assert torch.equal(head.weight.grad, torch.full((2, 3), 3.0))
    counted, copies = norm_params(stages, [tie])
    assert [id(p) for p in counted] == [id(embed.weight)] and [id(p) for p in copies] == [id(head.weight)]


def _saved_tensors_and_grads(stage: nn.Module, x: torch.Tensor) -> tuple[int, dict[str, torch.Tensor]]:
    saved = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal saved
        saved += 1
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = stage(x)
    out.float().pow(2).mean().backward()
    return saved, {n: p.grad.clone() for n, p in stage.named_parameters() if p.grad is not None}


def test_activation_checkpointing_recomputes_each_block_with_the_same_gradients() -> None:
    x = torch.randint(0, 32, (2, 8))
    plain = load_model_spec(_config()).build_layers(0, 1, range(0, 4))
    recomputed = load_model_spec(_config(activation_checkpointing=True)).build_layers(0, 1, range(0, 4))
    saved_plain, grads_plain = _saved_tensors_and_grads(plain, x)
    saved_recomputed, grads_recomputed = _saved_tensors_and_grads(recomputed, x)
    assert saved_recomputed < saved_plain  # only each block's input is kept in the forward
    assert grads_recomputed.keys() == grads_plain.keys()
    for name, grad in grads_plain.items():
        assert torch.allclose(grads_recomputed[name], grad, atol=1e-6), name


def test_hf_weights_saved_in_bf16_load_into_fp32_stages_and_bad_args_are_config_errors(
    tmp_path: Path,
) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    tiny = AutoConfig.for_model(
        "llama",
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=64,
        max_position_embeddings=16,
    )
    AutoModelForCausalLM.from_config(tiny).to(torch.bfloat16).save_pretrained(tmp_path / "w")
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "w", dtype=torch.bfloat16)
    hf = "hyperframe_runtime.models.hf:causal_lm"
    spec = load_model_spec(
        TrainConfig(model=hf, model_args={"path": str(tmp_path / "w")}, data_shards="/shards")
    )
    stage = spec.build_layers(0, 1, range(0, 2))
    want = dict(saved.named_parameters())
    for name, param in stage.named_parameters():
        assert param.dtype == torch.float32 and torch.equal(param.to(torch.bfloat16), want[name]), name
    with pytest.raises(ModelLoadError, match=r"model_args\): give config .* or path"):
        load_model_spec(TrainConfig(model=hf, model_args={}, data_shards="/shards"))
    with pytest.raises(ModelLoadError, match=r"model_args\)\.path: .* has no config\.json"):
        load_model_spec(TrainConfig(model=hf, model_args={"path": str(tmp_path)}, data_shards="/shards"))
    gpt2 = {
        "model_type": "gpt2",
        "n_embd": 16,
        "n_layer": 2,
        "n_head": 2,
        "vocab_size": 64,
        "n_positions": 16,
    }
    with pytest.raises(
        ModelLoadError, match=r"^entrypoint\.module\.seqLen .*: 32 tokens per sample, .* = 16 rows"
    ):
        load_model_spec(TrainConfig(model=hf, model_args={"config": gpt2}, seq_len=32, data_shards="/shards"))
    load_model_spec(TrainConfig(model=hf, model_args={"config": gpt2}, seq_len=16, data_shards="/shards"))
