"""Kueue on the dev cluster: the objects and settings built from the pinned module's manifests.

Covers: which webhooks are installed (pods and Kueue's own kinds only, pods only with a queue
name), that they point at the loopback URL with the cluster CA, the Configuration, and the
HYPERFRAME_CLUSTER_KUEUE setting.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from hyperframe_devcluster import kueue
from hyperframe_devcluster.config import ENV_KUEUE, ClusterConfig


def _hook(name: str, path: str) -> dict[str, object]:
    return {
        "name": name,
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "failurePolicy": "Fail",
        "rules": [],
    }


MANIFESTS = yaml.safe_dump_all(
    [
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "a"},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                _hook("mjob.kb.io", "/mutate-batch-v1-job"),
                _hook("mpod.kb.io", "/mutate--v1-pod"),
                _hook("mworkload.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-workload"),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [
                _hook("vpod.kb.io", "/validate--v1-pod"),
                _hook("vjobset.kb.io", "/validate-jobset-x-k8s-io-v1alpha2-jobset"),
            ],
        },
    ]
)


def test_only_pod_and_kueue_webhooks_are_installed_on_the_loopback_url_trusting_the_ca() -> None:
    configs = kueue.webhook_configurations(MANIFESTS, 9443, b"CA PEM")

    hooks = {h["name"]: h for c in configs for h in c["webhooks"]}
    assert set(hooks) == {"mpod.kb.io", "mworkload.kb.io", "vpod.kb.io"}
    assert hooks["mpod.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate--v1-pod",
        "caBundle": base64.b64encode(b"CA PEM").decode(),
    }
    for name in ("mpod.kb.io", "vpod.kb.io"):
        selector = hooks[name]["objectSelector"]["matchExpressions"]
        assert selector == [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
        assert "kube-system" in hooks[name]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert "objectSelector" not in hooks["mworkload.kb.io"]
    assert [c["metadata"]["name"] for c in configs] == [
        "kueue-mutating-webhook-configuration",
        "kueue-validating-webhook-configuration",
    ]
    assert [c["metadata"]["name"] for c in kueue.crds(MANIFESTS)] == ["a"]


def test_configuration_enables_the_pod_integration_on_loopback_without_leader_election() -> None:
    config = kueue.configuration(webhook_port=1, health_port=2, cert_dir=Path("/certs"))

    assert config["integrations"] == {"frameworks": ["pod"]}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": "/certs"}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:2"
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["manageJobsWithoutQueueName"] is False


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("0", False), ("yes", True)])
def test_kueue_is_opt_in_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool
) -> None:
    monkeypatch.delenv(ENV_KUEUE, raising=False)
    assert ClusterConfig.from_env(tmp_path).kueue is False
    monkeypatch.setenv(ENV_KUEUE, raw)
    assert ClusterConfig.from_env(tmp_path).kueue is expected


def test_a_bad_kueue_setting_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KUEUE, "maybe")
    with pytest.raises(ValueError, match="HYPERFRAME_CLUSTER_KUEUE='maybe': expected 1 or 0"):
        ClusterConfig.from_env(tmp_path)
