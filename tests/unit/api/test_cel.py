"""The CEL evaluator and the schema-rule walker, without a cluster.

The expected texts are the real API server's (tests/integration/test_cel_parity.py asks it).
"""

from __future__ import annotations

from typing import Any

import pytest
from hyperframe.api.cel import CelError, compile_expression, evaluate, format_string
from hyperframe.api.errors import FieldError
from hyperframe.api.schema_rules import check_rules, prepare


@pytest.mark.parametrize(
    ("template", "args", "text"),
    [
        ("%d of %s", [3, "x"], "3 of x"),
        ("%x %X %o %b", [255, 255, 255, 255], "ff FF 377 11111111"),
        ("%s", [0.001], "0.001"),
        ("%.2f %e", [1.5, 1.5], "1.50 1.500000\u00d710⁰⁰"),
        ("%e %.1e", [0.00123, 0.00123], "1.230000\u00d710⁻⁰³ 1.230000\u00d710⁻⁰³"),
        ("%s", [1.0], "1"),
        ("%s", [12345678.0], "1.2345678e+07"),
        ("%s %s", [123456.0, 1e-7], "123456 1e-07"),
        ("%s", [[1, 2]], "[1, 2]"),
        ("%s and %s", [True, "x"], "true and x"),
        ("100%% %s", ["x"], "100% x"),
    ],
)
def test_format_prints_what_the_api_server_prints(template: str, args: list[Any], text: str) -> None:
    assert format_string(template, args) == text
    assert evaluate(f"{template!r}.format(self)", {"self": args}) == text


def test_format_refuses_a_wrong_argument() -> None:
    with pytest.raises(CelError):
        evaluate("'%d'.format([1.5])", {})
    with pytest.raises(CelError):
        evaluate("'%s %s'.format([1])", {})


@pytest.mark.parametrize(
    "rule",
    [
        "[1, 2, 3].isSorted() && ![3, 1].isSorted()",
        "[3, 1, 2].indexOf(1) == 1 && [3, 1, 3].lastIndexOf(3) == 2",
        "'abcabc'.indexOf('c') == 2 && 'abcabc'.lastIndexOf('c') == 5",
        "'abc123'.find('[0-9]+') == '123' && 'a1b22'.findAll('[0-9]+') == ['1', '22']",
        "'Hello'.lowerAscii() == 'hello' && 'a,b'.split(',') == ['a', 'b'] && ['a', 'b'].join('-') == 'a-b'",
        "[3, 1, 2].sum() == 6 && [3, 1, 2].min() == 1",
        "has(self.a) && !has(self.b)",
    ],
)
def test_kubernetes_library_functions(rule: str) -> None:
    assert evaluate(rule, {"self": {"a": 1}}) is True


def test_a_missing_key_and_a_bad_expression_are_cel_errors() -> None:
    with pytest.raises(CelError):
        evaluate("self.b > 0", {"self": {"a": 1}})
    with pytest.raises(CelError):
        compile_expression("self.(")


def test_programs_are_compiled_once() -> None:
    assert compile_expression("1 + 1 == 2") is compile_expression("1 + 1 == 2")


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "lr": {"type": "number", "default": 1},
        "n": {"type": "integer"},
        "tags": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "x-kubernetes-validations": [
                {"rule": "!has(self.bad)", "message": "bad is set: remove it", "fieldPath": ".bad"}
            ],
        },
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "self.name != 'x'", "message": "x: rename it"}],
            },
        },
    },
    "x-kubernetes-validations": [
        {
            "rule": "self.lr > 0.5 && self.n > 0",
            "messageExpression": "'lr %s, n %d: raise them'.format([self.lr, self.n])",
            "fieldPath": ".lr",
        },
        {"rule": "self.n == oldSelf.n", "message": "n is immutable: re-create it"},
    ],
}


def test_defaults_and_types_come_from_the_schema() -> None:
    assert prepare(SCHEMA, {"n": 2}) == {"n": 2, "lr": 1.0}
    assert isinstance(prepare(SCHEMA, {"n": 2})["lr"], float)


def test_each_rule_reports_at_its_node_with_its_message() -> None:
    value = prepare(SCHEMA, {"lr": 0, "n": 3, "tags": {"bad": "y"}, "items": [{"name": "a"}, {"name": "x"}]})
    assert check_rules(SCHEMA, value, "spec") == [
        FieldError("spec.lr", "lr 0, n 3", "raise them"),
        FieldError("spec.tags.bad", "bad is set", "remove it"),
        FieldError("spec.items[1]", "x", "rename it"),
    ]


def test_transition_rules_run_only_with_the_old_object() -> None:
    old = prepare(SCHEMA, {"n": 1})
    assert check_rules(SCHEMA, prepare(SCHEMA, {"n": 2}), "spec") == []
    assert [e.path for e in check_rules(SCHEMA, prepare(SCHEMA, {"n": 2}), "spec", old=old)] == ["spec"]


def test_a_rule_broken_by_a_known_error_is_not_reported_twice() -> None:
    value = prepare(SCHEMA, {"lr": 1})  # n is missing: the rule cannot be evaluated
    known = [FieldError("spec.n", "required field is missing", "set it")]
    assert check_rules(SCHEMA, value, "spec", known_errors=known) == []
    (error,) = check_rules(SCHEMA, value, "spec")
    assert error.path == "spec.lr" and "could not be evaluated" in error.problem
