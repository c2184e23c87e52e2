"""Real pods on the real node `hf-real-0` (containerd + kubelet + kube-proxy + CoreDNS).

Covers: an image built here (debootstrap) is pushed to the local registry and pulled by digest;
a pod runs it to Succeeded, with `kubectl logs` and `kubectl exec`; pod-to-pod traffic by the
headless-Service DNS name (hostname + subdomain); in-cluster API access through the
`kubernetes` Service with the pod's own service-account token and the cluster CA, with RBAC
still refusing what the pod's role does not allow; and `down` of a second, side-by-side cluster
with its own two real nodes leaving no process, mount, link, cgroup or iptables rule behind.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from hyperframe_devcluster.cluster import LocalCluster
from hyperframe_devcluster.config import ClusterConfig
from hyperframe_devcluster.kube import Kubectl
from hyperframe_devcluster.node import RealNode
from realnode_support import debian_python_image, real_node_pod, wait_phase

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def debian_image(real_node: RealNode) -> str:
    registry = real_node.registry_address()
    assert registry is not None
    return debian_python_image(registry)


def test_a_pod_from_a_locally_built_image_runs_by_digest_with_logs_and_exec(
    kubectl: Kubectl, namespace: str, debian_image: str
) -> None:
    assert "@sha256:" in debian_image
    kubectl.apply(
        [
            real_node_pod("once", debian_image, ["python3", "-c", "print('hello from hf-real-0')"]),
            real_node_pod("idle", debian_image, ["python3", "-c", "import time; time.sleep(3600)"]),
        ],
        namespace=namespace,
    )
    start = time.monotonic()
    assert wait_phase(kubectl, namespace, "idle", {"Running", "Failed"}) == "Running"
    print(f"pod create -> Running: {time.monotonic() - start:.1f}s (image already on the node or pulled)")
    assert wait_phase(kubectl, namespace, "once", {"Succeeded", "Failed"}) == "Succeeded"

    logs = kubectl.run("logs", "-n", namespace, "once").stdout
    assert logs.strip() == "hello from hf-real-0"
    pod = kubectl.json("get", "pod", "once", "-n", namespace)
    assert pod["spec"]["nodeName"] == "hf-real-0"
    assert pod["status"]["containerStatuses"][0]["imageID"].endswith(debian_image.split("@")[1])

    version = kubectl.run("exec", "-n", namespace, "idle", "--", "cat", "/etc/debian_version").stdout
    assert version.startswith("12.")


_SERVER = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(b"pong from " + socket.gethostname().encode())
    c.close()
"""

_CLIENT = """
import socket, sys, time
name = sys.argv[1]
for attempt in range(120):
    try:
        address = socket.getaddrinfo(name, 7000, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
        with socket.create_connection((address, 7000), timeout=2) as c:
            print(name, address, c.recv(100).decode())
            sys.exit(0)
    except OSError as error:
        last = error
        time.sleep(0.5)
print("failed:", last)
sys.exit(1)
"""


def test_a_pod_reaches_another_by_its_headless_service_dns_name(
    kubectl: Kubectl, namespace: str, debian_image: str
) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "peers"},
        "spec": {"clusterIP": "None", "selector": {"app": "peer"}, "publishNotReadyAddresses": True,
                 "ports": [{"name": "echo", "port": 7000}]},
    }  # fmt: skip
    server = real_node_pod(
        "server",
        debian_image,
        ["python3", "-c", _SERVER],
        labels={"app": "peer"},
        hostname="b",
        subdomain="peers",
    )
    name = f"b.peers.{namespace}.svc"
    client = real_node_pod("client", debian_image, ["python3", "-c", _CLIENT, name])
    kubectl.apply([service, server, client], namespace=namespace)

    assert wait_phase(kubectl, namespace, "client", {"Succeeded", "Failed"}) == "Succeeded"
    server_ip = kubectl.run("get", "pod", "server", "-n", namespace, "-o", "jsonpath={.status.podIP}").stdout
    out = kubectl.run("logs", "-n", namespace, "client").stdout.split()
    assert out[0] == name
    assert out[1] == server_ip
    assert out[2:] == ["pong", "from", "b"]


_API_CLIENT = """
import json, ssl, urllib.error, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(f"{sa}/token").read()
ns = open(f"{sa}/namespace").read()
context = ssl.create_default_context(cafile=f"{sa}/ca.crt")
def get(path):
    request = urllib.request.Request("https://kubernetes.default.svc" + path,
                                     headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)
pods = get(f"/api/v1/namespaces/{ns}/pods")
secrets = get(f"/api/v1/namespaces/{ns}/secrets")
print(json.dumps({"pods": [pods[0], sorted(p["metadata"]["name"] for p in pods[1].get("items", []))],
                  "secrets": [secrets[0], secrets[1].get("reason")]}))
"""


def test_a_pod_uses_the_kubernetes_service_with_its_own_token_and_rbac_still_applies(
    kubectl: Kubectl, namespace: str, debian_image: str
) -> None:
    rbac = "rbac.authorization.k8s.io"
    kubectl.apply(
        [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "lister"}},
            {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": {"name": "list-pods"},
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]},
            {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": {"name": "lister"},
             "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "list-pods"},
             "subjects": [{"kind": "ServiceAccount", "name": "lister", "namespace": namespace}]},
        ],
        namespace=namespace,
    )  # fmt: skip
    pod = real_node_pod("api", debian_image, ["python3", "-c", _API_CLIENT], serviceAccountName="lister")
    kubectl.apply([pod], namespace=namespace)

    assert wait_phase(kubectl, namespace, "api", {"Succeeded", "Failed"}) == "Succeeded"
    result = json.loads(kubectl.run("logs", "-n", namespace, "api").stdout)
    assert result["pods"] == [200, ["api"]]
    assert result["secrets"] == [403, "Forbidden"]


def _host_snapshot() -> dict[str, set[str]]:
    def lines(*command: str) -> set[str]:
        return set(
            subprocess.run(list(command), capture_output=True, text=True, check=False).stdout.splitlines()
        )

    return {
        "links": {
            line.split(":")[1].strip().split("@")[0] for line in lines("ip", "-o", "link") if ":" in line
        },
        "netns": lines("ip", "netns", "list"),
        "iptables": {
            line for line in lines("iptables-save") if not line.startswith("#") and not line.startswith(":")
        }
        | {line.split()[0] for line in lines("iptables-save") if line.startswith(":")},
        "mounts": {line.split()[4] for line in lines("cat", "/proc/self/mountinfo")},
        "sysctl": lines(
            "sysctl", "net.ipv4.ip_forward", "vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops"
        ),
        "cgroups": {str(p) for p in Path("/sys/fs/cgroup").glob("*/hyperframe-*")},
    }


def test_a_second_cluster_runs_its_own_real_node_beside_and_down_leaves_the_host_as_found(
    real_node: RealNode, debian_image: str
) -> None:
    before = _host_snapshot()
    # Short: the kubelet's unix sockets live under the state directory (108-byte path limit).
    state_dir = Path(tempfile.mkdtemp(prefix="hf2-"))
    cluster = LocalCluster(
        ClusterConfig(state_dir=state_dir, gpu_nodes=0, real_node=True, real_nodes=2, die_with_parent=True)
    )
    try:
        start = time.monotonic()
        cluster.up(reuse=False)
        print(f"second cluster with two real nodes up in {time.monotonic() - start:.1f}s")
        registry = cluster.registry()
        assert registry is not None
        image = debian_python_image(registry)
        kubectl = cluster.kubectl
        kubectl.run("create", "namespace", "t")
        sleep = ["python3", "-c", "import time; time.sleep(3600)"]
        pods = [real_node_pod(f"idle-{i}", image, sleep, node=f"hf-real-{i}") for i in (0, 1)]
        kubectl.run("create", "serviceaccount", "default", "-n", "t", check=False)
        kubectl.apply(pods, namespace="t")
        for i in (0, 1):
            assert wait_phase(kubectl, "t", f"idle-{i}", {"Running", "Failed"}) == "Running"
        during = _host_snapshot()
        assert len(during["netns"] - before["netns"]) == 2, "each node runs in a network namespace of its own"
        assert len(during["cgroups"] - before["cgroups"]) >= 2
    finally:
        stopped = cluster.down()
    assert {"containerd", "kubelet", "kube-proxy", "coredns", "registry"} <= set(stopped)
    assert {"containerd-1", "kubelet-1", "kube-proxy-1"} <= set(stopped)

    after = _host_snapshot()
    for key in before:
        assert after[key] == before[key], (key, after[key] ^ before[key])
    leftovers = subprocess.run(["pgrep", "-af", str(state_dir)], capture_output=True, text=True, check=False)
    assert leftovers.stdout.strip() == ""
    shutil.rmtree(state_dir, ignore_errors=True)
    # The session's own real node was not disturbed.
    assert set(real_node.running_components()) == {
        "registry",
        "containerd",
        "kubelet",
        "kube-proxy",
        "coredns",
    }
