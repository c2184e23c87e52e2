"""The CEL evaluator of hyperframe.api.cel against the real API server's CEL.

One probe CRD has a property per probe. A verdict probe is a rule that the server and
``hyperframe.api.schema_rules.check_rules`` must both pass or both fail; a message probe is a
failing rule whose ``messageExpression`` both must evaluate to the same text. Together they pin
the Kubernetes extensions the evaluator adds (``format``, the strings and lists libraries) and
the typing of values by the schema (an integer written for a ``number``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from hyperframe.api.cel import evaluate
from hyperframe.api.schema_rules import check_rules, prepare
from hyperframe_devcluster import Kubectl
from server_verdict import server_errors

pytestmark = pytest.mark.cluster

GROUP: Final = "probes.hyperframe.dev"

# (schema type, value, rule): the rule's verdict on the value.
VERDICTS: Final[list[tuple[str, Any, str]]] = [
    ("number", 1, "self > 0.5"),
    ("number", 0, "self > 0.0"),
    ("integer", 3, "self % 2 == 1"),
    ("string", "Hello", "self.lowerAscii() == 'hello'"),
    ("string", "Hello", "self.upperAscii() == 'HELLO'"),
    ("string", "abc", "self.charAt(1) == 'b'"),
    ("string", "hello", "self.substring(1, 3) == 'el'"),
    ("string", "  x ", "self.trim() == 'x'"),
    ("string", "aXa", "self.replace('X', 'y') == 'aya'"),
    ("string", "a,b", "self.split(',') == ['a', 'b']"),
    ("string", "abcabc", "self.indexOf('c') == 2 && self.lastIndexOf('c') == 5"),
    ("string", "abc123", "self.find('[0-9]+') == '123'"),
    ("string", "a1b22", "self.findAll('[0-9]+') == ['1', '22']"),
    ("string", "abc", "self.matches('^a[a-z]+$')"),
    ("string", "abc", "self.startsWith('b')"),
    ("array", [1, 2, 3], "self.isSorted()"),
    ("array", [3, 1, 2], "self.isSorted()"),
    ("array", [3, 1, 2], "self.indexOf(1) == 1 && self.lastIndexOf(3) == 0"),
    ("array", [3, 1, 2], "self.sum() == 6 && self.min() == 1 && self.max() == 3"),
    ("array", [3, 1, 2], "self.all(x, x > 1)"),
    ("array", [3, 1, 2], "self.exists(x, x == 2) && self.exists_one(x, x == 3)"),
    ("strings", ["a", "b"], "self.join('-') == 'a-b'"),
    ("object", {"a": 1}, "has(self.a) && !has(self.b)"),
    ("map", {"a": 1, "b": 2}, "size(self) == 2 && 'a' in self"),
]

# (schema type, value, messageExpression): both must print the same text.
MESSAGES: Final[list[tuple[str, Any, str]]] = [
    ("integer", 3, "'%d of %s'.format([self, 'x'])"),
    ("integer", 255, "'%x %X %o %b'.format([self, self, self, self])"),
    ("number", 0.001, "string(self)"),
    ("number", 0.001, "'%s'.format([self])"),
    ("number", 1.5, "'%.2f %e'.format([self, self])"),
    ("number", 1, "'%s'.format([self])"),
    ("number", 0.00123, "'%e %.1e'.format([self, self])"),
    ("number", 12345678.0, "'%e %s'.format([self, self])"),
    ("number", 1e-7, "'%s'.format([self])"),
    ("number", 123456.0, "'%s'.format([self])"),
    ("number", 1234567.0, "'%s'.format([self])"),
    ("array", [1, 2], "'%s'.format([self])"),
    ("string", "x", "'%s and %s'.format([true, self])"),
    ("string", "x", "'100%% %s'.format([self])"),
]


def _schema(kind: str) -> dict[str, Any]:
    # Bounds keep the server's cost estimate of each rule within its budget.
    if kind == "array":
        return {"type": "array", "maxItems": 8, "items": {"type": "integer"}}
    if kind == "strings":
        return {"type": "array", "maxItems": 8, "items": {"type": "string", "maxLength": 8}}
    if kind == "object":
        return {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    if kind == "map":
        return {"type": "object", "maxProperties": 8, "additionalProperties": {"type": "integer"}}
    if kind == "string":
        return {"type": "string", "maxLength": 16}
    return {"type": kind}


def _probe_schema() -> dict[str, Any]:
    props: dict[str, Any] = {}
    for i, (kind, _value, rule) in enumerate(VERDICTS):
        props[f"v{i}"] = {**_schema(kind), "x-kubernetes-validations": [{"rule": rule, "message": "false"}]}
    for i, (kind, _value, expression) in enumerate(MESSAGES):
        props[f"m{i}"] = {
            **_schema(kind),
            "x-kubernetes-validations": [{"rule": "false", "messageExpression": expression}],
        }
    return {"type": "object", "properties": props}


def _probe_values() -> dict[str, Any]:
    values = {f"v{i}": value for i, (_k, value, _r) in enumerate(VERDICTS)}
    values.update({f"m{i}": value for i, (_k, value, _e) in enumerate(MESSAGES)})
    return values


@pytest.fixture(scope="module")
def probe_crd(kubectl: Kubectl) -> Iterator[str]:
    plural = f"p{secrets.token_hex(3)}"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": f"Probe{plural}",
                "plural": plural,
                "singular": plural,
                "listKind": f"P{plural}List",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": _probe_schema(),
                            },
                        }
                    },
                }
            ],
        },
    }
    kubectl.run("apply", "-f", "-", input=json.dumps(crd))
    kubectl.run("wait", "--for=condition=Established", f"crd/{plural}.{GROUP}", "--timeout=60s")
    yield plural
    kubectl.run("delete", "crd", f"{plural}.{GROUP}", "--wait=false", check=False)


def _server_causes(kubeconfig: Path, plural: str, namespace: str) -> list[tuple[str, str]]:
    obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": f"Probe{plural}",
        "metadata": {"name": "probe"},
        "spec": _probe_values(),
    }
    return server_errors(kubeconfig, f"/apis/{GROUP}/v1/namespaces/{namespace}/{plural}", obj)


def test_verdicts_match_the_api_server(kubeconfig: Path, probe_crd: str, namespace: str) -> None:
    schema = _probe_schema()
    local = {e.path for e in check_rules(schema, prepare(schema, _probe_values()), "spec")}
    server = {path for path, _message in _server_causes(kubeconfig, probe_crd, namespace)}
    verdict_paths = {f"spec.v{i}" for i in range(len(VERDICTS))}
    assert local & verdict_paths == server & verdict_paths
    # Both verdicts are exercised.
    assert verdict_paths - server and verdict_paths & server


def test_messages_match_the_api_server(kubeconfig: Path, probe_crd: str, namespace: str) -> None:
    server = dict(_server_causes(kubeconfig, probe_crd, namespace))
    schema = _probe_schema()["properties"]
    values = _probe_values()
    differ = []
    for i, (_kind, _value, expression) in enumerate(MESSAGES):
        text = evaluate(expression, {"self": prepare(schema[f"m{i}"], values[f"m{i}"])})
        # The server's message is "Invalid value: <value>: <text>".
        if not server[f"spec.m{i}"].endswith(f": {text}"):
            differ.append(f"{expression}: here {text!r}, server {server[f'spec.m{i}']!r}")
    assert not differ, "\n".join(differ)
