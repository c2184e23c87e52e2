"""Activation checkpointing and precision of the built-in GPT (``TrainConfig.activation_checkpointing``,
``TrainConfig.precision``), in one process.

With checkpointing the gradients are the same as without it.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec


def _grads_and_block_calls(config: TrainConfig) -> tuple[dict[str, torch.Tensor], int]:
    spec = gpt_model_spec(config)
    model = spec.build_stage(0, 1)
    calls = 0

    def count(*_: object) -> None:
        nonlocal calls
        calls += 1

    for block in model.blocks.values():
        block.register_forward_hook(count)
    inputs, targets = spec.make_batch(0, 0, 4)
    spec.loss_fn(model(inputs), targets).backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}, calls


def test_checkpointed_blocks_recompute_and_give_the_same_gradients() -> None:
    config = TrainConfig(vocab_size=32, seq_len=8, d_model=16, n_heads=2, n_layers=3)
    plain, plain_calls = _grads_and_block_calls(config)
    checked, checked_calls = _grads_and_block_calls(
        dataclasses.replace(config, activation_checkpointing=True)
    )
    assert plain_calls == checked_calls == 3
    assert plain.keys() == checked.keys()
    for name, grad in plain.items():
        torch.testing.assert_close(checked[name], grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    ("device", "precision", "bf16"),
    [
        ("cpu", "auto", False),
        ("cpu", "fp32", False),
        ("cuda", "auto", True),
        ("cuda", "fp32", False),
        ("cuda", "bf16", True),
    ],
)
def test_precision_resolves_per_device(device: str, precision: str, bf16: bool) -> None:
    config = TrainConfig.from_dict({"device": device, "precision": precision})
    assert config.bf16_autocast is bf16


def test_bf16_on_cpu_is_a_config_error() -> None:
    with pytest.raises(ValueError, match=r"^precision: 'bf16' autocast runs on cuda only"):
        TrainConfig(precision="bf16")
