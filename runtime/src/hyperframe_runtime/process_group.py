"""Leaving the process group at the end of a run: every rank together, or alone after a failure.

A gloo rank that destroys its process group while a peer still uses their connections (the
peer's last receive of an all-gather, an asynchronous pipeline send) takes the peer down with it:
the peer's gloo thread meets a closed socket and the process aborts ("terminate called without an
active exception") after its work was done. So a run that ended alike on every rank passes one
last barrier first. A rank that failed alone does not: its peers may be inside any collective,
and a barrier would be paired with it.
"""

from __future__ import annotations

import logging

import torch.distributed as dist

__all__ = ["leave_process_group"]

log = logging.getLogger("hyperframe.process_group")


def leave_process_group(*, together: bool) -> None:
    """Destroy the default process group and every group made from it.

    ``together``: every rank ended the same way (all frames done, or stopped at the same agreed
    frame boundary): a barrier first, the last collective of the run. Otherwise (this rank
    failed) none. A barrier that fails (a peer is gone already) only logs.
    """
    if not dist.is_initialized():
        return
    if together:
        try:
            dist.barrier()
        except RuntimeError as exc:  # DistBackendError is one: a peer left or broke first
            log.warning("leaving the process group without the last barrier: %s", exc)
    dist.destroy_process_group()
