"""Success policy: the job succeeds when the rank-0 pod of the current gang completes.

Workers may finish earlier or later; rank 0 (the master) decides, as in PyTorchJob and JobSet's
"leader" success policy. The remaining pods are then cleaned up per cleanPodPolicy.
"""

from __future__ import annotations

from collections.abc import Sequence

from .observed import ObservedPod

__all__ = ["succeeded_rank0"]


def succeeded_rank0(pods: Sequence[ObservedPod]) -> ObservedPod | None:
    """The rank-0 pod if it completed successfully, else None."""
    for pod in pods:
        if pod.rank != 0:
            continue
        if pod.main_end is not None and pod.main_end.exit_code == 0:
            return pod
        if pod.phase == "Succeeded":
            return pod
    return None
