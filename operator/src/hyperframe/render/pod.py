"""One pod per node: the values of the pod template for one rank.

Why each setting is what it is:

* /dev/shm is a memory emptyDir with a sizeLimit: the container default (64Mi) starves
  DataLoader workers and NCCL's shared-memory transport.
* GPUs and RDMA devices are limits (extended resources); IPC_LOCK is added only with RDMA,
  because memory registration for GPUDirect needs it. RDMA pods run as root (non-root
  processes do not get added capabilities); all other pods run as non-root. Every container
  drops all other capabilities and cannot escalate privileges.
* Excluded nodes are kept out by required node affinity, both by node name and by the
  kubernetes.io/hostname label (they differ on some clouds).
* GPU jobs spread one pod per node (required pod anti-affinity within one gang generation).
"""

from __future__ import annotations

from typing import Any, Final

from hyperframe.api.codec import dump
from hyperframe.api.job_rules import checkpoint_of
from hyperframe.api.names import configmap_name, hostname, pod_name, podgroup_name, service_name
from hyperframe.api.resolve import PodSettings
from hyperframe.constants import (
    CONFIG_FILE_NAME,
    CONFIG_MOUNT_PATH,
    ENV_NODE_NAME,
    ENV_STATUS_TOKEN_FILE,
    ENV_STATUS_URL,
    INIT_CONTAINER_NAME,
    LABEL_GENERATION,
    LABEL_JOB,
    LABEL_RANK,
    LABEL_ROLE,
    MAIN_CONTAINER_NAME,
    STATUS_TOKEN_AUDIENCE,
    STATUS_TOKEN_DIR,
    TERMINATION_MESSAGE_PATH,
)
from hyperframe.render.engine import render_template
from hyperframe.render.prepare import Prepared

__all__ = ["LAUNCH_COMMAND", "SMOKE_COMMAND", "builtin_volumes_and_mounts", "pod_object", "rendezvous_env"]

SMOKE_COMMAND: Final = ["hyperframe-smoke"]
LAUNCH_COMMAND: Final = ["hyperframe-launch"]
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
STATUS_TOKEN_TTL_SECONDS: Final = 3600

VOLUME_SHM: Final = "hyperframe-shm"
VOLUME_CONFIG: Final = "hyperframe-config"
VOLUME_STATUS_TOKEN: Final = "hyperframe-status-token"

KUEUE_QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_RETRIABLE_ANNOTATION: Final = "kueue.x-k8s.io/retriable-in-group"
PLUGINS_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"


def rendezvous_env(p: Prepared, rank: int) -> list[dict[str, Any]]:
    """The variables torch and torchrun read (plain and PET_* spellings), plus HyperFrame's own
    (NODE_NAME comes from the downward API, so smoke reports name the Kubernetes node)."""
    cfg = p.resolution.config
    rdv = cfg.rendezvous
    values = {
        "MASTER_ADDR": rdv.master_addr,
        "MASTER_PORT": str(rdv.master_port),
        "WORLD_SIZE": str(cfg.world_size),
        "NODE_RANK": str(rank),
        "NPROC_PER_NODE": str(cfg.procs_per_node),
        "PET_NNODES": str(cfg.nodes),
        "PET_NODE_RANK": str(rank),
        "PET_NPROC_PER_NODE": str(cfg.procs_per_node),
        "PET_MASTER_ADDR": rdv.master_addr,
        "PET_MASTER_PORT": str(rdv.master_port),
        "HYPERFRAME_JOB_NAME": p.name,
        "HYPERFRAME_CONFIG": f"{CONFIG_MOUNT_PATH}/{CONFIG_FILE_NAME}",
    }
    if p.ctx.status_url:
        values[ENV_STATUS_URL] = p.ctx.status_url
        values[ENV_STATUS_TOKEN_FILE] = f"{STATUS_TOKEN_DIR}/token"
    node_name = {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}
    return [{"name": k, "value": v} for k, v in values.items()] + [
        {"name": ENV_NODE_NAME, "valueFrom": node_name}
    ]


def _labels(p: Prepared, rank: int) -> dict[str, str]:
    labels = {
        **p.job_labels(),
        LABEL_RANK: str(rank),
        LABEL_ROLE: "master" if rank == 0 else "worker",
        LABEL_GENERATION: str(p.ctx.gang_generation),
    }
    if p.job.spec.queue_name:
        labels[KUEUE_QUEUE_LABEL] = p.job.spec.queue_name
        # One Kueue workload per gang generation: the operator replaces a whole gang (failure,
        # preemption) with a new generation, never single pods, so a stopped gang's workload
        # finishes (releasing its quota) and the new gang queues as a workload of its own.
        labels[KUEUE_GROUP_LABEL] = f"{p.name}-g{p.ctx.gang_generation}"
    if p.resolution.pod.gang.pod_group == "SchedulerPlugins":
        labels[PLUGINS_GROUP_LABEL] = podgroup_name(p.name)
    return labels


def _annotations(p: Prepared) -> dict[str, str]:
    annotations = {}
    if p.job.spec.queue_name:
        annotations[KUEUE_TOTAL_ANNOTATION] = str(p.resolution.config.nodes)
        annotations[KUEUE_RETRIABLE_ANNOTATION] = "false"
    if p.resolution.pod.gang.pod_group == "Volcano":
        annotations[VOLCANO_GROUP_ANNOTATION] = podgroup_name(p.name)
    return annotations


def _affinity(p: Prepared) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    excluded = sorted(set(p.ctx.excluded_nodes))
    if excluded:
        term = {
            "matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "NotIn", "values": excluded}],
            # The API server allows exactly one value per matchFields requirement; the
            # requirements of one term are ANDed, so one NotIn per node excludes them all.
            "matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": [node]} for node in excluded
            ],
        }
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    if p.resolution.config.gpus_per_node > 0:
        selector = {LABEL_JOB: p.name, LABEL_GENERATION: str(p.ctx.gang_generation)}
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": selector}, "topologyKey": HOSTNAME_LABEL}
            ]
        }
    return affinity


def _resources(p: Prepared, pod: PodSettings) -> dict[str, Any]:
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if pod.cpu:
        requests["cpu"] = pod.cpu
    if pod.memory:
        requests["memory"] = limits["memory"] = pod.memory
    gpus = p.resolution.config.gpus_per_node
    if gpus > 0:
        limits[pod.gpu_resource_name] = str(gpus)
    if pod.rdma.enabled:
        limits[pod.rdma.resource_name] = str(pod.rdma.count)
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def _security(pod: PodSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    pod_ctx: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    container: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if pod.rdma.enabled:
        # The images' USER is uid 10001, and the kernel gives a non-root process no added
        # capability (no ambient set), so IPC_LOCK would be in the container's bounding set but
        # never in the process's effective set. Root is set explicitly, not left to the image.
        container["capabilities"]["add"] = ["IPC_LOCK"]
        pod_ctx.update({"runAsNonRoot": False, "runAsUser": 0, "runAsGroup": 0})
    else:
        uid = pod.run_as_user
        pod_ctx.update({"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "fsGroup": uid})
    return pod_ctx, container


def builtin_volumes_and_mounts(
    p: Prepared, pod: PodSettings
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The volumes and mounts HyperFrame adds before the job's own (shm, config, status token)."""
    volumes: list[dict[str, Any]] = [
        {"name": VOLUME_SHM, "emptyDir": {"medium": "Memory", "sizeLimit": pod.shm_size}},
        {"name": VOLUME_CONFIG, "configMap": {"name": configmap_name(p.name)}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": VOLUME_SHM, "mountPath": "/dev/shm"},
        {"name": VOLUME_CONFIG, "mountPath": CONFIG_MOUNT_PATH, "readOnly": True},
    ]
    if p.ctx.status_url:
        token = {
            "audience": STATUS_TOKEN_AUDIENCE,
            "expirationSeconds": STATUS_TOKEN_TTL_SECONDS,
            "path": "token",
        }
        volumes.append(
            {"name": VOLUME_STATUS_TOKEN, "projected": {"sources": [{"serviceAccountToken": token}]}}
        )
        mounts.append({"name": VOLUME_STATUS_TOKEN, "mountPath": STATUS_TOKEN_DIR, "readOnly": True})
    return volumes, mounts


def _volumes_and_mounts(p: Prepared, pod: PodSettings) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes, mounts = builtin_volumes_and_mounts(p, pod)
    spec = p.job.spec
    volumes.extend(dict(v) for v in spec.volumes)
    mounts.extend(dump(m) for m in spec.volume_mounts)
    ckpt = checkpoint_of(spec)
    if ckpt is not None and not any(m.mount_path == ckpt.path for m in spec.volume_mounts):
        mounts.append({"name": ckpt.volume, "mountPath": ckpt.path})
    return volumes, mounts


def pod_object(p: Prepared, rank: int) -> dict[str, Any]:
    """The pod of node rank ``rank`` for the current gang generation."""
    nodes = p.resolution.config.nodes
    if not 0 <= rank < nodes:
        raise ValueError(f"rank {rank} is outside 0..{nodes - 1}")
    pod = p.resolution.pod
    config_path = f"{CONFIG_MOUNT_PATH}/{CONFIG_FILE_NAME}"
    volumes, mounts = _volumes_and_mounts(p, pod)
    pod_security, container_security = _security(pod)
    scheduler = pod.scheduler_name
    if scheduler is None and pod.gang.pod_group == "Volcano":
        scheduler = "volcano"
    return render_template(
        "pod.yaml.j2",
        name=pod_name(p.name, p.ctx.gang_generation, rank),
        namespace=p.namespace,
        labels=_labels(p, rank),
        annotations=_annotations(p),
        owner_refs=p.owner_refs(),
        hostname=hostname(p.name, rank),
        subdomain=service_name(p.name),
        host_network=pod.host_network,
        scheduler_name=scheduler,
        priority_class_name=pod.priority_class_name,
        node_selector=dict(pod.node_selector),
        tolerations=[dump(t) for t in pod.tolerations],
        affinity=_affinity(p),
        pull_secrets=[{"name": s} for s in pod.images.pull_secrets],
        pod_security=pod_security,
        container_security=container_security,
        smoke_enabled=p.resolution.config.smoke.enabled,
        init_name=INIT_CONTAINER_NAME,
        main_name=MAIN_CONTAINER_NAME,
        image=pod.image,
        pull_policy=pod.images.pull_policy,
        smoke_command=SMOKE_COMMAND,
        smoke_args=["--config", config_path],
        launch_command=LAUNCH_COMMAND,
        launch_args=["--config", config_path],
        env=rendezvous_env(p, rank) + [dump(e) for e in pod.env],
        resources=_resources(p, pod),
        mounts=mounts,
        volumes=volumes,
        port=p.resolution.config.rendezvous.master_port,
        grace_seconds=p.resolution.config.termination_grace_period_seconds,
        termination_path=TERMINATION_MESSAGE_PATH,
    )
