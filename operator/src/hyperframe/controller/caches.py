"""Informer-style caches fed by kopf's watch events: jobs, the pods of each job, node readiness.

kopf lists each kind, watches from the list's resourceVersion and lists again when a watch ends
(410 Gone included), but it never reports an object that vanished while no watch was running. The
pod cache therefore also takes full listings (:meth:`Caches.resync_pods`, at start-up and then
periodically): a cached pod the listing no longer holds is dropped as if its deletion had been
seen, so no vanished pod is believed to exist for longer than one resync period. A deletion that
finds its pod gone (:meth:`Caches.forget_pod`) drops it at once.

Deletions leave tombstones (the resourceVersion they were seen at), so an older copy of a deleted
pod (a listing that raced the watch) cannot bring it back. They also keep, per job, the last copy of
each pod that went (:meth:`Caches.departed_of`): the watch's deletion event carries the final
object, with the ``DisruptionTarget`` condition an eviction set, so a pod that went between two
reconciles is still judged by why it went. No decision is kept here. A stale cache
is safe: status writes carry a resourceVersion, creates are create-if-absent, and pod deletions
carry the pod's uid and touch only older gang generations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from hyperframe.constants import LABEL_JOB

from .observed import NodeState, ObservedPod, observe_node, observe_pod

__all__ = ["Caches", "JobKey"]

JobKey = tuple[str, str]
"""(namespace, name) of a HyperFrameJob."""
PodKey = tuple[str, str]
"""(namespace, name) of a pod."""


def _rv(body: Mapping[str, Any]) -> int | None:
    text = str((body.get("metadata") or {}).get("resourceVersion", ""))
    return int(text) if text.isdigit() else None


class Caches:
    def __init__(self) -> None:
        self.jobs: dict[JobKey, dict[str, Any]] = {}
        self._pods: dict[JobKey, dict[str, ObservedPod]] = {}
        self._pod_uids: dict[PodKey, str] = {}
        self._pod_rvs: dict[PodKey, int] = {}
        self._pod_jobs: dict[PodKey, JobKey] = {}
        self._tombstones: dict[PodKey, int] = {}
        """resourceVersion each deleted pod was last seen at; older copies of it are ignored."""
        self._last_list_rv: dict[str, int] = {}
        """Per listing scope (a namespace, or "" for all), the resourceVersion of the previous one."""
        self._departed: dict[JobKey, dict[str, ObservedPod]] = {}
        """Per job, the last copy of each pod of its newest gang generation that went."""
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
        self._departed.pop(key, None)

    # -- pods -------------------------------------------------------------------------------

    def pod_event(self, event_type: str | None, body: Mapping[str, Any]) -> JobKey | None:
        """Update the cache from a pod event (``None``: a listed copy); returns the job to reconcile."""
        meta = body.get("metadata") or {}
        pod_key: PodKey = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        job_name = (meta.get("labels") or {}).get(LABEL_JOB)
        if not job_name:
            return None
        rv = _rv(body)
        if rv is not None and (
            rv < self._pod_rvs.get(pod_key, -1) or rv <= self._tombstones.get(pod_key, -1)
        ):
            return None  # an older copy (a listing) racing the watch
        if event_type == "DELETED":
            dropped = self._drop_pod(pod_key, tombstone=rv, last=observe_pod(body))
            return dropped or (pod_key[0], str(job_name))
        pod = observe_pod(body)
        self._drop_pod(pod_key, tombstone=None)
        if pod is None:
            return None
        key = (pod_key[0], str(job_name))
        self._tombstones.pop(pod_key, None)
        self._departed.get(key, {}).pop(pod.name, None)
        self._pods.setdefault(key, {})[pod.name] = pod
        self._pod_uids[pod_key] = str(meta.get("uid", ""))
        self._pod_jobs[pod_key] = key
        if rv is not None:
            self._pod_rvs[pod_key] = rv
        self._phases[pod.phase] += 1
        return key

    def _drop_pod(
        self, pod_key: PodKey, *, tombstone: int | None, last: ObservedPod | None = None
    ) -> JobKey | None:
        """Remove a pod; with ``tombstone``, remember its deletion at that resourceVersion, and its
        last copy (``last``, else the cached one) as departed."""
        rv = self._pod_rvs.pop(pod_key, None)
        mark = max((v for v in (tombstone, rv) if v is not None), default=None)
        if tombstone is not None and mark is not None:
            self._tombstones[pod_key] = mark
        self._pod_uids.pop(pod_key, None)
        key = self._pod_jobs.pop(pod_key, None)
        if key is None:
            if tombstone is not None and last is not None:
                self._depart((pod_key[0], last.job), last)  # its deletion, never its creation, was seen
            return None
        pods = self._pods.get(key, {})
        old = pods.pop(pod_key[1], None)
        if old is not None:
            self._phases[old.phase] -= 1
        if not pods:
            self._pods.pop(key, None)
        if tombstone is not None:
            self._depart(key, last or old)
        return key

    def _depart(self, key: JobKey, pod: ObservedPod | None) -> None:
        """Keep the last copy of a pod that went; only the job's newest gang generation is kept."""
        if pod is None:
            return
        departed = self._departed.setdefault(key, {})
        newest = max((p.generation for p in departed.values()), default=pod.generation)
        if pod.generation < newest:
            return
        if pod.generation > newest:
            departed.clear()
        departed[pod.name] = pod

    def forget_pod(self, namespace: str, name: str, uid: str) -> JobKey | None:
        """The pod ``uid`` is gone (a deletion found it missing): drop it; returns its job."""
        pod_key = (namespace, name)
        if self._pod_uids.get(pod_key) != uid:
            return None  # already replaced by a newer pod of that name, or already dropped
        return self._drop_pod(pod_key, tombstone=self._pod_rvs.get(pod_key, 0))

    def resync_pods(
        self, items: Iterable[Mapping[str, Any]], list_rv: str, *, namespace: str = ""
    ) -> set[JobKey]:
        """Reconcile the cache with a full listing taken at ``list_rv`` (of ``namespace``, or "": all).

        Listed copies update the cache (older ones are ignored). A cached pod of that scope the listing
        lacks is dropped as deleted unless the cache saw it change after the listing was taken.
        Returns the jobs whose pods changed.
        """
        version = int(list_rv) if list_rv.isdigit() else None
        changed: set[JobKey] = set()
        listed: set[PodKey] = set()
        for body in items:
            meta = body.get("metadata") or {}
            pod_key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            listed.add(pod_key)
            if _rv(body) is not None and _rv(body) == self._pod_rvs.get(pod_key):
                continue  # unchanged
            key = self.pod_event(None, body)
            if key is not None:
                changed.add(key)
        for pod_key in [k for k in self._pod_jobs if not namespace or k[0] == namespace]:
            if pod_key in listed:
                continue
            seen = self._pod_rvs.get(pod_key)
            if version is not None and seen is not None and seen > version:
                continue  # created (or changed) after the listing was taken
            key = self._drop_pod(pod_key, tombstone=version if version is not None else seen)
            if key is not None:
                changed.add(key)
        if version is not None:
            # Tombstones older than the previous listing cannot be raced by anything still in flight.
            previous = self._last_list_rv.get(namespace)
            if previous is not None:
                for pod_key in [k for k, v in self._tombstones.items() if v <= previous]:
                    if not namespace or pod_key[0] == namespace:
                        del self._tombstones[pod_key]
            self._last_list_rv[namespace] = version
        return changed

    def pods_of(self, key: JobKey) -> list[ObservedPod]:
        return list(self._pods.get(key, {}).values())

    def departed_of(self, key: JobKey) -> list[ObservedPod]:
        """The last copy of each pod of the job's newest gang generation that went (seen deleted by
        the watch, found gone by a deletion, or missing from a listing) and has not come back."""
        return list(self._departed.get(key, {}).values())

    def forget_departed(self, key: JobKey, names: Iterable[str]) -> None:
        """The pods ``names`` are about to be created again: their earlier copies no longer count."""
        departed = self._departed.get(key, {})
        for name in names:
            departed.pop(name, None)

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
