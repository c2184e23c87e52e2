"""Two real nodes, `hf-real-0` and `hf-real-1`: pod traffic crosses their network namespaces.

Covers (with HYPERFRAME_CLUSTER_REAL_NODES=2, which `make test` sets): both nodes register
Ready with their own pod subnet; a pod on hf-real-1 reaches a pod on hf-real-0 by its
headless-Service DNS name (CoreDNS runs on hf-real-0, so the lookup crosses too) and sees the
server's real pod IP, not a masqueraded one; and a ClusterIP Service whose only endpoint is on
the other node answers from either node (kube-proxy's DNAT, then the route between the nodes).
"""

from __future__ import annotations

import ipaddress
import time

import pytest
from hyperframe_devcluster.kube import Kubectl
from hyperframe_devcluster.node import RealNode
from realnode_support import debian_python_image, real_node_pod, wait_phase

pytestmark = pytest.mark.cluster

_SERVER = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000))
s.listen()
while True:
    c, peer = s.accept()
    c.sendall(f"pong from {socket.gethostname()} to {peer[0]}".encode())
    c.close()
"""

_CLIENT = """
import socket, sys, time
name, port = sys.argv[1], int(sys.argv[2])
start = time.monotonic()
for attempt in range(240):
    try:
        address = socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
        with socket.create_connection((address, port), timeout=2) as c:
            print(name, address, c.recv(200).decode(), f"{time.monotonic() - start:.2f}")
            sys.exit(0)
    except OSError as error:
        last = error
        time.sleep(0.5)
print("failed:", last)
sys.exit(1)
"""


@pytest.fixture(scope="module")
def image(real_nodes: list[RealNode]) -> str:
    registry = real_nodes[0].registry_address()
    assert registry is not None
    return debian_python_image(registry)


def test_both_real_nodes_are_ready_each_with_a_pod_subnet_of_its_own(
    kubectl: Kubectl, real_nodes: list[RealNode]
) -> None:
    nodes = {
        n["metadata"]["name"]: n
        for n in kubectl.json("get", "nodes", "-l", "hyperframe.dev/real-node")["items"]
    }
    assert sorted(nodes) == ["hf-real-0", "hf-real-1"]
    subnets = []
    for real in real_nodes:
        net = real.network()
        assert net is not None
        subnets.append(ipaddress.ip_network(net.pod_subnet))
        ready = [c for c in nodes[real.name]["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True"
        assert nodes[real.name]["status"]["addresses"][0]["address"] == net.node_ip
    assert not subnets[0].overlaps(subnets[1])


def test_a_pod_on_one_node_reaches_a_pod_on_the_other_by_dns_name_and_through_a_service(
    kubectl: Kubectl, namespace: str, image: str
) -> None:
    headless = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "peers"},
        "spec": {"clusterIP": "None", "selector": {"app": "peer"}, "publishNotReadyAddresses": True,
                 "ports": [{"name": "echo", "port": 7000}]},
    }  # fmt: skip
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
        "spec": {"selector": {"app": "peer"}, "ports": [{"name": "echo", "port": 80, "targetPort": 7000}]},
    }  # fmt: skip
    server = real_node_pod(
        "server", image, ["python3", "-c", _SERVER], node="hf-real-0",
        labels={"app": "peer"}, hostname="b", subdomain="peers",
    )  # fmt: skip
    by_name = f"b.peers.{namespace}.svc"
    created = time.monotonic()
    kubectl.apply(
        [
            headless,
            service,
            server,
            real_node_pod("across", image, ["python3", "-c", _CLIENT, by_name, "7000"], node="hf-real-1"),
            real_node_pod("via-service-1", image, ["python3", "-c", _CLIENT, "echo", "80"], node="hf-real-1"),
            real_node_pod("via-service-0", image, ["python3", "-c", _CLIENT, "echo", "80"], node="hf-real-0"),
        ],
        namespace=namespace,
    )
    assert wait_phase(kubectl, namespace, "server", {"Running", "Failed"}) == "Running"
    print(f"create -> Running of the server pod: {time.monotonic() - created:.1f}s")
    for client in ("across", "via-service-1", "via-service-0"):
        assert wait_phase(kubectl, namespace, client, {"Succeeded", "Failed"}) == "Succeeded", client

    def pod(name: str) -> dict[str, str]:
        status = kubectl.json("get", "pod", name, "-n", namespace)
        return {"ip": status["status"]["podIP"], "node": status["spec"]["nodeName"]}

    server_pod, across = pod("server"), pod("across")
    assert (server_pod["node"], across["node"]) == ("hf-real-0", "hf-real-1")
    out = kubectl.run("logs", "-n", namespace, "across").stdout.split()
    assert out[:2] == [by_name, server_pod["ip"]]
    # The server saw the client's own pod IP: pod traffic is routed between the nodes, not NATed.
    assert out[2:7] == ["pong", "from", "b", "to", across["ip"]]
    print(f"cross-node connect by DNS name, first attempt to answer: {out[7]}s after the client started")
    for client in ("via-service-1", "via-service-0"):
        answer = kubectl.run("logs", "-n", namespace, client).stdout.split()
        assert answer[0] == "echo"
        assert answer[2:5] == ["pong", "from", "b"], answer
        assert answer[6] == pod(client)["ip"], answer
