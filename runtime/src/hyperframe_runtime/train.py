"""``hyperframe-train``: the per-rank training entry point that torchrun starts.

    torchrun --nproc-per-node 2 -m hyperframe_runtime.train --config train.json
    hyperframe-train --config train.json          # the same, as torchrun's program

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. The config file is a
:class:`~hyperframe_runtime.config.TrainConfig` JSON object. Exit status
(``hyperframe.constants.TrainExit``): 0 when every frame ran; 2 for a configuration error (the
message names the field): a bad config, a user model that does not import, has no such factory or
a factory of the wrong signature (``models.load_model_spec``, run before the process group
starts), data that is not there, token ids not below the model's vocabulary
(``ModelSpec.vocab_size``), or a snapshot of another model or layout; 75 (``PREEMPTED``) when
SIGTERM stopped the run at a frame boundary, after that frame's snapshot; 1 for anything else.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Final

import torch
import torch.distributed as dist
from hyperframe.constants import TrainExit

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.data.errors import DataError
from hyperframe_runtime.data.loader import check_data_source, check_model_vocab
from hyperframe_runtime.models.spec import ModelSpec, load_model_spec
from hyperframe_runtime.pipeline.checkpoint import SnapshotMismatchError
from hyperframe_runtime.pipeline.frame_loop import train
from hyperframe_runtime.pipeline.preemption import StopFlag
from hyperframe_runtime.process_group import leave_process_group

__all__ = ["main"]

log = logging.getLogger("hyperframe.train")

EXIT_CONFIG: Final = TrainExit.CONFIG
EXIT_PREEMPTED: Final = TrainExit.PREEMPTED
_PG_TIMEOUT = timedelta(minutes=10)


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        raise ValueError(
            f"{name} is not set; start hyperframe-train with torchrun (it sets RANK, WORLD_SIZE, LOCAL_RANK)"
        )
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


def _device(config: TrainConfig, local_rank: int) -> torch.device:
    if config.device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(
            "device: 'cuda' but no CUDA device is visible; use device 'cpu' or run on a GPU node"
        )
    if local_rank >= torch.cuda.device_count():
        raise ValueError(
            f"LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} CUDA devices are visible; "
            "start one rank per GPU"
        )
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hyperframe-train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="training-config JSON file (TrainConfig)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = StopFlag()
    with stop.installed():
        return _run(args.config, stop)


def _run(config_path: str, stop: StopFlag) -> int:
    try:
        config = TrainConfig.load(config_path)
        rank, world_size, local_rank = _env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK")
        config.check_world_size(world_size)
        check_data_source(config)
        device = _device(config, local_rank)
        spec: ModelSpec = load_model_spec(config)
        check_model_vocab(config, spec)
    except (OSError, ValueError) as exc:
        print(f"hyperframe-train: {exc}", file=sys.stderr)
        return int(EXIT_CONFIG)
    dist.init_process_group(
        config.resolved_backend(),
        rank=rank,
        world_size=world_size,
        timeout=_PG_TIMEOUT,
        device_id=device if device.type == "cuda" else None,
    )
    together = False
    try:
        result = train(config, spec=spec, device=device, stop=stop)
        together = True  # every rank ran every frame, or stopped at the same agreed boundary
        if rank == 0 and result.metrics:
            last = result.metrics[-1]
            verb = "preempted after" if result.preempted else "done:"
            log.info("%s %d frames, final loss %.4f", verb, last.frame, last.loss)
    except (SnapshotMismatchError, DataError) as exc:  # DataError: found once the data is read
        print(f"hyperframe-train: {exc}", file=sys.stderr)
        return int(EXIT_CONFIG)
    finally:
        leave_process_group(together=together)
    return int(EXIT_PREEMPTED if result.preempted else TrainExit.OK)


if __name__ == "__main__":
    sys.exit(main())
