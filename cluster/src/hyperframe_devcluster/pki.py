"""Certificates and keys of the local cluster, made with the `openssl` command line tool.

One CA signs everything: the kube-apiserver serving certificate and one client certificate per
component. The admin client certificate is in group `system:masters`, so the kubeconfig built
from it works with `kubectl` and `helm` as is. Controller-manager and scheduler use the user
names that the RBAC bootstrap policy already binds (`system:kube-controller-manager`,
`system:kube-scheduler`), so RBAC is really exercised. EC P-256 keys keep generation fast.
Existing files are kept, so a restarted cluster keeps its identity.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["CLIENTS", "ClientIdentity", "Pki", "ensure_loopback_serving_cert", "ensure_pki"]


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """A client certificate subject: CN is the user name, O the groups."""

    file_stem: str
    user: str
    group: str | None = None


CLIENTS: Final = (
    ClientIdentity("admin", "hyperframe-admin", "system:masters"),
    ClientIdentity("kube-controller-manager", "system:kube-controller-manager"),
    ClientIdentity("kube-scheduler", "system:kube-scheduler"),
    # kwok patches node and pod status and renews node leases like a kubelet fleet would; it
    # also reads the Stage objects. It is trusted like the admin.
    ClientIdentity("kwok", "kwok-controller", "system:masters"),
    # The real node: the kubelet as the node's own identity (NodeRestriction applies), kube-proxy
    # and CoreDNS with the users the bootstrap policy or the cluster's own RBAC binds, and the
    # apiserver's client identity towards the kubelet (logs, exec).
    ClientIdentity("kubelet", "system:node:hf-real-0", "system:nodes"),
    *(ClientIdentity(f"kubelet-{i}", f"system:node:hf-real-{i}", "system:nodes") for i in range(1, 4)),
    ClientIdentity("kube-proxy", "system:kube-proxy"),
    ClientIdentity("coredns", "system:coredns"),
    ClientIdentity("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"),
    # Kueue (opt-in) manages pods, workloads and its own kinds in every namespace; trusted like
    # the admin rather than replicating its generated ClusterRole.
    ClientIdentity("kueue", "kueue-controller", "system:masters"),
)

_DAYS = "3650"


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of the generated material, all under `<state>/pki/`."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def apiserver_cert(self) -> Path:
        return self.root / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.root / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        """Service-account token signing key (private)."""
        return self.root / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.root / "sa.pub"

    def client_cert(self, stem: str) -> Path:
        return self.root / f"{stem}.crt"

    def client_key(self, stem: str) -> Path:
        return self.root / f"{stem}.key"


def _openssl(*args: str) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise RuntimeError(
            "the `openssl` command is needed to create the cluster certificates; install openssl"
        )
    result = subprocess.run([exe, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {result.stderr.strip()}")


def _ec_key(path: Path) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(path))
    path.chmod(0o600)


def _signed_cert(pki: Pki, key: Path, cert: Path, subject: str, extensions: str) -> None:
    csr = cert.with_suffix(".csr")
    ext = cert.with_suffix(".ext")
    ext.write_text(extensions)
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key),
        "-CAcreateserial", "-days", _DAYS, "-sha256", "-extfile", str(ext), "-out", str(cert),
    )  # fmt: skip
    csr.unlink()
    ext.unlink()


def apiserver_sans(service_ip: str, extra_ips: tuple[str, ...] = ()) -> list[str]:
    """Subject alternative names of the apiserver certificate (loopback, in-cluster names, node side)."""
    names = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
    names.append("kubernetes.default.svc.cluster.local")
    ips = ["127.0.0.1", str(ipaddress.ip_address(service_ip))]
    ips += [str(ipaddress.ip_address(ip)) for ip in extra_ips]
    return [f"DNS:{n}" for n in names] + [f"IP:{ip}" for ip in ips]


def ensure_pki(root: Path, service_ip: str, extra_ips: tuple[str, ...] = ()) -> Pki:
    """Create whatever part of the PKI is missing under `root`; return its paths.

    The apiserver certificate is made again when its names change (the real node's veth
    address is picked at each `up`); `<root>/apiserver.sans` records the names it holds.
    """
    root.mkdir(parents=True, exist_ok=True)
    pki = Pki(root)
    if not pki.ca_cert.exists():
        _ec_key(pki.ca_key)
        _openssl(
            "req", "-x509", "-new", "-key", str(pki.ca_key), "-subj", "/CN=hyperframe-local-ca",
            "-days", _DAYS, "-sha256", "-out", str(pki.ca_cert),
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        )  # fmt: skip
    sans = ",".join(apiserver_sans(service_ip, extra_ips))
    sans_file = root / "apiserver.sans"
    recorded = sans_file.read_text() if sans_file.exists() else ""
    if not pki.apiserver_cert.exists() or recorded != sans:
        _ec_key(pki.apiserver_key)
        _signed_cert(
            pki, pki.apiserver_key, pki.apiserver_cert, "/CN=kube-apiserver",
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            f"subjectAltName={sans}\n",
        )  # fmt: skip
        sans_file.write_text(sans)
    for client in CLIENTS:
        cert = pki.client_cert(client.file_stem)
        if cert.exists():
            continue
        key = pki.client_key(client.file_stem)
        _ec_key(key)
        subject = f"/CN={client.user}" + (f"/O={client.group}" if client.group else "")
        _signed_cert(
            pki, key, cert, subject,
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=clientAuth\n",
        )  # fmt: skip
    if not pki.sa_pub.exists():
        _ec_key(pki.sa_key)
        _openssl("ec", "-in", str(pki.sa_key), "-pubout", "-out", str(pki.sa_pub))
    return pki


def ensure_loopback_serving_cert(pki: Pki, directory: Path) -> Path:
    """`tls.crt`/`tls.key` in `directory`: a serving certificate for 127.0.0.1 signed by the CA
    (the layout controller-runtime webhook servers read); kept if present. Returns `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "tls.crt", directory / "tls.key"
    if not cert.exists():
        _ec_key(key)
        _signed_cert(
            pki, key, cert, "/CN=127.0.0.1",
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )  # fmt: skip
    return directory
