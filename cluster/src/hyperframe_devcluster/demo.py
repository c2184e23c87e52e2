"""`make demo-cluster`: the whole product on the real node, as a platform team and an ML engineer use it.

1. the local cluster with its real node (`HYPERFRAME_CLUSTER_REAL_NODE=1`), started if needed;
2. `make images`: the local profile's base, framework and operator images, pushed to the
   cluster's registry, with their digests written to `.cluster/images/`;
3. `helm install` of charts/hyperframe-operator with those digests, the operator pod placed on
   the real node;
4. a CPU HyperFrameRuntime pinned to the local framework digest and the 2-node x 2-rank job of
   examples/cpu-2node.yaml (pipeline 2 x data 2), checkpointing to a host directory;
5. `kubectl get hfj` until the job ends.

The same functions serve the end-to-end test (tests/e2e/test_real_cluster.py).
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from . import node_config, paths
from .cluster import LocalCluster
from .config import ClusterConfig
from .kube import Kubectl

__all__ = [
    "IMAGE_USER_UID",
    "RELEASE",
    "RELEASE_NAMESPACE",
    "build_images",
    "checkpoint_dir",
    "demo_job",
    "helm",
    "images_dir",
    "install_operator",
    "real_node_placement",
    "real_node_runtime",
]

RELEASE: Final = "hyperframe-operator"
RELEASE_NAMESPACE: Final = "hyperframe-system"
# The matrix's non-root user (images/matrix.yaml image_user): it must be able to write checkpoints.
IMAGE_USER_UID: Final = 10001
CHECKPOINT_ROOT: Final = Path("/var/tmp/hyperframe-checkpoints")
_CHART: Final = "charts/hyperframe-operator"


def images_dir() -> Path:
    """Where `make images` writes digests.json, values-local.yaml and runtimes-local.yaml."""
    explicit = os.environ.get("HYPERFRAME_IMAGES_DIR")
    return Path(explicit) if explicit else paths.repo_root() / ".cluster" / "images"


def build_images(registry: str, out: Path, *, log: Callable[[str], None] = print) -> None:
    """`images/build.sh` (what `make images` runs) pushing to `registry`, files into `out`."""
    env = {
        **os.environ,
        "HYPERFRAME_REGISTRY": registry,
        "HYPERFRAME_IMAGES_DIR": str(out),
        "PYTHON": sys.executable,
    }
    log(f">> make images: building the local profile and pushing to {registry}")
    subprocess.run(["bash", "images/build.sh"], cwd=paths.repo_root(), env=env, check=True)


def real_node_placement(node: str | None = node_config.NODE_NAME) -> dict[str, Any]:
    """The nodeSelector and toleration that put a pod on a real node (they are tainted).

    `node`: which one (hf-real-0 by default, so the demo's pods stay together where the cluster
    has more than one real node); None: any real node.
    """
    selector = {node_config.REAL_NODE_LABEL: "true"}
    if node is not None:
        selector["kubernetes.io/hostname"] = node
    return {
        "nodeSelector": selector,
        "tolerations": [{"key": node_config.REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
    }


def helm(
    kubeconfig: Path, home: Path, *args: str, timeout_s: float = 600
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    return subprocess.run(
        [str(paths.helm()), *args],
        cwd=paths.repo_root(),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def install_operator(
    kubeconfig: Path, home: Path, images: Path, *, extra_values: Mapping[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    """`helm upgrade --install --wait` with the local images' values, on the real node."""
    values = home / "real-node-values.yaml"
    values.parent.mkdir(parents=True, exist_ok=True)
    values.write_text(yaml.safe_dump({**real_node_placement(), **dict(extra_values or {})}))
    return helm(
        kubeconfig, home,
        "upgrade", "--install", RELEASE, _CHART,
        "--namespace", RELEASE_NAMESPACE, "--create-namespace",
        "-f", str(images / "values-local.yaml"), "-f", str(values),
        "--wait", "--timeout", "8m",
    )  # fmt: skip


def real_node_runtime(images: Path, name: str = "example-cpu") -> dict[str, Any]:
    """The CPU runtime of runtimes-local.yaml (pinned to the local digests), placed on the real node.

    Requests are cut to fit two pods and the operator on the 2-core node; the gate's collective
    runs with gloo over the pod network.
    """
    docs = [d for d in yaml.safe_load_all((images / "runtimes-local.yaml").read_text()) if d]
    try:
        runtime = copy.deepcopy(next(d for d in docs if d["metadata"]["name"] == name))
    except StopIteration:
        raise LookupError(
            f"{images / 'runtimes-local.yaml'} has no runtime {name!r}; run `make images`"
        ) from None
    pod = runtime["spec"].setdefault("pod", {})
    pod.update(real_node_placement())
    pod["resources"] = {"cpu": "500m", "memory": "3Gi"}
    runtime["metadata"].pop("namespace", None)
    return dict(runtime)


def checkpoint_dir(namespace: str, job: str) -> Path:
    """An empty host directory both pods of a job on the real node share, writable by the image user.

    Emptied first: a job of the same name from an earlier run must not resume from its snapshots.
    """
    path = CHECKPOINT_ROOT / namespace / job
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    os.chown(path, IMAGE_USER_UID, IMAGE_USER_UID)
    return path


def demo_job(
    name: str, runtime: str, checkpoints: Path, *, frames: int = 20, every_frames: int = 5
) -> dict[str, Any]:
    """examples/cpu-2node.yaml's job (2 nodes x 2 ranks, pipeline 2 x data 2) with checkpoints."""
    job: dict[str, Any] = next(
        d
        for d in yaml.safe_load_all((paths.repo_root() / "examples" / "cpu-2node.yaml").read_text())
        if d and d.get("kind") == "HyperFrameJob"
    )
    job["metadata"] = {"name": name}
    spec = job["spec"]
    spec["runtimeRef"] = {"name": runtime}
    spec["frames"]["frames"] = frames
    spec["volumes"] = [{"name": "checkpoints", "hostPath": {"path": str(checkpoints), "type": "Directory"}}]
    spec["frames"]["checkpoint"] = {"volume": "checkpoints", "everyFrames": every_frames}
    return job


def _watch(kubectl: Kubectl, namespace: str, name: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    last = ""
    columns = "custom-columns=NAME:.metadata.name,PHASE:.status.phase,FRAME:.status.progress.frame,"
    columns += "FRAMES:.spec.frames.frames,LOSS:.status.progress.loss,RESTARTS:.status.restarts"
    started = time.monotonic()
    while time.monotonic() < deadline:
        line = kubectl.run("get", "hfj", name, "-n", namespace, "-o", columns, check=False).stdout.strip()
        if line and line != last:
            print(f"[{time.monotonic() - started:5.0f}s]", line.splitlines()[-1], flush=True)
            last = line
        phase = kubectl.run(
            "get", "hfj", name, "-n", namespace, "-o", "jsonpath={.status.phase}", check=False
        ).stdout.strip()
        if phase in {"Succeeded", "Failed"}:
            return phase
        time.sleep(2)
    return "Timeout"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperframe_devcluster.demo", description=__doc__)
    parser.add_argument("--namespace", default="ml")
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--skip-images", action="store_true", help="reuse the images already pushed")
    args = parser.parse_args(argv)

    state_dir = paths.cluster_dir()
    cluster = LocalCluster(ClusterConfig.from_env(state_dir, real_node=True))
    started = time.monotonic()
    report = cluster.up()
    print(f">> cluster {'already up' if report.reused else f'up in {report.total_s:.1f}s'} ({state_dir})")
    registry = cluster.registry()
    if registry is None:
        print(
            "the cluster in",
            state_dir,
            "runs without the real node; `make cluster-down` first",
            file=sys.stderr,
        )
        return 1
    images = images_dir()
    if not args.skip_images:
        build_images(registry, images)
    home = state_dir / "helm"
    print(">> helm install", RELEASE, "(operator on the real node, local digests)")
    installed = install_operator(cluster.kubeconfig, home, images)
    if installed.returncode != 0:
        print(installed.stdout, installed.stderr, file=sys.stderr)
        return 1
    kubectl = cluster.kubectl
    kubectl.run("create", "namespace", args.namespace, check=False)
    runtime = real_node_runtime(images)
    name = "cpu-2node"
    kubectl.run("delete", "hfj", name, "-n", args.namespace, "--ignore-not-found", "--wait=true", check=False)
    job = demo_job(
        name, runtime["metadata"]["name"], checkpoint_dir(args.namespace, name), frames=args.frames
    )
    kubectl.apply([runtime])
    kubectl.apply([job], namespace=args.namespace)
    print(f">> kubectl -n {args.namespace} get hfj {name} (every change)")
    phase = _watch(kubectl, args.namespace, name, timeout_s=1200)
    print(f">> {name}: {phase} after {time.monotonic() - started:.0f}s in total")
    print(
        f'   eval "$({sys.executable} -m hyperframe_devcluster env)" && kubectl -n {args.namespace} describe hfj {name}'
    )
    return 0 if phase == "Succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
