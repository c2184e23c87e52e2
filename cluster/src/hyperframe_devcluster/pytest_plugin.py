"""pytest fixtures for tests against the local cluster (registered in tests/conftest.py).

- `local_cluster` (session): starts a private cluster once per test session in
  `<repo>/.cluster/pytest-<pid>/` (or $HYPERFRAME_CLUSTER_DIR) and stops it at the end; with
  HYPERFRAME_USE_RUNNING_CLUSTER=1 it uses the cluster `make cluster-up` started instead and
  leaves it running. Clusters of crashed sessions are stopped and removed first.
- `kubeconfig` (session): path of the admin kubeconfig, for the operator and clients.
- `kubectl` (session): a `Kubectl` bound to that kubeconfig.
- `namespace` (function): a fresh namespace per test, ready for pods (its default service
  account exists), deleted afterwards.
- `real_node` (session): the cluster's first real node `hf-real-0` (HYPERFRAME_CLUSTER_REAL_NODE=1).
- `real_nodes` (session): every real node, `hf-real-0` and `hf-real-1` with
  HYPERFRAME_CLUSTER_REAL_NODES=2 (which `make test` sets); skips with fewer than two. Where it cannot run here (no root, packages that cannot be
  installed) the cluster starts without it and tests using it skip with that reason; with
  CI=true they fail instead, so CI never skips them silently.

When a test using the cluster fails, its report gets a "local cluster" section: component log
tails, the nodes, and `kubectl get`/`describe` of the test namespace's objects and events.
Missing binaries fail the tests (never skip them) with the command that fixes it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Final

import pytest

from . import paths
from .cluster import LocalCluster
from .config import ENV_REAL_NODE, ENV_REAL_NODES, ClusterConfig
from .diagnostics import failure_report
from .kube import Kubectl, poll
from .node import RealNode
from .prereqs import PrerequisiteError
from .prereqs import ensure as ensure_prerequisites
from .process import ComponentNotReadyError

__all__ = [
    "ENV_USE_RUNNING_CLUSTER",
    "kubeconfig",
    "kubectl",
    "local_cluster",
    "namespace",
    "real_node",
    "real_nodes",
]

ENV_USE_RUNNING_CLUSTER: Final = "HYPERFRAME_USE_RUNNING_CLUSTER"
_SESSION_PREFIX: Final = "pytest-"
_OWNER_FILE: Final = "owner.pid"
# Why the session's cluster runs without the real node although it was asked for (or None).
_real_node_unavailable: str | None = None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_stale_sessions(root: Path) -> None:
    """Stop and remove the clusters of earlier pytest sessions whose process is gone."""
    if not root.is_dir():
        return
    for state_dir in root.glob(f"{_SESSION_PREFIX}*"):
        try:
            owner = int((state_dir / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            owner = -1
        if owner > 0 and _pid_alive(owner):
            continue
        LocalCluster(ClusterConfig(state_dir=state_dir)).down()
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    if os.environ.get(ENV_USE_RUNNING_CLUSTER) == "1":
        cluster = LocalCluster(ClusterConfig.from_state(paths.cluster_dir()))
        if not cluster.is_up():
            pytest.fail(
                f"{ENV_USE_RUNNING_CLUSTER}=1 but no cluster is up in {paths.cluster_dir()}; "
                "run `make cluster-up` first (or unset the variable to start one per session)",
                pytrace=False,
            )
        yield cluster
        return

    missing = paths.missing_binaries()
    if missing:
        pytest.fail(
            f"the local control plane is not built ({', '.join(missing)} missing in {paths.bin_dir()}); "
            "run `make cluster-build`",
            pytrace=False,
        )
    explicit = os.environ.get(paths.ENV_CLUSTER_DIR)
    session_root = paths.repo_root() / ".cluster"
    _sweep_stale_sessions(session_root)
    state_dir = Path(explicit).resolve() if explicit else session_root / f"{_SESSION_PREFIX}{os.getpid()}"
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / _OWNER_FILE).write_text(f"{os.getpid()}\n")
    config = ClusterConfig.from_env(state_dir, die_with_parent=True)
    if config.real_node:
        try:
            ensure_prerequisites()
        except PrerequisiteError as error:
            global _real_node_unavailable
            _real_node_unavailable = str(error)
            config = dataclasses.replace(config, real_node=False)
    cluster = LocalCluster(config)
    try:
        cluster.up(reuse=False)
    except ComponentNotReadyError as error:
        pytest.fail(f"local cluster did not start: {error}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.down()
        if not explicit:
            shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def real_node(local_cluster: LocalCluster) -> RealNode:
    if not local_cluster.config.real_node:
        reason = _real_node_unavailable or (
            f"the session's cluster has no real node: set {ENV_REAL_NODE}=1 (`make test` does)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the real node cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    return local_cluster.node


@pytest.fixture(scope="session")
def real_nodes(local_cluster: LocalCluster, real_node: RealNode) -> list[RealNode]:
    """hf-real-0 and hf-real-1 (and any further ones); skips with fewer than two."""
    nodes = local_cluster.nodes
    if len(nodes) < 2:
        pytest.skip(f"the session's cluster has one real node: set {ENV_REAL_NODES}=2 (`make test` does)")
    return nodes


@pytest.fixture(scope="session")
def kubeconfig(local_cluster: LocalCluster) -> Path:
    return local_cluster.config.kubeconfig


@pytest.fixture(scope="session")
def kubectl(local_cluster: LocalCluster) -> Kubectl:
    return local_cluster.kubectl


def _namespace_name(test_name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:45].strip("-")
    return f"t-{base}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kubectl: Kubectl) -> Iterator[str]:
    name = _namespace_name(request.node.name)
    kubectl.run("create", "namespace", name)
    # The serviceaccount admission plugin rejects pods until the controller made `default`.
    poll(
        lambda: kubectl.run("get", "serviceaccount", "default", "-n", name, check=False).returncode,
        lambda rc: rc == 0,
        timeout_s=120,
        what=f"serviceaccount {name}/default",
    )
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, object, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    funcargs = getattr(item, "funcargs", {})
    cluster = funcargs.get("local_cluster")
    if report.when != "call" or not report.failed or not isinstance(cluster, LocalCluster):
        return
    ns = funcargs.get("namespace")
    try:
        text = failure_report(cluster, ns if isinstance(ns, str) else None)
    except Exception as error:  # diagnostics must never hide the real failure
        text = f"could not collect cluster diagnostics: {error!r}"
    report.sections.append(("local cluster", text))
