"""The chart's generated files match their single sources (crds/, rbac.py, the pin matrix)."""

from __future__ import annotations

import pytest
from chart_helpers import CHART, load_generator


def test_generated_files_are_up_to_date() -> None:
    generator = load_generator()
    diffs = generator.drift(generator.generate_all())
    assert not diffs, "run `python charts/hyperframe-operator/hack/generate.py`:\n" + "".join(diffs)


def test_every_project_crd_becomes_a_switched_template() -> None:
    generator = load_generator()
    for crd, _source in generator.project_crds():
        template = (CHART / "templates" / "crds" / f"{crd['metadata']['name']}.yaml").read_text()
        assert template.startswith("{{- if .Values.crds.enabled }}\n")
        assert "helm.sh/resource-policy: keep" in template


def test_escape_keeps_template_delimiters_literal() -> None:
    generator = load_generator()
    assert generator.escape_template("a {{ b }} c") == 'a {{ "{{" }} b }} c'


def test_unknown_resource_scope_stops_the_generator() -> None:
    rbac_source = load_generator().rbac_source
    with pytest.raises(
        SystemExit, match=r"'secrets' has no known scope.*CLUSTER_SCOPED, NAMESPACED or OPERATOR_NAMESPACE"
    ):
        rbac_source.scope_of("secrets")
    assert rbac_source.scope_of("pods") == "Namespaced"
    assert rbac_source.scope_of("hyperframejobs/status") == "Namespaced"
    assert rbac_source.scope_of("nodes") == "Cluster"
