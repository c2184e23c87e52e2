"""The renderer's behaviour, setting by setting (the golden files pin the full output)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from api_helpers import example_files, example_pair, patched
from hyperframe.api.errors import SpecError
from hyperframe.api.resolved import ResolvedJobConfig
from hyperframe.constants import (
    CONFIG_FILE_NAME,
    CONFIG_MOUNT_PATH,
    ENV_NODE_NAME,
    ENV_STATUS_TOKEN_FILE,
    ENV_STATUS_URL,
    INIT_CONTAINER_NAME,
    LABEL_GENERATION,
    LABEL_JOB,
    LABEL_MANAGED_BY,
    LABEL_RANK,
    LABEL_ROLE,
    MAIN_CONTAINER_NAME,
    RESERVED_ENV,
    STATUS_CA_FILE_NAME,
    STATUS_TOKEN_AUDIENCE,
    TERMINATION_MESSAGE_PATH,
)
from hyperframe.render import (
    RenderContext,
    render_configmap,
    render_job,
    render_pod,
    render_podgroup,
    render_pods,
    render_service,
)
from hyperframe.render.core_v1 import SCHEMA_FILE

UID = "11111111-2222-3333-4444-555555555555"


def pair(example: str = "gpu-pipeline.yaml", **job_patch: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    job, rt = example_pair(example)
    return patched(job, job_patch), rt


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


def test_render_job_order_and_kinds() -> None:
    objs = render_job(*pair(), RenderContext())
    assert [o["kind"] for o in objs] == ["Service", "ConfigMap", "Pod", "Pod"]
    assert [o["metadata"]["name"] for o in objs] == [
        "gpt-medium-pp4",
        "gpt-medium-pp4-config",
        "gpt-medium-pp4-g0-0",
        "gpt-medium-pp4-g0-1",
    ]


def test_separate_functions_agree_with_render_job() -> None:
    job, rt = pair()
    ctx = RenderContext(gang_generation=2)
    objs = render_job(job, rt, ctx)
    assert objs[0] == render_service(job, rt, ctx)
    assert objs[1] == render_configmap(job, rt, ctx)
    assert objs[2:] == render_pods(job, rt, ctx) == [render_pod(job, rt, r, ctx) for r in (0, 1)]
    assert render_podgroup(job, rt, ctx) is None
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        render_pod(job, rt, 2, ctx)


def test_rendering_is_pure_and_deterministic() -> None:
    job, rt = pair()
    before = json.dumps([job, rt], sort_keys=True)
    assert render_job(job, rt) == render_job(job, rt)
    assert json.dumps([job, rt], sort_keys=True) == before


def test_headless_service_gives_stable_dns_before_readiness() -> None:
    svc = render_service(*pair())
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    # Selecting by job only (not generation) keeps rank DNS names across gang restarts.
    assert svc["spec"]["selector"] == {LABEL_JOB: "gpt-medium-pp4"}
    assert svc["spec"]["ports"][0]["port"] == 29500


def test_configmap_holds_the_resolved_config() -> None:
    cm = render_configmap(*pair())
    cfg = ResolvedJobConfig.from_json(cm["data"][CONFIG_FILE_NAME])
    assert cfg.world_size == 16 and cfg.backend == "nccl"
    assert cfg.smoke.min_bus_bandwidth_gbps == 100


def test_configmap_carries_the_user_modules_sequence_length() -> None:
    module = {"name": "my_project.train:build_model", "seqLen": 256}
    cm = render_configmap(*pair(spec={"entrypoint": {"builtin": "__delete__", "module": module}}))
    cfg = ResolvedJobConfig.from_json(cm["data"][CONFIG_FILE_NAME])
    assert cfg.entrypoint.module is not None and cfg.entrypoint.module.seq_len == 256
    module = {"name": "my_project.train:build_model"}
    cm = render_configmap(*pair(spec={"entrypoint": {"builtin": "__delete__", "module": module}}))
    cfg = ResolvedJobConfig.from_json(cm["data"][CONFIG_FILE_NAME])
    assert cfg.entrypoint.module is not None and cfg.entrypoint.module.seq_len == 32  # the default


def test_configmap_hands_the_progress_ca_to_the_pods_only_with_a_status_url() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    url = "https://op.hf.svc:8081/v1/namespaces/default/hyperframejobs/j/progress"
    cm = render_configmap(*pair(), RenderContext(status_url=url, status_ca=pem))
    assert cm["data"][STATUS_CA_FILE_NAME] == pem
    assert STATUS_CA_FILE_NAME not in render_configmap(*pair(), RenderContext(status_ca=pem))["data"]


def test_pod_names_are_deterministic_per_generation_and_hostnames_stable() -> None:
    job, rt = pair()
    g0 = render_pod(job, rt, 1, RenderContext(gang_generation=0))
    g5 = render_pod(job, rt, 1, RenderContext(gang_generation=5))
    assert g0["metadata"]["name"] == "gpt-medium-pp4-g0-1"
    assert g5["metadata"]["name"] == "gpt-medium-pp4-g5-1"
    assert g0["spec"]["hostname"] == g5["spec"]["hostname"] == "gpt-medium-pp4-1"
    assert g0["spec"]["subdomain"] == "gpt-medium-pp4"
    assert g5["metadata"]["labels"][LABEL_GENERATION] == "5"


def test_labels_and_roles() -> None:
    pods = render_pods(*pair())
    for rank, pod in enumerate(pods):
        labels = pod["metadata"]["labels"]
        assert labels[LABEL_JOB] == "gpt-medium-pp4"
        assert labels[LABEL_RANK] == str(rank)
        assert labels[LABEL_ROLE] == ("master" if rank == 0 else "worker")
        assert labels[LABEL_MANAGED_BY] == "hyperframe-operator"


def test_owner_references_only_with_a_uid() -> None:
    job, rt = pair()
    for obj in render_job(job, rt):
        assert "ownerReferences" not in obj["metadata"]
    job["metadata"]["uid"] = UID
    for obj in render_job(job, rt):
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "hyperframe.dev/v1alpha1",
            "kind": "HyperFrameJob",
            "name": "gpt-medium-pp4",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def test_rendezvous_env_for_torch_and_torchrun() -> None:
    pod = render_pod(*pair(), 1)
    for c in containers(pod):
        env = env_of(c)
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "gpt-medium-pp4-0.gpt-medium-pp4.default.svc"
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29500"
        assert env["WORLD_SIZE"] == "16"  # total ranks, as torch defines it
        assert env["NODE_RANK"] == env["PET_NODE_RANK"] == "1"
        assert env["NPROC_PER_NODE"] == env["PET_NPROC_PER_NODE"] == "8"
        assert env["PET_NNODES"] == "2"
        assert env["HYPERFRAME_CONFIG"] == f"{CONFIG_MOUNT_PATH}/{CONFIG_FILE_NAME}"
        # The golden table, then the job's allowed override (NCCL_DEBUG replaced in place).
        assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_DEBUG"] == "INFO"
        assert ENV_STATUS_URL not in env
        names = [e["name"] for e in c["env"]]
        assert len(names) == len(set(names))


def test_both_containers_get_the_node_name_from_the_downward_api() -> None:
    pod = render_pod(*pair(), 0, RenderContext())
    assert [c["name"] for c in containers(pod)] == [INIT_CONTAINER_NAME, MAIN_CONTAINER_NAME]
    for c in containers(pod):
        (entry,) = [e for e in c["env"] if e["name"] == ENV_NODE_NAME]
        assert entry == {
            "name": ENV_NODE_NAME,
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
        }
    assert ENV_NODE_NAME in RESERVED_ENV


def test_every_name_the_renderer_sets_is_reserved() -> None:
    env = env_of(
        render_pod(*pair(), 0, RenderContext(status_url="https://op/progress"))["spec"]["containers"][0]
    )
    rendered = {n for n in env if not n.startswith(("NCCL_", "TORCH_"))}
    assert rendered <= RESERVED_ENV


def test_status_url_adds_env_and_a_projected_token() -> None:
    pod = render_pod(*pair(), 0, RenderContext(status_url="https://op.ns.svc:8443/progress"))
    (vol,) = [v for v in pod["spec"]["volumes"] if "projected" in v]
    token = vol["projected"]["sources"][0]["serviceAccountToken"]
    assert token["audience"] == STATUS_TOKEN_AUDIENCE and token["path"] == "token"
    for c in containers(pod):
        env = env_of(c)
        assert env[ENV_STATUS_URL] == "https://op.ns.svc:8443/progress"
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == vol["name"]]
        assert env[ENV_STATUS_TOKEN_FILE] == mount["mountPath"] + "/token"
        assert mount["readOnly"] is True


def test_containers_smoke_gate_and_trainer() -> None:
    spec = render_pod(*pair(), 0)["spec"]
    assert spec["restartPolicy"] == "Never"
    (init,) = spec["initContainers"]
    (main,) = spec["containers"]
    assert init["name"] == INIT_CONTAINER_NAME and main["name"] == MAIN_CONTAINER_NAME
    assert init["command"] == ["hyperframe-smoke"] and main["command"] == ["hyperframe-launch"]
    for c in (init, main):
        assert c["args"] == ["--config", f"{CONFIG_MOUNT_PATH}/{CONFIG_FILE_NAME}"]
        assert c["image"].startswith("ghcr.io/hyperframe-dev/hyperframe-framework:0.1.0-torch2.13.0-cu130")
        assert c["terminationMessagePath"] == TERMINATION_MESSAGE_PATH
        assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_smoke_gate_off_means_no_init_container() -> None:
    job, rt = pair("cpu-tiny.yaml", spec={"runtimeOverrides": {"smoke": {"enabled": False}}})
    assert "initContainers" not in render_pod(job, rt, 0)["spec"]


def test_shm_is_a_sized_memory_empty_dir_mounted_at_dev_shm() -> None:
    job, rt = pair(spec={"runtimeOverrides": {"shmSize": "96Gi"}})
    pod = render_pod(job, rt, 0)
    (shm,) = [v for v in pod["spec"]["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
    assert shm["emptyDir"]["sizeLimit"] == "96Gi"
    for c in containers(pod):
        assert {"name": shm["name"], "mountPath": "/dev/shm"} in c["volumeMounts"]


def test_cpu_job_has_no_gpu_rdma_or_anti_affinity() -> None:
    pod = render_pod(*pair("cpu-2node.yaml"), 1)
    res = pod["spec"]["containers"][0]["resources"]
    assert res == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}
    assert "affinity" not in pod["spec"]
    assert env_of(pod["spec"]["containers"][0])["WORLD_SIZE"] == "4"


def test_security_context_non_root_without_rdma() -> None:
    spec = render_pod(*pair(), 0)["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 10001
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in containers({"spec": spec}):
        assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert spec["automountServiceAccountToken"] is False


def test_rdma_adds_devices_and_only_ipc_lock() -> None:
    spec = render_pod(*pair("gpu-rdma.yaml"), 0)["spec"]
    # Root set explicitly: the images' USER is 10001, and a non-root process never gets IPC_LOCK.
    assert spec["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": False,
        "runAsUser": 0,
        "runAsGroup": 0,
    }
    for c in containers({"spec": spec}):
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
        assert c["resources"]["limits"] == {"nvidia.com/gpu": "8", "rdma/ib": "1"}


def test_excluded_nodes_are_kept_out_by_required_node_affinity() -> None:
    pod = render_pod(*pair(), 0, RenderContext(excluded_nodes=("n2", "n1", "n2")))
    required = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = required["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n1", "n2"]}
    ]
    # One value per matchFields requirement: the API server rejects more (requirements are ANDed).
    assert term["matchFields"] == [
        {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]},
        {"key": "metadata.name", "operator": "NotIn", "values": ["n2"]},
    ]


def test_gpu_pods_spread_one_per_node_within_a_generation() -> None:
    pod = render_pod(*pair(), 0, RenderContext(gang_generation=4))
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {LABEL_JOB: "gpt-medium-pp4", LABEL_GENERATION: "4"}


def test_runtime_placement_settings() -> None:
    job, rt = pair()
    rt = patched(
        rt, {"spec": {"pod": {"schedulerName": "gang", "priorityClassName": "train", "hostNetwork": True}}}
    )
    spec = render_pod(job, rt, 0)["spec"]
    assert spec["schedulerName"] == "gang" and spec["priorityClassName"] == "train"
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_user_env_volumes_mounts_and_checkpoint_mount() -> None:
    spec = render_pod(*pair(), 0)["spec"]
    assert {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "gpt-medium-checkpoints"}} in spec[
        "volumes"
    ]
    assert {"name": "checkpoints", "mountPath": "/checkpoints"} in spec["containers"][0]["volumeMounts"]
    rdma = render_pod(*pair("gpu-rdma.yaml"), 0)["spec"]
    main = rdma["containers"][0]
    assert {"name": "data", "mountPath": "/data", "readOnly": True} in main["volumeMounts"]
    assert env_of(main)["WANDB_API_KEY"] == {"secretKeyRef": {"name": "wandb", "key": "api-key"}}


@pytest.mark.parametrize(
    ("pod_group", "api_version"),
    [("SchedulerPlugins", "scheduling.x-k8s.io/v1alpha1"), ("Volcano", "scheduling.volcano.sh/v1beta1")],
)
def test_podgroups_are_opt_in(pod_group: str, api_version: str) -> None:
    job, rt = pair()
    scheduler = {"schedulerName": "scheduler-plugins-scheduler"} if pod_group == "SchedulerPlugins" else {}
    rt = patched(rt, {"spec": {"gang": {"podGroup": pod_group}, "pod": scheduler}})
    group = render_podgroup(job, rt)
    assert group is not None
    assert group["apiVersion"] == api_version and group["kind"] == "PodGroup"
    assert group["spec"]["minMember"] == 2
    assert ("scheduleTimeoutSeconds" in group["spec"]) == (pod_group == "SchedulerPlugins")
    objs = render_job(job, rt)
    assert [o["kind"] for o in objs] == ["Service", "ConfigMap", "PodGroup", "Pod", "Pod"]
    pod = objs[3]
    if pod_group == "SchedulerPlugins":
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "gpt-medium-pp4"
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    else:
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "gpt-medium-pp4"
        assert pod["spec"]["schedulerName"] == "volcano"


def test_kueue_plain_pod_group_is_opt_in() -> None:
    plain = render_pod(*pair(), 0)
    assert not any(k.startswith("kueue.x-k8s.io/") for k in plain["metadata"]["labels"])
    pod = render_pod(*pair("gpu-rdma.yaml"), 3)
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] == "llm-rdma-g0"
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "4"
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/retriable-in-group"] == "false"


def test_hostile_strings_cannot_break_the_yaml() -> None:
    evil = "x\"\n  injected: true\n- {a: b}: # ' \\"
    job, rt = pair(spec={"env": [{"name": "EVIL", "value": evil}]})
    pod = render_pod(job, rt, 0)
    assert env_of(pod["spec"]["containers"][0])["EVIL"] == evil
    assert "injected" not in pod["spec"]


def test_errors_of_job_and_runtime_come_together() -> None:
    job, rt = pair()
    job = patched(job, {"spec": {"nodes": 0}})
    rt = patched(rt, {"spec": {"pod": {"shmSize": "huge"}}})
    with pytest.raises(SpecError) as info:
        render_job(job, rt)
    # nodes 0 also breaks the parallelism product rule, as on the API server.
    assert info.value.paths() == ["spec.nodes", "spec.parallelism", "HyperFrameRuntime.spec.pod.shmSize"]


def test_namespace_defaults_and_is_used_everywhere() -> None:
    job, rt = pair("cpu-tiny.yaml", metadata={"namespace": "ml"})
    for obj in render_job(job, rt):
        assert obj["metadata"]["namespace"] == "ml"
    env = env_of(render_pod(job, rt, 0)["spec"]["containers"][0])
    assert env["MASTER_ADDR"] == "cpu-tiny-0.cpu-tiny.ml.svc"


@pytest.mark.parametrize("example", example_files())
def test_every_example_renders_one_pod_per_node(example: str) -> None:
    job, rt = example_pair(example)
    pods = [o for o in render_job(job, rt) if o["kind"] == "Pod"]
    assert len(pods) == job["spec"]["nodes"]


def test_render_context_rejects_negative_generation() -> None:
    with pytest.raises(ValueError, match="gang_generation"):
        RenderContext(gang_generation=-1)


def test_the_core_v1_schema_is_the_pinned_kubernetes_version() -> None:
    pins = (Path(__file__).resolve().parents[3] / "cluster" / "versions.env").read_text(encoding="utf-8")
    pinned = next(
        line.split("=", 1)[1] for line in pins.splitlines() if line.startswith("KUBERNETES_VERSION=")
    )
    assert json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))["kubernetesVersion"] == pinned
