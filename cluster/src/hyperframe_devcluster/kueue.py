"""Kueue on the local cluster (opt-in: `ClusterConfig.kueue`, `HYPERFRAME_CLUSTER_KUEUE=1`).

The pinned Kueue controller runs as a host process beside the control plane, like the other
components:
- its CRDs come from the pinned module (`config/components/crd/bases`, copied by build.sh);
- it authenticates with a client certificate of the cluster CA (`kueue`, see pki.CLIENTS);
- its webhook server listens on 127.0.0.1 with a serving certificate signed by the cluster CA,
  and the module's webhook configurations are installed with `clientConfig.url` pointing there
  and `caBundle` = the CA. Only the webhooks of the enabled integration (plain pods) and of
  Kueue's own kinds are installed: a webhook whose handler is not registered would fail every
  request it matches. The pod webhooks only see pods labelled with a queue name;
- the Configuration enables the `pod` integration: HyperFrame renders a job with
  `spec.queueName` as a Kueue plain pod group (docs/operator.md says why).

The functions building objects are pure; `install` and `start` act on the cluster.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import yaml

from .pki import Pki

__all__ = [
    "CRD_PATH",
    "KUEUE_COMPONENT",
    "NAMESPACE",
    "POD_FRAMEWORK",
    "QUEUE_NAME_LABEL",
    "command",
    "configuration",
    "crds",
    "install",
    "webhook_configurations",
]

KUEUE_COMPONENT: Final = "kueue"
NAMESPACE: Final = "kueue-system"
POD_FRAMEWORK: Final = "pod"
QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
CRD_PATH: Final = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_POD_PATHS: Final = ("/mutate--v1-pod", "/validate--v1-pod")
_OWN_KINDS_PATH: Final = "-kueue-x-k8s-io-"
_UNMANAGED_NAMESPACES: Final = ["kube-system", NAMESPACE]
_WEBHOOK_PATHS: Final = {
    "MutatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}


def _documents(manifests: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(manifests) if isinstance(doc, dict)]


def crds(manifests: str) -> list[dict[str, Any]]:
    """Kueue's CustomResourceDefinitions, from the manifests file build.sh copied."""
    return [doc for doc in _documents(manifests) if doc.get("kind") == "CustomResourceDefinition"]


def _unmanaged_namespaces() -> dict[str, Any]:
    key = "kubernetes.io/metadata.name"
    return {"matchExpressions": [{"key": key, "operator": "NotIn", "values": _UNMANAGED_NAMESPACES}]}


def webhook_configurations(manifests: str, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """The module's webhook configurations, served on https://127.0.0.1:<port>, trusting `ca_pem`.

    Kept: the pod webhooks (only for pods with a queue-name label, outside kube-system and
    kueue-system, as Kueue's kustomization patches them) and those of Kueue's own kinds.
    """
    ca_bundle = base64.b64encode(ca_pem).decode()
    configurations = []
    for doc in _documents(manifests):
        if doc.get("kind") not in _WEBHOOK_PATHS:
            continue
        webhooks = []
        for hook in doc.get("webhooks", []):
            path = hook["clientConfig"]["service"]["path"]
            if path not in _POD_PATHS and _OWN_KINDS_PATH not in path:
                continue
            hook = {**hook, "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}}
            if path in _POD_PATHS:
                hook["namespaceSelector"] = _unmanaged_namespaces()
                hook["objectSelector"] = {
                    "matchExpressions": [{"key": QUEUE_NAME_LABEL, "operator": "Exists"}]
                }
            webhooks.append(hook)
        configurations.append(
            {**doc, "metadata": {"name": f"kueue-{doc['metadata']['name']}"}, "webhooks": webhooks}
        )
    return configurations


def configuration(*, webhook_port: int, health_port: int, cert_dir: Path) -> dict[str, Any]:
    """Kueue's Configuration: loopback ports, no leader election, no internal cert management,
    the plain-pod integration, and the default managed-namespace selector."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": _unmanaged_namespaces(),
        "integrations": {"frameworks": [POD_FRAMEWORK]},
    }


def command(binary: Path, *, config_file: Path, kubeconfig: Path) -> list[str]:
    """The controller's command line (its environment is `environment`)."""
    return [
        str(binary),
        f"--config={config_file}",
        f"--kubeconfig={kubeconfig}",
        # The on-demand visibility API server would need the cluster's delegated authentication
        # set-up of an aggregated API server; nothing here uses it.
        "--feature-gates=VisibilityOnDemand=false",
        "--zap-log-level=2",
    ]


def environment(cert_dir: Path) -> dict[str, str]:
    """The controller's extra environment: `cert_dir` also serves the metrics endpoint's
    certificate (read from $KUEUE_METRICS_CERT_DIR by the binary cluster/build.sh builds)."""
    return {"KUEUE_METRICS_CERT_DIR": str(cert_dir)}


def install(
    create: Callable[[str, dict[str, Any]], None],
    manifests: str,
    *,
    webhook_port: int,
    pki: Pki,
) -> list[dict[str, Any]]:
    """Create Kueue's namespace, CRDs and webhook configurations; return the CRDs created."""
    create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    definitions = crds(manifests)
    for crd in definitions:
        create(CRD_PATH, crd)
    for webhook in webhook_configurations(manifests, webhook_port, pki.ca_cert.read_bytes()):
        create(_WEBHOOK_PATHS[webhook["kind"]], webhook)
    return definitions
