"""The cluster PKI made with the openssl CLI: one CA, a serving cert, per-component client certs.

Covers: the chain verifies, the admin certificate is in group system:masters (so kubectl works
as is), controller-manager/scheduler use the identities RBAC bootstrap binds, the apiserver
certificate names loopback and the in-cluster service, and existing material is kept.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hyperframe_devcluster.pki import ensure_pki


def openssl(*args: str) -> str:
    return subprocess.run(["openssl", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pki")
    ensure_pki(root, "10.96.0.1")
    return root


def subject(cert: Path) -> str:
    return openssl("x509", "-in", str(cert), "-noout", "-subject", "-nameopt", "compat")


@pytest.mark.parametrize("stem", ["apiserver", "admin", "kube-controller-manager", "kube-scheduler", "kwok"])
def test_every_certificate_verifies_against_the_ca(pki_dir: Path, stem: str) -> None:
    out = openssl("verify", "-CAfile", str(pki_dir / "ca.crt"), str(pki_dir / f"{stem}.crt"))
    assert out.strip().endswith(": OK")


def test_client_identities(pki_dir: Path) -> None:
    assert "O=system:masters" in subject(pki_dir / "admin.crt")
    assert "CN=system:kube-controller-manager" in subject(pki_dir / "kube-controller-manager.crt")
    assert "CN=system:kube-scheduler" in subject(pki_dir / "kube-scheduler.crt")


def test_apiserver_certificate_names_loopback_and_the_kubernetes_service(pki_dir: Path) -> None:
    text = openssl(
        "x509", "-in", str(pki_dir / "apiserver.crt"), "-noout", "-ext", "subjectAltName,extendedKeyUsage"
    )

    for name in (
        "DNS:localhost",
        "DNS:kubernetes.default.svc",
        "IP Address:127.0.0.1",
        "IP Address:10.96.0.1",
    ):
        assert name in text
    assert "TLS Web Server Authentication" in text


def test_existing_material_is_kept(pki_dir: Path) -> None:
    before = (pki_dir / "ca.crt").read_bytes(), (pki_dir / "sa.key").read_bytes()
    ensure_pki(pki_dir, "10.96.0.1")
    assert ((pki_dir / "ca.crt").read_bytes(), (pki_dir / "sa.key").read_bytes()) == before
