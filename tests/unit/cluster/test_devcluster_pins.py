"""cluster/versions.env is the single source of the control-plane versions.

Covers: parsing the pins, the generated wrapper go.mod files agreeing with them, the binary
cache location agreeing between build.sh and hyperframe_devcluster.paths, and the error that
names `make cluster-build` when a binary is missing.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hyperframe_devcluster import paths

GOMOD = paths.repo_root() / "cluster" / "gomod"


def test_every_pin_is_read_from_versions_env() -> None:
    values = paths.parse_versions(paths.versions_file().read_text())
    pins = paths.pins()

    assert values["KUBERNETES_VERSION"] == pins.kubernetes
    assert values["ETCD_VERSION"] == pins.etcd
    assert values["KWOK_VERSION"] == pins.kwok
    assert values["HELM_VERSION"] == pins.helm
    assert values["COREDNS_VERSION"] == pins.coredns
    assert values["BUILDKIT_VERSION"] == pins.buildkit
    assert values["BUILDX_VERSION"] == pins.buildx
    assert values["KUEUE_VERSION"] == pins.kueue
    for version in (
        pins.kubernetes,
        pins.etcd,
        pins.kwok,
        pins.helm,
        pins.coredns,
        pins.buildkit,
        pins.buildx,
        pins.kueue,
    ):
        assert re.fullmatch(r"v\d+\.\d+\.\d+", version), version


def _replace_targets(gomod: str) -> dict[str, str]:
    return dict(re.findall(r"^\s+(\S+) => \1 (v\S+)$", gomod, flags=re.MULTILINE))


def test_kubernetes_wrapper_requires_the_pin_and_replaces_every_staging_module_with_its_match() -> None:
    gomod = (GOMOD / "kubernetes" / "go.mod").read_text()
    pins = paths.pins()
    staging = "v0." + pins.kubernetes.removeprefix("v1.")

    assert f"\nrequire k8s.io/kubernetes {pins.kubernetes}\n" in gomod
    replaces = _replace_targets(gomod)
    assert {"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/kubectl"} <= set(replaces)
    assert set(replaces.values()) == {staging}


def test_etcd_wrapper_requires_the_pin_and_pins_its_sibling_modules() -> None:
    gomod = (GOMOD / "etcd" / "go.mod").read_text()
    etcd = paths.pins().etcd

    assert f"\nrequire go.etcd.io/etcd/server/v3 {etcd}\n" in gomod
    replaces = _replace_targets(gomod)
    assert {"go.etcd.io/etcd/api/v3", "go.etcd.io/etcd/client/v3"} <= set(replaces)
    assert set(replaces.values()) == {etcd}


def _build_sh_bin_dir(env: dict[str, str]) -> str:
    script = paths.repo_root() / "cluster" / "build.sh"
    result = subprocess.run(
        ["bash", str(script), "--print-bin-dir"], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


@pytest.mark.parametrize("explicit", [True, False])
def test_build_sh_and_python_agree_on_the_binary_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, explicit: bool
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if explicit:
        monkeypatch.setenv(paths.ENV_BIN_CACHE, str(tmp_path / "bins"))
    else:
        monkeypatch.delenv(paths.ENV_BIN_CACHE, raising=False)

    assert _build_sh_bin_dir(dict(os.environ)) == str(paths.bin_dir())


def test_a_missing_binary_names_the_build_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(paths.ENV_BIN_CACHE, str(tmp_path))

    with pytest.raises(
        paths.BinaryMissingError, match=r"kubectl v1\.\d+\.\d+ is not built .* run `make cluster-build`"
    ):
        paths.kubectl()
    assert set(paths.missing_binaries()) >= set(paths.BINARIES)
    assert f"kueue-{paths.pins().kueue}-manifests.yaml" in paths.missing_binaries()
    with pytest.raises(
        paths.BinaryMissingError, match=r"Kueue's manifests are missing .* `make cluster-build`"
    ):
        paths.kueue_manifests()


def test_build_sh_builds_kueue_at_its_pin_and_copies_its_manifests() -> None:
    script = (paths.repo_root() / "cluster" / "build.sh").read_text()

    assert paths.BINARIES["kueue"] == "KUEUE_VERSION"
    assert 'KUEUE="$(pin KUEUE_VERSION)"' in script
    assert '"kueue-$KUEUE-manifests.yaml"' in script
    gomod = (GOMOD / "kueue" / "go.mod").read_text()
    assert f"\nrequire sigs.k8s.io/kueue {paths.pins().kueue}\n" in gomod
