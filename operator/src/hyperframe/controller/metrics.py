"""Prometheus metrics of the operator, in a registry of its own (never the global default)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = ["POD_PHASES", "Metrics"]

POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.jobs_created = Counter(
            "hyperframe_jobs_created", "HyperFrameJobs accepted by the operator.", registry=r
        )
        self.jobs_succeeded = Counter(
            "hyperframe_jobs_succeeded", "HyperFrameJobs that succeeded.", registry=r
        )
        self.jobs_failed = Counter(
            "hyperframe_jobs_failed", "HyperFrameJobs that failed, by reason.", ["reason"], registry=r
        )
        self.jobs_restarted = Counter(
            "hyperframe_jobs_restarted",
            "Gang restarts, by the reason of the failure.",
            ["reason"],
            registry=r,
        )
        self.gangs_refused = Counter(
            "hyperframe_gangs_refused",
            "Gang creations the API server refused and the operator rolled back, by reason.",
            ["reason"],
            registry=r,
        )
        self.gate_failures = Counter(
            "hyperframe_smoke_gate_failures", "Smoke-gate failures, by failed check.", ["check"], registry=r
        )
        self.reconcile_duration = Histogram(
            "hyperframe_reconcile_duration_seconds",
            "Time of one reconcile, API calls included.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.reconcile_errors = Counter(
            "hyperframe_reconcile_errors", "Reconciles that raised and were retried.", registry=r
        )
        self.pods = Gauge("hyperframe_pods", "Pods managed by the operator, by phase.", ["phase"], registry=r)
        self.api_requests = Counter(
            "hyperframe_api_requests",
            "Kubernetes API requests of the operator's client.",
            ["verb", "resource"],
            registry=r,
        )
        self.progress_reports = Counter(
            "hyperframe_progress_reports", "Progress reports received, by result.", ["result"], registry=r
        )
        self.queue_depth = Gauge("hyperframe_workqueue_depth", "Jobs waiting to be reconciled.", registry=r)
        self.leader = Gauge(
            "hyperframe_leader", "1 while this replica holds the Lease and acts, 0 on standby.", registry=r
        )

    def watch_pod_phases(self, count: Callable[[str], int]) -> None:
        """Report pods per phase from the cache at scrape time."""

        def counter(phase: str) -> Callable[[], float]:
            return lambda: float(count(phase))

        for phase in POD_PHASES:
            self.pods.labels(phase=phase).set_function(counter(phase))

    def serve(self, port: int) -> None:
        if port:
            start_http_server(port, registry=self.registry)
