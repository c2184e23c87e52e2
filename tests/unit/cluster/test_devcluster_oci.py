"""OCI images made from local files (the real node's pause image and the test images).

Covers: a file layer is reproducible (same bytes, same digest), the config lists every layer's
diff id, the manifest references the config and layers by digest and size, and the manifest
digest is what a pod pins.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

from hyperframe_devcluster import oci


def test_a_file_layer_is_reproducible_and_holds_the_files_with_their_modes(tmp_path: Path) -> None:
    files = {"/pause": (b"\x7fELF...", 0o755)}
    first = oci.file_layer(tmp_path / "a.tar", files)
    second = oci.file_layer(tmp_path / "b.tar", files)

    assert first.digest == second.digest
    assert first.digest == "sha256:" + hashlib.sha256((tmp_path / "a.tar").read_bytes()).hexdigest()
    with tarfile.open(tmp_path / "a.tar") as tar:
        member = tar.getmember("pause")
        assert member.mode == 0o755
        assert member.mtime == 0


def test_the_manifest_pins_config_and_layers_and_its_digest_is_the_image_digest(tmp_path: Path) -> None:
    layer = oci.file_layer(tmp_path / "l.tar", {"/hello": (b"hi", 0o644)})
    image = oci.OciImage(layers=[layer], entrypoint=["/hello"], user="65535:65535", labels={"a": "b"})

    config = json.loads(image.config_bytes())
    manifest = json.loads(image.manifest_bytes())

    assert config["rootfs"]["diff_ids"] == [layer.digest]
    assert config["config"]["User"] == "65535:65535"
    assert config["config"]["Labels"] == {"a": "b"}
    assert manifest["config"]["digest"] == "sha256:" + hashlib.sha256(image.config_bytes()).hexdigest()
    assert manifest["layers"] == [
        {"mediaType": oci.LAYER_MEDIA_TYPE, "digest": layer.digest, "size": layer.size}
    ]
    assert image.digest == "sha256:" + hashlib.sha256(image.manifest_bytes()).hexdigest()
