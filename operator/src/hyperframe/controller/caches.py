"""Informer-style caches fed by kopf's watch events: jobs, the pods of each job, node readiness.

They hold only what the watches show (rebuilt from the initial listing after a restart); no
decision is kept here. A stale cache is safe: status writes carry a resourceVersion, creates are
create-if-absent and deletes tolerate 404.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from hyperframe.constants import LABEL_JOB

from .observed import NodeState, ObservedPod, observe_node, observe_pod

__all__ = ["Caches", "JobKey"]

JobKey = tuple[str, str]
"""(namespace, name) of a HyperFrameJob."""


def _rv(body: Mapping[str, Any]) -> int | None:
    text = str((body.get("metadata") or {}).get("resourceVersion", ""))
    return int(text) if text.isdigit() else None


class Caches:
    def __init__(self) -> None:
        self.jobs: dict[JobKey, dict[str, Any]] = {}
        self._pods: dict[JobKey, dict[str, ObservedPod]] = {}
        self._pod_uids: dict[tuple[str, str], str] = {}
        self._pod_rvs: dict[tuple[str, str], int] = {}
        self._phases: Counter[str] = Counter()
        self.nodes: dict[str, NodeState] = {}

    # -- jobs -------------------------------------------------------------------------------

    def put_job(self, body: Mapping[str, Any]) -> JobKey:
        """Keep the newer of the cached and the given object (a status write's reply may beat the watch)."""
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        old = self.jobs.get(key)
        old_rv, new_rv = (_rv(old) if old else None), _rv(body)
        if old is None or old_rv is None or new_rv is None or new_rv >= old_rv:
            self.jobs[key] = dict(body)
        return key

    def drop_job(self, key: JobKey) -> None:
        self.jobs.pop(key, None)

    # -- pods -------------------------------------------------------------------------------

    def pod_event(self, event_type: str | None, body: Mapping[str, Any]) -> JobKey | None:
        """Update the cache from a pod event; returns the job to reconcile."""
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        job_name = (meta.get("labels") or {}).get(LABEL_JOB)
        if not job_name:
            return None
        key = (namespace, str(job_name))
        rv = _rv(body)
        seen = self._pod_rvs.get((namespace, name))
        if rv is not None and seen is not None and rv < seen:
            return None  # an older copy (the startup list) racing the watch
        pods = self._pods.setdefault(key, {})
        old = pods.pop(name, None)
        if old is not None:
            self._phases[old.phase] -= 1
        if event_type == "DELETED":
            self._pod_uids.pop((namespace, name), None)
            self._pod_rvs.pop((namespace, name), None)
            if not pods:
                del self._pods[key]
            return key
        pod = observe_pod(body)
        if pod is None:
            return None
        pods[name] = pod
        self._pod_uids[(namespace, name)] = str(meta.get("uid", ""))
        if rv is not None:
            self._pod_rvs[(namespace, name)] = rv
        self._phases[pod.phase] += 1
        return key

    def pods_of(self, key: JobKey) -> list[ObservedPod]:
        return list(self._pods.get(key, {}).values())

    def pod(self, namespace: str, name: str, job: str) -> tuple[ObservedPod, str] | None:
        """A cached pod of ``job`` with its uid, or None."""
        pod = self._pods.get((namespace, job), {}).get(name)
        return (pod, self._pod_uids.get((namespace, name), "")) if pod else None

    def pod_count(self, phase: str) -> int:
        return self._phases[phase]

    # -- nodes ------------------------------------------------------------------------------

    def node_event(self, event_type: str | None, body: Mapping[str, Any]) -> set[JobKey]:
        """Update node readiness; returns the jobs with pods on a node whose readiness changed."""
        state = observe_node(body)
        old = self.nodes.get(state.name)
        if event_type == "DELETED":
            self.nodes.pop(state.name, None)
            state = NodeState(name=state.name, ready=False, since=state.since)
        else:
            self.nodes[state.name] = state
        if old is not None and old.ready == state.ready:
            return set()
        return {key for key, pods in self._pods.items() if any(p.node == state.name for p in pods.values())}
