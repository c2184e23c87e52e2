"""A real local Kubernetes control plane for tests, CI and the demo.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the KWOK controller, built
from the Go module proxy by `cluster/build.sh` at the versions pinned in `cluster/versions.env`,
run as local processes. KWOK simulates GPU nodes and drives pod lifecycles through the project's
own Stages; `sim` names the annotations that steer them and `faults` injects node faults.

    from hyperframe_devcluster import LocalCluster, ClusterConfig, paths, sim, faults
"""

from . import faults, paths, sim
from .cluster import LocalCluster, UpReport
from .config import ClusterConfig
from .kube import Kubectl, KubectlError, poll
from .process import ComponentNotReadyError

__all__ = [
    "ClusterConfig",
    "ComponentNotReadyError",
    "Kubectl",
    "KubectlError",
    "LocalCluster",
    "UpReport",
    "faults",
    "paths",
    "poll",
    "sim",
]
