"""The core/v1 schema render checks pods against is the pinned API server's own (no drift).

hyperframe/render/core_v1_schema.json is generated once from the local API server; this test
generates it again from the running one and requires the same bytes, so a new pinned Kubernetes
version (cluster/versions.env) cannot leave render checking against the old schema.
"""

from __future__ import annotations

import json

import pytest
from hyperframe.render.core_v1 import SCHEMA_FILE, render_file
from hyperframe_devcluster import Kubectl

pytestmark = pytest.mark.cluster


def test_the_kept_schema_is_the_api_servers(kubectl: Kubectl) -> None:
    openapi = json.loads(kubectl.run("get", "--raw", "/openapi/v3/api/v1").stdout)
    version = kubectl.json("version")["serverVersion"]["gitVersion"]
    expected = render_file(openapi, version)
    assert SCHEMA_FILE.read_text(encoding="utf-8") == expected, (
        "core_v1_schema.json drifted from the API server: regenerate it with "
        "`kubectl get --raw /openapi/v3/api/v1 > /tmp/core-v1.json && "
        f"python -m hyperframe.render.core_v1 /tmp/core-v1.json --version {version}`"
    )
    assert json.loads(expected)["kubernetesVersion"] == version
