"""Bringing one local cluster up and down: etcd, kube-apiserver, controller-manager, scheduler, KWOK.

`up` starts every component in order, waits for each to be ready (polling its health endpoint,
never sleeping a fixed time), installs the project's KWOK Stages and creates the simulated
nodes. A component that does not become ready fails `up` with the tail of its log. Stale
processes of a previous run in the same state directory (pid files) are stopped first.
"""

from __future__ import annotations

import shutil
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import components, kueue, paths, prereqs, sim
from .config import COMPONENTS, ClusterConfig, Ports, free_ports
from .kube import Kubectl
from .node import RealNode, connect_nodes
from .node_config import MAX_REAL_NODES
from .pki import Pki, ensure_loopback_serving_cert, ensure_pki
from .probes import apiserver_context, http_ok, insecure_context
from .process import (
    log_tail,
)
from .rest import ApiError, RestClient
from .supervisor import Supervisor

__all__ = ["LocalCluster", "UpReport"]


@dataclass(slots=True)
class UpReport:
    """What `up` did and how long each step took (seconds)."""

    reused: bool = False
    steps: dict[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return sum(self.steps.values())


class LocalCluster:
    """One local cluster rooted at `config.state_dir`."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config

    # --- queries ----------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.config.kubeconfig

    @property
    def kubectl(self) -> Kubectl:
        return Kubectl(self.config.kubeconfig)

    @property
    def pki(self) -> Pki:
        return Pki(self.config.pki_dir)

    def pid(self, component: str) -> int | None:
        return Supervisor(self.config).pid(component)

    @property
    def node(self) -> RealNode:
        """The first real node, hf-real-0 (running only when `config.real_node`)."""
        return RealNode(self.config, self.pki)

    @property
    def nodes(self) -> list[RealNode]:
        """The real nodes this cluster's settings ask for (hf-real-0 first; none without)."""
        count = self.config.real_nodes if self.config.real_node else 0
        return [RealNode(self.config, self.pki, index) for index in range(count)]

    def _every_node(self) -> list[RealNode]:
        """Every real node a cluster in this directory may have run, whatever its settings."""
        return [RealNode(self.config, self.pki, index) for index in range(MAX_REAL_NODES)]

    def components(self) -> tuple[str, ...]:
        extra = (kueue.KUEUE_COMPONENT,) if self.config.kueue else ()
        return COMPONENTS + extra + tuple(c for node in self.nodes for c in node.components)

    def running_components(self) -> list[str]:
        own = [c for c in (*COMPONENTS, kueue.KUEUE_COMPONENT) if self.pid(c) is not None]
        return own + [c for node in self._every_node() for c in node.running_components()]

    def registry(self) -> str | None:
        """host:port of the local image registry (with the real node), else None."""
        return self.node.registry_address() if self.config.real_node else None

    def rest(self) -> RestClient:
        """An admin REST client of the running cluster."""
        ports = self.config.read_ports()
        if ports is None:
            raise RuntimeError(f"no cluster is up in {self.config.state_dir}")
        return self._rest(ports)

    def apiserver_ready(self) -> bool:
        ports = self.config.read_ports()
        if ports is None or not self.pki.ca_cert.exists():
            return False
        return self._apiserver_ready(ports)

    def is_up(self) -> bool:
        """Every component runs and the apiserver answers /readyz."""
        return set(self.running_components()) == set(self.components()) and self.apiserver_ready()

    def log_tails(self, lines: int = 30) -> dict[str, str]:
        return {c: log_tail(self.config.log_file(c), lines) for c in self.components()}

    # --- up ---------------------------------------------------------------------------------
    def up(self, *, reuse: bool = True) -> UpReport:
        """Start the cluster (or, with `reuse`, keep one that is already up in this directory)."""
        missing = paths.missing_binaries()
        if missing:
            raise paths.BinaryMissingError(
                f"control-plane binaries not built: {', '.join(missing)} (in {paths.bin_dir()}); "
                "run `make cluster-build`"
            )
        if self.config.real_node:
            prereqs.ensure()
        report = UpReport()
        if reuse and self.is_up():
            report.reused = True
            return report
        try:
            self._start(report)
        except BaseException:
            self.down()
            raise
        return report

    def _start(self, report: UpReport) -> None:
        cfg = self.config
        step = _Stopwatch(report)
        self.down()  # stale processes from a crashed run in this directory
        shutil.rmtree(cfg.etcd_dir, ignore_errors=True)
        shutil.rmtree(cfg.log_dir, ignore_errors=True)
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
        node_host_ip = None
        if cfg.real_node:
            first, *others = self.nodes
            nets = [first.prepare()]
            node_host_ip = nets[0].host_ip
            nets += [node.prepare(apiserver_ip=node_host_ip) for node in others]
            connect_nodes(nets)
        pki = ensure_pki(cfg.pki_dir, cfg.service_ip, (node_host_ip,) if node_host_ip else ())
        ports = Ports(*free_ports(9))
        cfg.write_state(ports)
        self._write_kubeconfigs(ports, pki)
        step("prepare")
        if cfg.real_node:
            self.node.start_registry(ports.registry)
            step("registry")

        self._launch("etcd", components.etcd_command(paths.etcd(), cfg, ports))
        self._wait(
            "etcd",
            "/health",
            lambda: http_ok(f"http://127.0.0.1:{ports.etcd_client}/health", expect_json={"health": "true"}),
        )
        step("etcd")

        apiserver = paths.binary("kube-apiserver")
        self._launch(
            "kube-apiserver",
            components.apiserver_command(apiserver, cfg, ports, pki, node_host_ip=node_host_ip),
        )
        self._wait("kube-apiserver", "/readyz", lambda: self._apiserver_ready(ports))
        step("kube-apiserver")

        kcm = paths.binary("kube-controller-manager")
        self._launch("kube-controller-manager", components.controller_manager_command(kcm, cfg, ports, pki))
        scheduler = paths.binary("kube-scheduler")
        self._launch("kube-scheduler", components.scheduler_command(scheduler, cfg, ports))
        # While those two start: Stages must exist before KWOK starts watching them.
        api = self._rest(ports)
        crd = yaml.safe_load(paths.kwok_stage_crd().read_text())
        api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        stages = sim.project_stages()
        self._wait(
            "kube-apiserver", "the KWOK Stage CRD to serve", lambda: _created(api, _STAGES_PATH, stages[0])
        )
        for stage in stages[1:]:
            api.create(_STAGES_PATH, stage)
        step("kwok-stages")

        self._launch("kwok", components.kwok_command(paths.kwok(), cfg, ports))
        nodes = [sim.gpu_node(i) for i in range(cfg.gpu_nodes)]
        nodes += [sim.system_node(i) for i in range(cfg.system_nodes)]
        for node in nodes:
            api.create("/api/v1/nodes", node)
        self._wait("kwok", "/healthz", lambda: http_ok(f"http://127.0.0.1:{ports.kwok}/healthz"))
        self._wait("kwok", f"{len(nodes)} Ready nodes", lambda: _ready_nodes(api) >= len(nodes))
        step("kwok-nodes")

        insecure = insecure_context()
        self._wait(
            "kube-scheduler",
            "/healthz",
            lambda: http_ok(f"https://127.0.0.1:{ports.scheduler}/healthz", context=insecure),
        )
        self._wait(
            "kube-controller-manager",
            "/healthz",
            lambda: http_ok(f"https://127.0.0.1:{ports.controller_manager}/healthz", context=insecure),
        )
        # The serviceaccount controller creating `default` proves the controllers run; pods
        # cannot be created in a namespace before its default service account exists.
        self._wait(
            "kube-controller-manager",
            "serviceaccount default/default",
            lambda: api.exists("/api/v1/namespaces/default/serviceaccounts/default"),
        )
        step("controllers")
        if cfg.kueue:
            self._start_kueue(api, ports, pki)
            step("kueue")
        for real in self.nodes:
            real.start(api, ports.apiserver, apiserver_ip=node_host_ip)
            step("real-node" if real.index == 0 else f"real-node-{real.index}")

    def _start_kueue(self, api: RestClient, ports: Ports, pki: Pki) -> None:
        """Kueue's CRDs, webhooks (on loopback, certificate from the cluster CA) and controller."""
        cfg = self.config
        kueue_dir = cfg.state_dir / "kueue"
        cert_dir = ensure_loopback_serving_cert(pki, kueue_dir / "certs")
        config_file = kueue_dir / "config.yaml"
        config_file.write_text(
            yaml.safe_dump(
                kueue.configuration(
                    webhook_port=ports.kueue_webhook, health_port=ports.kueue_health, cert_dir=cert_dir
                )
            )
        )
        definitions = kueue.install(
            api.create, paths.kueue_manifests().read_text(), webhook_port=ports.kueue_webhook, pki=pki
        )
        self._wait(
            "kube-apiserver",
            "Kueue's CRDs to be established",
            lambda: all(_established(api, crd["metadata"]["name"]) for crd in definitions),
        )
        self._launch(
            kueue.KUEUE_COMPONENT,
            kueue.command(
                paths.binary("kueue"),
                config_file=config_file,
                kubeconfig=cfg.component_kubeconfig(kueue.KUEUE_COMPONENT),
            ),
            env=kueue.environment(cert_dir),
        )
        self._wait(
            kueue.KUEUE_COMPONENT,
            "/readyz",
            lambda: http_ok(f"http://127.0.0.1:{ports.kueue_health}/readyz"),
        )

    def _write_kubeconfigs(self, ports: Ports, pki: Pki) -> None:
        server = f"https://127.0.0.1:{ports.apiserver}"
        user_of = {"admin": "hyperframe-admin"} | {
            c: c for c in ("kube-controller-manager", "kube-scheduler", "kwok", kueue.KUEUE_COMPONENT)
        }
        for stem, user in user_of.items():
            text = components.kubeconfig_yaml(
                server, pki.ca_cert, pki.client_cert(stem), pki.client_key(stem), user=user
            )
            target = self.config.kubeconfig if stem == "admin" else self.config.component_kubeconfig(stem)
            target.write_text(text)
            target.chmod(0o600)

    def _launch(self, component: str, command: list[str], env: dict[str, str] | None = None) -> None:
        Supervisor(self.config).launch(component, command, env=env)

    def _wait(self, component: str, what: str, ready: Callable[[], bool]) -> None:
        Supervisor(self.config).wait(component, what, ready)

    def _apiserver_context(self) -> ssl.SSLContext:
        pki = self.pki
        return apiserver_context(pki.ca_cert, pki.client_cert("admin"), pki.client_key("admin"))

    def _apiserver_ready(self, ports: Ports) -> bool:
        return http_ok(f"https://127.0.0.1:{ports.apiserver}/readyz", context=self._apiserver_context())

    def _rest(self, ports: Ports) -> RestClient:
        return RestClient(f"https://127.0.0.1:{ports.apiserver}", self._apiserver_context())

    # --- down -------------------------------------------------------------------------------
    def down(self) -> list[str]:
        """Stop every component of this directory (reverse order); return the ones that ran.

        The real nodes go first and are always cleaned up (also when this run's settings do not
        ask for them), so a cluster started with them never leaves anything behind.
        """
        stopped = [c for node in reversed(self._every_node()) for c in node.stop()]
        supervisor = Supervisor(self.config)
        stopped += [c for c in (kueue.KUEUE_COMPONENT,) if supervisor.stop(c)]
        stopped += [c for c in reversed(COMPONENTS) if supervisor.stop(c)]
        self.config.state_file.unlink(missing_ok=True)
        return stopped


_STAGES_PATH = "/apis/kwok.x-k8s.io/v1alpha1/stages"


def _created(api: RestClient, path: str, obj: dict[str, Any]) -> bool:
    """Create `obj`; False while its API is not served yet (a CRD just became established)."""
    try:
        api.create(path, obj)
    except ApiError as error:
        if error.status == 404:
            return False
        raise
    return True


def _established(api: RestClient, crd: str) -> bool:
    conditions = api.get(f"{kueue.CRD_PATH}/{crd}").get("status", {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def _ready_nodes(api: RestClient) -> int:
    nodes = api.get("/api/v1/nodes")["items"]
    return sum(
        1
        for node in nodes
        for condition in node.get("status", {}).get("conditions", [])
        if condition["type"] == "Ready" and condition["status"] == "True"
    )


class _Stopwatch:
    def __init__(self, report: UpReport) -> None:
        self._report = report
        self._last = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        self._report.steps[name] = now - self._last
        self._last = now
