"""Uneven layer splits: the built-in GPT built through the per-layer hook (``ModelSpec.build_layers``)
is the same model however its blocks are split, and bad splits name the fix."""

from __future__ import annotations

import pytest
import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import gpt_model_spec, synthetic_batch
from hyperframe_runtime.models.profiling import activation_bytes, stage_activation_bytes
from hyperframe_runtime.models.spec import ModelSpec

CONFIG = TrainConfig(vocab_size=64, seq_len=8, d_model=32, n_heads=2, n_layers=6, seed=5)


def run_split(
    spec: ModelSpec, boundaries: tuple[int, ...], tokens: torch.Tensor
) -> tuple[torch.Tensor, set[str]]:
    x, names = tokens, set()
    for stage in range(len(boundaries) - 1):
        module = spec.build_split(stage, boundaries)
        names |= {name for name, _ in module.named_parameters()}
        x = module(x)
    return x, names


@pytest.mark.parametrize("boundaries", [(0, 1, 6), (0, 5, 6), (0, 1, 2, 6), (0, 2, 3, 4, 6)])
def test_an_uneven_split_is_the_same_model(boundaries: tuple[int, ...]) -> None:
    spec = gpt_model_spec(CONFIG)
    tokens, _ = synthetic_batch(CONFIG, frame=0, replica=0, num_samples=2)
    even = tuple(range(0, 7, 3))
    want, want_names = run_split(spec, even, tokens)
    got, got_names = run_split(spec, boundaries, tokens)
    assert got_names == want_names  # global block names: checkpoints do not depend on the split
    torch.testing.assert_close(got, want)
    blocks = {name.split(".")[1] for name in got_names if name.startswith("blocks.")}
    assert blocks == {str(i) for i in range(6)}


@pytest.mark.parametrize("boundaries", [(0, 3), (1, 6), (0, 3, 3, 6), (0, 4, 2, 6), (0, 7)])
def test_a_bad_split_names_the_fix(boundaries: tuple[int, ...]) -> None:
    spec = gpt_model_spec(CONFIG)
    with pytest.raises(ValueError, match=r"layer split .* must rise strictly from 0 to num_layers \(6\)"):
        spec.build_split(0, boundaries)


def test_a_model_without_the_hook_cannot_split_unevenly() -> None:
    spec = gpt_model_spec(CONFIG)
    plain = ModelSpec(build_stage=spec.build_stage, loss_fn=spec.loss_fn, make_batch=spec.make_batch)
    with pytest.raises(ValueError, match=r"needs ModelSpec\.build_layers and num_layers"):
        plain.build_split(0, (0, 3, 6))


def test_activation_bytes_grow_with_the_blocks_and_count_the_head() -> None:
    spec = gpt_model_spec(CONFIG)
    hidden = torch.randn(2, CONFIG.seq_len, CONFIG.d_model, requires_grad=True)
    one = activation_bytes(spec.build_split(1, (0, 5, 6)), hidden)  # last stage: 1 block + head
    two = activation_bytes(spec.build_split(1, (0, 4, 6)), hidden)  # last stage: 2 blocks + head
    middle = activation_bytes(spec.build_split(1, (0, 4, 5, 6)), hidden)  # 1 block, no head
    assert two > one > middle > 0
    # One more block costs one block's saved bytes: the middle stage's, less its output (which the
    # pipeline holds too, so it is counted there).
    assert two - one == middle - hidden.nelement() * hidden.element_size()


def test_stage_activation_bytes_follow_the_split() -> None:
    spec = gpt_model_spec(CONFIG)
    even = stage_activation_bytes(spec, 2, 2)
    uneven = stage_activation_bytes(spec, 2, 2, (0, 5, 6))
    block = activation_bytes(
        spec.build_split(1, (0, 4, 5, 6)), torch.randn(2, CONFIG.seq_len, CONFIG.d_model)
    )
    assert uneven[0] > even[0] and uneven[1] < even[1]  # blocks (and their bytes) moved to stage 0
    assert sum(uneven) == pytest.approx(sum(even), rel=0.02)  # the same model, cut elsewhere
    assert even[1] > even[0] > block > 0  # stage 1 also holds the head's logits
