"""What to show when a test against the local cluster fails: component logs and the test's objects."""

from __future__ import annotations

from .cluster import LocalCluster

__all__ = ["describe_namespace", "failure_report"]

# API groups whose namespaced kinds `kubectl describe all` does not already cover well, or that
# are uninteresting noise; custom resources (e.g. hyperframe.dev) are always included.
_BUILTIN_GROUP_SUFFIXES = ("k8s.io",)
_BUILTIN_GROUPS = {"apps", "batch", "policy", "autoscaling"}


def _custom_resources(cluster: LocalCluster) -> list[str]:
    result = cluster.kubectl.run(
        "api-resources", "--namespaced=true", "--verbs=list", "-o", "name", check=False
    )
    names = []
    for name in result.stdout.split():
        if "." not in name:
            continue
        group = name.split(".", 1)[1]
        if group in _BUILTIN_GROUPS or group.endswith(_BUILTIN_GROUP_SUFFIXES):
            continue
        names.append(name)
    return names


def describe_namespace(cluster: LocalCluster, namespace: str) -> str:
    """`kubectl get`/`describe` of everything in `namespace`, plus its events in time order."""
    kubectl = cluster.kubectl
    kinds = ",".join(["all", "configmaps", "serviceaccounts", *_custom_resources(cluster)])
    parts = []
    for args in (
        ("get", kinds, "-n", namespace, "-o", "wide"),
        ("get", "events", "-n", namespace, "--sort-by=.lastTimestamp"),
        ("describe", kinds, "-n", namespace),
    ):
        result = kubectl.run(*args, check=False)
        parts.append(f"--- kubectl {' '.join(args)}\n{result.stdout}{result.stderr}")
    return "\n".join(parts)


def failure_report(cluster: LocalCluster, namespace: str | None, log_lines: int = 30) -> str:
    """Component log tails, nodes, and (if given) the namespace's objects."""
    parts = [f"cluster state: {cluster.config.state_dir}"]
    for component, tail in cluster.log_tails(log_lines).items():
        parts.append(
            f"--- last {log_lines} lines of {cluster.config.log_file(component)}\n{tail or '<empty>'}"
        )
    nodes = cluster.kubectl.run("get", "nodes", "-o", "wide", check=False)
    parts.append(f"--- kubectl get nodes -o wide\n{nodes.stdout}{nodes.stderr}")
    if namespace:
        parts.append(describe_namespace(cluster, namespace))
    return "\n".join(parts)
