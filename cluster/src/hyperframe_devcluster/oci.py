"""Small OCI images made from files on this machine, pushed to the local registry by digest.

The real node needs images that cannot be pulled from anywhere: its pod sandbox (`pause`) and
the images tests build from a debootstrap root filesystem. An image here is one or more
uncompressed layer tarballs plus an OCI image config; pushing uses the registry's HTTP API
(blob uploads, then the manifest) and returns the manifest digest that pods pin.
Uncompressed layers skip gzip on a 2-core machine; containerd and the registry take them as is.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = ["Layer", "OciImage", "file_layer", "push", "tar_layer"]

LAYER_MEDIA_TYPE: Final = "application/vnd.oci.image.layer.v1.tar"
CONFIG_MEDIA_TYPE: Final = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE: Final = "application/vnd.oci.image.manifest.v1+json"
_CHUNK: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Layer:
    """An uncompressed layer tarball on disk, with its digest and size."""

    path: Path
    digest: str
    size: int


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def tar_layer(path: Path) -> Layer:
    """A layer from an existing uncompressed tarball (for example a debootstrap root filesystem)."""
    return Layer(path=path, digest=_sha256_file(path), size=path.stat().st_size)


def file_layer(target: Path, files: Mapping[str, tuple[bytes, int]]) -> Layer:
    """Write a layer holding `files` ({path in image: (content, mode)}) to `target`, reproducibly."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            content, mode = files[name]
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size = len(content)
            info.mode = mode
            info.mtime = 0
            tar.addfile(info, io.BytesIO(content))
    target.write_bytes(buffer.getvalue())
    return tar_layer(target)


@dataclass(frozen=True, slots=True)
class OciImage:
    """Layers plus the runtime settings of the image config."""

    layers: Sequence[Layer]
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Sequence[str] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
    user: str = ""
    workdir: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    def config_bytes(self) -> bytes:
        runtime: dict[str, Any] = {"Env": list(self.env)}
        if self.entrypoint:
            runtime["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            runtime["Cmd"] = list(self.cmd)
        if self.user:
            runtime["User"] = self.user
        if self.workdir:
            runtime["WorkingDir"] = self.workdir
        if self.labels:
            runtime["Labels"] = dict(self.labels)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": runtime,
            "rootfs": {"type": "layers", "diff_ids": [layer.digest for layer in self.layers]},
        }
        return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()

    def manifest_bytes(self) -> bytes:
        config = self.config_bytes()
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {
                "mediaType": CONFIG_MEDIA_TYPE,
                "digest": f"sha256:{hashlib.sha256(config).hexdigest()}",
                "size": len(config),
            },
            "layers": [
                {"mediaType": LAYER_MEDIA_TYPE, "digest": layer.digest, "size": layer.size}
                for layer in self.layers
            ],
        }
        return json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()

    @property
    def digest(self) -> str:
        """The manifest digest: what a pod pins as `image@sha256:...`."""
        return f"sha256:{hashlib.sha256(self.manifest_bytes()).hexdigest()}"


class RegistryError(RuntimeError):
    """The registry refused a push step (the message carries its answer)."""


def _request(method: str, url: str, data: Any = None, headers: Mapping[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    try:
        return urllib.request.urlopen(request, timeout=300)
    except urllib.error.HTTPError as error:
        if method == "HEAD" and error.code == 404:
            return None
        body = error.read().decode(errors="replace")[:500]
        raise RegistryError(f"{method} {url}: HTTP {error.code}: {body}") from None


def _push_blob(base: str, repo: str, digest: str, size: int, body: Any) -> None:
    if _request("HEAD", f"{base}/v2/{repo}/blobs/{digest}") is not None:
        return
    with _request("POST", f"{base}/v2/{repo}/blobs/uploads/", data=b"") as started:
        location = started.headers["Location"]
    if location.startswith("/"):
        location = base + location
    separator = "&" if "?" in location else "?"
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
    with _request("PUT", f"{location}{separator}digest={digest}", data=body, headers=headers):
        pass


def push(registry: str, repo: str, tag: str, image: OciImage) -> str:
    """Push `image` to `registry` (host:port, plain HTTP) as `repo:tag`; return the manifest digest."""
    base = f"http://{registry}"
    for layer in image.layers:
        with layer.path.open("rb") as handle:
            _push_blob(base, repo, layer.digest, layer.size, handle)
    config = image.config_bytes()
    _push_blob(base, repo, f"sha256:{hashlib.sha256(config).hexdigest()}", len(config), config)
    manifest = image.manifest_bytes()
    headers = {"Content-Type": MANIFEST_MEDIA_TYPE}
    with _request("PUT", f"{base}/v2/{repo}/manifests/{tag}", data=manifest, headers=headers) as answer:
        pushed = str(answer.headers.get("Docker-Content-Digest", ""))
    if pushed and pushed != image.digest:
        raise RegistryError(f"{registry}/{repo}:{tag}: the registry stored {pushed}, expected {image.digest}")
    return image.digest
