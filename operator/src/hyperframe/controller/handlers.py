"""kopf wiring: decorators and startup settings only; every handler hands off to :class:`.app.Controller`.

The handlers are registered in a registry built per process (no kopf global default registry), so
the controller and its settings are passed in rather than reached for.
"""

from __future__ import annotations

from typing import Any

import kopf

from hyperframe.constants import GROUP, JOB_PLURAL, LABEL_MANAGED_BY, MANAGED_BY, VERSION

from .app import Controller

__all__ = ["build_registry"]

_MANAGED = f"{LABEL_MANAGED_BY}={MANAGED_BY}"


class _NoDiffBase(kopf.DiffBaseStorage):
    """No change detection: only event handlers are registered, which need no diff, yet kopf's
    default storage deep-copies every event's body to build one (about a tenth of the operator's
    CPU when thousands of pods change)."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def build_registry(controller: Controller) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # events are the controller's own, after each status write
        settings.persistence.diffbase_storage = _NoDiffBase()
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.watching.label_selectors["v1", "pods"] = _MANAGED  # server-side filter
        try:
            await controller.start()
        except OSError as exc:  # a port in use: retrying in a minute would not help
            raise kopf.PermanentError(f"operator cannot start: {exc}") from exc

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await controller.stop()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.probe(id="workqueue", registry=registry)
    def workqueue_depth(**_: Any) -> int:
        return len(controller.queue or ())

    @kopf.on.probe(id="leader", registry=registry)
    def leader(**_: Any) -> bool:
        return controller.queue is not None

    @kopf.on.event(GROUP, VERSION, JOB_PLURAL, registry=registry)
    async def job_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        controller.job_event(type, body)

    @kopf.on.event("v1", "pods", labels={LABEL_MANAGED_BY: MANAGED_BY}, registry=registry)
    async def pod_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        controller.pod_event(type, body)

    @kopf.on.event("v1", "nodes", registry=registry)
    async def node_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        controller.node_event(type, body)

    return registry
