"""TensorBoard event files of a run: one value per tag per frame, written by global rank 0.

The files go to ``<trace_dir>/tensorboard`` (``tensorboard --logdir <trace_dir>`` finds them),
written with ``torch.utils.tensorboard.SummaryWriter`` and flushed after every frame, so a killed
run keeps every frame it finished. The step of every value is the frame number (frames completed,
counting that one). Tags:

- ``train/loss``, ``train/lr`` (the learning rate the frame's step used);
- ``train/grad_norm``: the global gradient norm before clipping, when the recipe clips
  (``grad_clip_norm`` > 0; the norm is only computed then);
- ``throughput/samples_per_s``, ``throughput/tokens_per_s``, ``time/frame_s``;
- ``pipeline/bubble_pct``, ``pipeline/dp_wait_pct``, ``pipeline/data_wait_pct``
  (``FrameMetrics.bubble_share``, ``comm_wait_share`` and ``data_wait_share`` in percent);
- ``memory/peak_bytes/rank_<r>``: each global rank's peak memory (``FrameMetrics.rank_peak_memory_bytes``);
- ``user/<name>``: the model factory's own metrics (``ModelSpec.frame_metrics``).

The writing happens after the frame's time is taken, so it never counts in ``frame_s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from torch.utils.tensorboard import SummaryWriter

from hyperframe_runtime.pipeline.metrics import FrameMetrics

__all__ = ["BOARD_SUBDIR", "BoardWriter", "frame_scalars"]

BOARD_SUBDIR: Final = "tensorboard"


def frame_scalars(
    metrics: FrameMetrics, *, lr: float, user: Mapping[str, float], grad_norm: float | None = None
) -> dict[str, float]:
    """The tag -> value pairs of one frame (pure; see the module docstring for the tags)."""
    scalars = {
        "train/loss": metrics.loss,
        "train/lr": lr,
        "throughput/samples_per_s": metrics.samples_per_s,
        "throughput/tokens_per_s": metrics.tokens_per_s,
        "time/frame_s": metrics.frame_s,
        "pipeline/bubble_pct": 100.0 * metrics.bubble_share,
        "pipeline/dp_wait_pct": 100.0 * metrics.comm_wait_share,
        "pipeline/data_wait_pct": 100.0 * metrics.data_wait_share,
    }
    if grad_norm is not None:
        scalars["train/grad_norm"] = grad_norm
    for rank, peak in enumerate(metrics.rank_peak_memory_bytes):
        scalars[f"memory/peak_bytes/rank_{rank}"] = float(peak)
    for name, value in user.items():
        scalars[f"user/{name}"] = value
    return scalars


class BoardWriter:
    """One run's TensorBoard event file in ``<directory>/tensorboard``."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory) / BOARD_SUBDIR
        self._writer = SummaryWriter(log_dir=str(self.directory))

    def add_frame(
        self, metrics: FrameMetrics, *, lr: float, user: Mapping[str, float], grad_norm: float | None = None
    ) -> None:
        """Write the frame's scalars at step ``metrics.frame`` and flush them to the file."""
        for tag, value in frame_scalars(metrics, lr=lr, user=user, grad_norm=grad_norm).items():
            self._writer.add_scalar(tag, value, global_step=metrics.frame)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
