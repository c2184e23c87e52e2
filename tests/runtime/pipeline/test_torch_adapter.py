"""The private-torch adapter: the installed torch must be inside the tested range.

This test fails loudly on an untested torch so that an upgrade is a deliberate act: read the new
``torch/distributed/pipelining/schedules.py``, re-run the multi-process tests, widen TESTED_TORCH.
"""

from __future__ import annotations

import pytest
import torch
from hyperframe_runtime.pipeline.torch_adapter import TESTED_TORCH, is_tested_torch, to_torch_orders
from hyperframe_runtime.schedule.ir import Action, OpKind, ScheduleError


def test_installed_torch_is_in_the_tested_range() -> None:
    assert is_tested_torch(), (
        f"torch {torch.__version__} is outside TESTED_TORCH {TESTED_TORCH}: the pipeline adapter uses "
        "private torch.distributed.pipelining names; re-validate it before widening the range"
    )


@pytest.mark.parametrize(
    ("version", "tested"), [("2.13.0", True), ("2.13.1+cu130", True), ("2.12.1", False), ("2.14.0a0", False)]
)
def test_version_range_check(version: str, tested: bool) -> None:
    assert is_tested_torch(version) is tested


def test_orders_convert_to_torch_actions_and_reject_comm_ops() -> None:
    converted = to_torch_orders({0: [Action(0, OpKind.F, 0), Action(0, OpKind.I, 0), Action(0, OpKind.W, 0)]})
    assert [str(a) for a in converted[0]] == ["0F0", "0I0", "0W0"]
    with pytest.raises(ScheduleError, match="comm action"):
        to_torch_orders({0: [Action(0, OpKind.SEND_F, 0)]})


def test_split_backward_gives_the_fused_gradients() -> None:
    """The I + W passes torch's split stages run leave the same gradients as one fused B."""
    import torch
    from hyperframe_runtime.config import TrainConfig
    from hyperframe_runtime.models.gpt import GPTStage
    from hyperframe_runtime.pipeline.torch_adapter import split_backward

    stage = GPTStage(TrainConfig(pipeline=2, n_layers=4, d_model=32, n_heads=2), 1, 3, layers=range(2))
    x = torch.randn(2, 8, 32)
    grad = torch.randn_like(x)
    grads = []
    for split in (False, True):
        stage.zero_grad(set_to_none=True)
        (forward_s, first_s, second_s), input_grad = split_backward(
            stage, x.clone().requires_grad_(True), grad, split=split
        )
        assert forward_s > 0 and first_s > 0 and (second_s > 0) == split
        grads.append(
            [input_grad.clone()] + [p.grad.clone() for p in stage.parameters() if p.grad is not None]
        )
    assert len(grads[0]) == len(grads[1]) == 1 + len(list(stage.parameters()))
    for fused, parts in zip(*grads, strict=True):
        torch.testing.assert_close(parts, fused)
