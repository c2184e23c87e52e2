"""Ordinary models cut by the runtime (``TorchModel``), trained on real gloo ranks.

A plain ``nn.Module`` (``user_models/plain_model.py``) and both Hugging Face layouts of the
built-in factory ``hyperframe_runtime.models.hf:causal_lm`` (Llama-style, and GPT-2-style with
its tied embedding and head), on 2 pipeline ranks and on 2 x 2 (pipeline x data), under every
placement (one stage per rank with 1F1B, the V with ZBV, the looped placement with
Interleaved1F1B, a placement change between frames, and the measured layer split): the
per-frame losses must equal the same model trained unpipelined in one process (the Hugging Face
models' own forward, for the HF cases). Tiny weights saved with ``save_pretrained`` load on the
stages: frame 0's loss equals the loss of ``from_pretrained`` of the same directory, and a run
resumed from a snapshot continues the uninterrupted run's losses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.data.loader import open_batches
from hyperframe_runtime.data.prepare import prepare_bytes
from hyperframe_runtime.models import init_weights, load_model_spec
from hyperframe_runtime.models.hf import CausalLMStages, causal_lm_loss
from pipeline_reference import reference_optimizer, reference_scheduler, run_harness
from torch import nn

pytestmark = pytest.mark.slow

USER_MODELS = Path(__file__).resolve().parents[1] / "user_models"
HF = "hyperframe_runtime.models.hf:causal_lm"
REL = 1e-5
LLAMA = {
    "model_type": "llama",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 32,
}
GPT2 = {
    "model_type": "gpt2",
    "n_embd": 32,
    "n_layer": 4,
    "n_head": 4,
    "vocab_size": 256,
    "n_positions": 32,
    "embd_pdrop": 0.0,
    "resid_pdrop": 0.0,
    "attn_pdrop": 0.0,
    "bos_token_id": 0,
    "eos_token_id": 0,
}
SKEWED_COSTS = {"forward": [3.0, 1.0], "backward_input": [1.0] * 2, "backward_weight": [1.0] * 2}


def _base(**over: Any) -> dict[str, Any]:
    return {
        "seq_len": 16,
        "microbatches_per_frame": 4,
        "micro_batch_size": 2,
        "frames": 3,
        "lr": 3e-3,
        "seed": 7,
        **over,
    }


def _shards(tmp_path: Path) -> str:
    text = tmp_path / "text.txt"
    text.write_text("HyperFrame trains what you bring. " * 80, encoding="utf-8")
    out = tmp_path / "shards"
    prepare_bytes([text], out)
    return str(out)


def _hf_model(args: dict[str, Any]) -> tuple[nn.Module, Callable[[torch.Tensor], torch.Tensor]]:
    """The Hugging Face model itself (its own forward), for the reference."""
    from transformers import AutoConfig, AutoModelForCausalLM

    if "path" in args:
        lm = AutoModelForCausalLM.from_pretrained(
            args["path"], local_files_only=True, attn_implementation="sdpa"
        )
    else:
        rest = {k: v for k, v in args["config"].items() if k != "model_type"}
        hf_config = AutoConfig.for_model(args["config"]["model_type"], **rest)
        lm = AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa")
    return lm, lambda x: lm(x).logits


def _reference(config: TrainConfig) -> list[float]:
    """Per-frame losses of ``config`` trained unpipelined in one process with torch directly."""
    import plain_model

    spec = load_model_spec(config)  # for the batches only: the same data the ranks read
    if config.model == HF:
        lm, forward = _hf_model(config.model_args)
        if "path" not in config.model_args:
            base = "model" if config.model_args["config"]["model_type"] == "llama" else "transformer"
            init_weights(CausalLMStages(lm, base), seed=config.seed, init=lm._init_weights)
        model, loss_fn = lm, causal_lm_loss
    else:
        model = plain_model.TinyLM(int(config.model_args.get("layers", 4)))
        init_weights(model, seed=config.seed)
        forward, loss_fn = model, plain_model.loss
    sources = [open_batches(config, spec, replica=r) for r in range(config.data)]
    optimizer = reference_optimizer(config, list(model.parameters()))
    scheduler = reference_scheduler(config, optimizer)
    m, dp = config.microbatches_per_frame, config.data
    losses = []
    for frame in range(config.frames):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for source in sources:
            inputs, targets = source.next_frame(frame)
            for x, y in zip(inputs.chunk(m), targets.chunk(m), strict=True):
                loss = loss_fn(forward(x), y) / (m * dp)
                loss.backward()
                total += float(loss.detach())
        optimizer.step()
        scheduler.step()
        losses.append(total)
    return losses


def _run(
    tmp_path: Path, world: int, cases: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(USER_MODELS))
    monkeypatch.syspath_prepend(str(USER_MODELS))
    payload = []
    resumed = {name for name, config in cases.items() if "copy_snapshot" in config.get("_case", {})}
    for name, config in cases.items():
        extra = config.pop("_case", {})
        payload.append({"kind": "train", "name": name, "config": config, **extra})
    run_harness(world, payload, tmp_path)
    for name, config in cases.items():
        if name in resumed:
            continue
        got = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
        want = _reference(TrainConfig.from_dict(config))
        assert got["losses"] == pytest.approx(want, rel=REL), name


def test_plain_module_and_hf_models_on_two_pipeline_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shards = _shards(tmp_path)
    plain = {"model": "plain_model:build", "pipeline": 2}
    hf = {"model": HF, "pipeline": 2, "data_shards": shards}
    cases = {
        "plain-1f1b": _base(**plain, policy="1f1b"),
        # Starts on the V, moves to one stage per rank before frame 1 (a stage move).
        "plain-moved": _base(
            **plain, policy="hyperframe", _case={"replan_to": {"frame": 1, "costs": SKEWED_COSTS}}
        ),
        # Cut points instead of the container: two pieces of two blocks.
        "plain-cut-points": _base(**plain, policy="1f1b", model_args={"cuts": ["layers.2"]}),
        "plain-measured": _base(
            **plain, policy="hyperframe", replan_every=1, stages_per_rank=1, layer_split="measured", frames=6
        ),
        "llama-1f1b": _base(**hf, policy="1f1b", model_args={"config": LLAMA}),
        "llama-zbv": _base(**hf, policy="zbv", model_args={"config": LLAMA}),
        "gpt2-1f1b": _base(**hf, policy="1f1b", model_args={"config": GPT2}),  # tied across ranks
        "gpt2-zbv": _base(**hf, policy="zbv", model_args={"config": GPT2}),  # tied, stages 0 and 3 on rank 0
    }
    _run(tmp_path, 2, cases, monkeypatch)


def test_plain_module_and_hf_models_on_pipeline_2_by_data_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shards = _shards(tmp_path)
    both = {"pipeline": 2, "data": 2}
    hf = {"model": HF, "data_shards": shards, **both}
    cases = {
        "plain-p2d2": _base(model="plain_model:build", policy="1f1b", **both),
        "llama-p2d2-looped": _base(**hf, policy="interleaved1f1b", model_args={"config": LLAMA}),
        "gpt2-p2d2": _base(**hf, policy="1f1b", model_args={"config": GPT2}),
    }
    _run(tmp_path, 4, cases, monkeypatch)


def _save_tiny(tmp_path: Path, name: str, config: dict[str, Any]) -> str:
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(3)
    rest = {k: v for k, v in config.items() if k != "model_type"}
    lm = AutoModelForCausalLM.from_config(AutoConfig.for_model(config["model_type"], **rest))
    path = tmp_path / name
    lm.save_pretrained(path)
    return str(path)


def test_from_pretrained_weights_load_on_the_stages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shards = _shards(tmp_path)
    llama, gpt2 = _save_tiny(tmp_path, "llama", LLAMA), _save_tiny(tmp_path, "gpt2", GPT2)
    hf = {"model": HF, "pipeline": 2, "data_shards": shards, "policy": "1f1b"}
    full, again = tmp_path / "full", tmp_path / "again"
    cases = {
        "llama-pretrained": _base(**hf, model_args={"path": llama}),
        "gpt2-pretrained": _base(
            **hf, model_args={"path": gpt2}, checkpoint_dir=str(full), checkpoint_every=1
        ),
        # Resumed after frame 1 (the stages are built empty and filled from the snapshot).
        "gpt2-resumed": _base(
            **hf,
            model_args={"path": gpt2},
            checkpoint_dir=str(again),
            _case={"copy_snapshot": str(full / "frame-000001")},
        ),
    }
    _run(tmp_path, 2, cases, monkeypatch)
    uninterrupted = json.loads((tmp_path / "gpt2-pretrained.json").read_text(encoding="utf-8"))
    resumed = json.loads((tmp_path / "gpt2-resumed.json").read_text(encoding="utf-8"))
    assert resumed["start"] == 1
    assert resumed["losses"] == pytest.approx(uninterrupted["losses"][1:], rel=REL)
    # Frame 0's loss is the loaded model's: a fresh init would be far from it.
    for name, path in (("llama-pretrained", llama), ("gpt2-pretrained", gpt2)):
        got = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))["losses"][0]
        config = TrainConfig.from_dict(cases[name])
        inputs, targets = open_batches(config, load_model_spec(config), replica=0).next_frame(0)
        _, forward = _hf_model({"path": path})
        with torch.no_grad():
            m = config.microbatches_per_frame
            want = sum(
                float(causal_lm_loss(forward(x), y)) / m
                for x, y in zip(inputs.chunk(m), targets.chunk(m), strict=True)
            )
        assert got == pytest.approx(want, rel=REL), name
