"""The job-wide objects: headless Service, config ConfigMap and the optional PodGroup."""

from __future__ import annotations

from typing import Any, Final

from hyperframe.api.names import configmap_name, podgroup_name, service_name
from hyperframe.constants import CONFIG_FILE_NAME, LABEL_JOB, STATUS_CA_FILE_NAME
from hyperframe.render.engine import render_template
from hyperframe.render.prepare import Prepared

__all__ = ["PODGROUP_API", "configmap_object", "podgroup_object", "service_object"]

PODGROUP_API: Final[dict[str, str]] = {
    "SchedulerPlugins": "scheduling.x-k8s.io/v1alpha1",
    "Volcano": "scheduling.volcano.sh/v1beta1",
}


def service_object(p: Prepared) -> dict[str, Any]:
    return render_template(
        "service.yaml.j2",
        name=service_name(p.name),
        namespace=p.namespace,
        labels=p.job_labels(),
        owner_refs=p.owner_refs(),
        # Not the generation: rank DNS names must survive gang restarts.
        selector={LABEL_JOB: p.name},
        port=p.resolution.config.rendezvous.master_port,
    )


def configmap_object(p: Prepared) -> dict[str, Any]:
    return render_template(
        "configmap.yaml.j2",
        name=configmap_name(p.name),
        namespace=p.namespace,
        labels=p.job_labels(),
        owner_refs=p.owner_refs(),
        file_name=CONFIG_FILE_NAME,
        config_json=p.resolution.config.to_json(),
        ca_file_name=STATUS_CA_FILE_NAME,
        status_ca=p.ctx.status_ca if p.ctx.status_url else None,
    )


def podgroup_object(p: Prepared) -> dict[str, Any] | None:
    gang = p.resolution.pod.gang
    if gang.pod_group == "None":
        return None
    plugins = gang.pod_group == "SchedulerPlugins"
    return render_template(
        "podgroup.yaml.j2",
        api_version=PODGROUP_API[gang.pod_group],
        name=podgroup_name(p.name),
        namespace=p.namespace,
        labels=p.job_labels(),
        owner_refs=p.owner_refs(),
        min_member=p.resolution.config.nodes,
        schedule_timeout_seconds=gang.schedule_timeout_seconds if plugins else None,
        min_resources=None,
    )
