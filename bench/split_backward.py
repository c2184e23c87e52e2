"""Fused against split backward on CPU: what ZBV's I + W costs against 1F1B's B, per stage.

    python -m bench split_backward

One stage of the built-in GPT (half the blocks of each ``bench real_cpu`` row, hidden states in
and out) runs forward and backward on one CPU thread, alternately with a fused backward (B, as
1F1B and GPipe run it) and a split one (the input-gradient pass I, then the weight-gradient pass
W, as torch's ZBV and the planner's split plans run it), through torch's own stage backward
functions (``pipeline.torch_adapter.split_backward``). Printed: the medians and I + W over B. A
split backward pays off when the bubbles it fills are worth more than what it adds.
"""

from __future__ import annotations

import statistics

import torch
from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.gpt import GPTStage
from hyperframe_runtime.pipeline.torch_adapter import split_backward

from bench.real_cpu import ROWS

REPEATS = 60
WARMUP = 10


def measure(row_name: str) -> dict[str, float]:
    row = ROWS[row_name]
    config = TrainConfig(pipeline=2, **row.model)  # type: ignore[arg-type]
    # A middle stage of three: blocks only, hidden states in and out.
    stage = GPTStage(config, 1, 3, layers=range(config.n_layers // 2))
    x = torch.randn(row.micro_batch_size, config.seq_len, config.d_model)
    grad = torch.randn_like(x)
    times: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    for _ in range(REPEATS):
        for split in (False, True):
            stage.zero_grad(set_to_none=True)
            times[split].append(split_backward(stage, x.clone().requires_grad_(True), grad, split=split)[0])
    fused = statistics.median(t[1] for t in times[False][WARMUP:])
    i = statistics.median(t[1] for t in times[True][WARMUP:])
    w = statistics.median(t[2] for t in times[True][WARMUP:])
    return {"B": fused, "I": i, "W": w, "ratio": (i + w) / fused}


def main() -> None:
    torch.set_num_threads(1)
    print("stage of half the blocks, one CPU thread; medians of", REPEATS - WARMUP, "alternating runs")
    for name in ("cpu-tiny", "cpu-large"):
        r = measure(name)
        print(
            f"  {name}: B {1e3 * r['B']:.2f} ms, I {1e3 * r['I']:.2f} ms, W {1e3 * r['W']:.2f} ms; "
            f"I + W = {r['ratio']:.2f}x B"
        )


if __name__ == "__main__":
    main()
