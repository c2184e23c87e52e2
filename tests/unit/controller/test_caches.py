"""The pod cache cannot drift: full listings drop pods the watches missed, deletions leave
tombstones against older copies, and a deletion that finds its pod gone drops it."""

from __future__ import annotations

from hyperframe.constants import LABEL_GENERATION, LABEL_JOB, LABEL_RANK
from hyperframe.controller.caches import Caches

KEY = ("ns", "j")


def pod(name: str, *, rv: int, uid: str = "", namespace: str = "ns") -> dict[str, object]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{name}",
            "resourceVersion": str(rv),
            "labels": {LABEL_JOB: "j", LABEL_RANK: "0", LABEL_GENERATION: "0"},
        },
        "status": {"phase": "Running"},
    }


def names(caches: Caches) -> list[str]:
    return sorted(p.name for p in caches.pods_of(KEY))


def test_a_pod_deleted_while_no_watch_ran_leaves_the_cache_at_the_next_listing() -> None:
    caches = Caches()
    caches.pod_event("ADDED", pod("a", rv=10))
    caches.pod_event("ADDED", pod("b", rv=11))
    # "a" was deleted while the watch was down: no DELETED event ever comes; the listing lacks it.
    assert caches.resync_pods([pod("b", rv=11)], "20") == {KEY}
    assert names(caches) == ["b"] and caches.pod_count("Running") == 1
    assert caches.pod("ns", "a", "j") is None
    assert caches.resync_pods([pod("b", rv=11)], "21") == set()  # nothing changed: no job to requeue


def test_a_pod_the_cache_saw_after_the_listing_was_taken_is_kept() -> None:
    caches = Caches()
    caches.pod_event("ADDED", pod("late", rv=30))
    assert caches.resync_pods([], "20") == set()
    assert names(caches) == ["late"]


def test_a_listing_only_drops_pods_of_its_own_namespace() -> None:
    caches = Caches()
    caches.pod_event("ADDED", pod("a", rv=10))
    caches.pod_event("ADDED", pod("x", rv=11, namespace="other"))
    caches.resync_pods([], "20", namespace="other")
    assert names(caches) == ["a"] and caches.pods_of(("other", "j")) == []


def test_an_older_listed_copy_cannot_bring_back_a_deleted_pod() -> None:
    """The start-up listing races the watch: the watch reports the deletion first, then the listing
    (taken before the deletion) hands in the pod's older copy."""
    caches = Caches()
    caches.pod_event("ADDED", pod("a", rv=10))
    caches.pod_event("DELETED", pod("a", rv=15))
    caches.pod_event(None, pod("a", rv=10))
    assert names(caches) == []
    caches.resync_pods([pod("a", rv=10)], "12")
    assert names(caches) == []


def test_a_newer_pod_of_the_same_name_is_taken_and_tombstones_are_pruned() -> None:
    caches = Caches()
    caches.pod_event("ADDED", pod("a", rv=10))
    caches.pod_event("DELETED", pod("a", rv=15))
    caches.pod_event("ADDED", pod("a", rv=16, uid="second"))
    found = caches.pod("ns", "a", "j")
    assert found is not None and found[1] == "second"
    caches.pod_event("DELETED", pod("a", rv=17, uid="second"))
    caches.resync_pods([], "20")
    caches.resync_pods([], "30")  # the tombstone at 17 is older than the previous listing: gone
    caches.pod_event(None, pod("a", rv=12))  # only a copy older than any listing could still race
    assert names(caches) == ["a"]


def test_a_deletion_that_finds_its_pod_gone_drops_it_but_never_a_newer_pod_of_that_name() -> None:
    caches = Caches()
    caches.pod_event("ADDED", pod("a", rv=10, uid="first"))
    assert caches.forget_pod("ns", "a", "other-uid") is None
    assert names(caches) == ["a"]
    assert caches.forget_pod("ns", "a", "first") == KEY
    assert names(caches) == [] and caches.pod_count("Running") == 0
    caches.pod_event(None, pod("a", rv=10, uid="first"))  # the listing's older copy stays out
    assert names(caches) == []
