"""CEL as the API server evaluates it in x-kubernetes-validations: compiled once, run anywhere.

The evaluator is the ``common-expression-language`` bindings (the Rust ``cel`` crate), with
cel-go's extension libraries that Kubernetes enables and the crate lacks added as functions:
``format`` (strings extension), the strings and lists helpers of ``cel.stdlib`` and the
Kubernetes list and regex libraries (``isSorted``, list ``indexOf``/``lastIndexOf``, ``find``,
``findAll``). ``tests/unit/api/test_cel.py`` pins each of them to the verdicts of the real API
server; ``docs/api.md`` lists what is not supported (``quantity()``, ``url()``, ``ip()``).

Programs are cached by their source, so the operator compiles each rule once per process.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

import cel
from cel import stdlib

__all__ = ["CelError", "cel_string", "compile_expression", "evaluate", "evaluate_many", "format_string"]


class CelError(Exception):
    """A CEL expression failed to compile or to evaluate (no such key, no such overload, ...)."""


def cel_string(value: Any) -> str:
    """A value as CEL's ``string()`` and ``format('%s')`` write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return _double(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_quoted(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_quoted(k)}: {_quoted(v)}" for k, v in value.items()) + "}"
    return str(value)


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else cel_string(value)


_EXPONENT_FROM: Final = 6


def _double(x: float) -> str:
    """Go's ``strconv.FormatFloat(x, 'g', -1, 64)``, which cel-go uses: shortest digits, and an
    exponent below 1e-4 or from 1e6 on."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    point = len(digits) + exponent  # digits before the decimal point
    head = "-" if sign else ""
    exp = point - 1
    if exp < -4 or exp >= _EXPONENT_FROM:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{head}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{head}0.{'0' * -point}{text}"
    if point >= len(text):
        return head + text + "0" * (point - len(text))
    return f"{head}{text[:point]}.{text[point:]}"


_SUPERSCRIPT: Final = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_VERB: Final = re.compile(r"%(?:\.(\d+))?([a-zA-Z%])")


def format_string(template: str, args: list[Any]) -> str:
    """cel-go's ``"...".format([args])``: %s, %d, %f, %e, %b, %o, %x, %X and %%, as the API
    server prints them (tests/integration/test_cel_parity.py)."""
    out: list[str] = []
    pos = 0
    index = 0
    for match in _VERB.finditer(template):
        out.append(template[pos : match.start()])
        pos = match.end()
        precision, verb = match.group(1), match.group(2)
        if verb == "%":
            out.append("%")
            continue
        if index >= len(args):
            raise ValueError(f"format: index {index} out of range")
        out.append(_format_one(verb, precision, args[index]))
        index += 1
    out.append(template[pos:])
    if index != len(args):
        raise ValueError(f"format: {len(args)} arguments, {index} used")
    return "".join(out)


def _format_one(verb: str, precision: str | None, arg: Any) -> str:
    integral = isinstance(arg, int) and not isinstance(arg, bool)
    if verb == "s":
        return cel_string(arg)
    if verb == "d":
        if not integral:
            raise ValueError(f"format: %d needs an integer, got {cel_string(arg)}")
        return str(arg)
    if verb in "fe":
        if not isinstance(arg, int | float) or isinstance(arg, bool):
            raise ValueError(f"format: %{verb} needs a number")
        # The API server's %e ignores a precision and writes the exponent as x10 and superscript
        # digits (1.5 prints as 1.500000, the multiplication sign, 10, superscript 00).
        text = f"{float(arg):.{int(precision or 6) if verb == 'f' else 6}{verb}}"
        if verb == "e":
            mantissa, exp = text.split("e")
            sign = "⁻" if exp.startswith("-") else ""
            text = f"{mantissa}\u00d710{sign}{exp.lstrip('+-').translate(_SUPERSCRIPT)}"
        return text
    if verb in "boxX":
        if not integral:
            raise ValueError(f"format: %{verb} needs an integer")
        return format(arg, verb)
    raise ValueError(f"format: unknown verb %{verb}")


def _index_of(container: Any, item: Any, *rest: Any) -> int:
    if isinstance(container, str):
        return stdlib.index_of(container, item, *rest)
    return next((i for i, v in enumerate(container) if v == item), -1)


def _last_index_of(container: Any, item: Any, *rest: Any) -> int:
    if isinstance(container, str):
        return stdlib.last_index_of(container, item, *rest)
    return next((i for i in range(len(container) - 1, -1, -1) if container[i] == item), -1)


def _is_sorted(items: list[Any]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(items))


def _find(s: str, pattern: str) -> str:
    m = re.search(pattern, s)
    return m.group(0) if m else ""


def _find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, s)]
    return found if limit < 0 else found[:limit]


_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    **stdlib.EXTENSIONS["strings"],
    **stdlib.EXTENSIONS["lists"],
    **stdlib.EXTENSIONS["core"],
    "format": format_string,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "isSorted": _is_sorted,
    "find": _find,
    "findAll": _find_all,
}


@functools.lru_cache(maxsize=4096)
def compile_expression(source: str) -> cel.Program:
    """The compiled program of one expression (cached: each rule compiles once per process)."""
    try:
        return cel.compile(source)
    except Exception as exc:  # the bindings raise ValueError or RuntimeError on a parse error
        raise CelError(f"does not compile: {exc}") from exc


def evaluate(source: str, variables: Mapping[str, Any]) -> Any:
    """Evaluate ``source`` with ``variables`` (``self``, ``oldSelf``) bound; raise CelError."""
    result = evaluate_many((source,), variables)[0]
    if isinstance(result, CelError):
        raise result
    return result


def evaluate_many(sources: Sequence[str], variables: Mapping[str, Any]) -> list[Any]:
    """Evaluate each source against the same variables (converted once); a failure is returned
    as its :class:`CelError`, in place of the value."""
    context = cel.Context(functions=_FUNCTIONS)
    for name, value in variables.items():
        context.add_variable(name, value)
    results: list[Any] = []
    for source in sources:
        try:
            results.append(compile_expression(source).execute(context))
        except CelError as exc:
            results.append(exc)
        except Exception as exc:  # no such key, no such overload, overflow, a failing extension
            results.append(CelError(str(exc)))
    return results
