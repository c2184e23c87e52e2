"""Kubernetes resource quantities (``16Gi``, ``500m``, ``1e3``) as exact numbers.

Not ``kubernetes.utils.parse_quantity``, on purpose: ``hyperframe.api`` is imported by the
training image (the runtime reads the resolved job config through it), which must not carry the
kubernetes client, so nothing under ``hyperframe.api`` imports ``kubernetes``.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Final

from hyperframe.api.fields import FORMATS

__all__ = ["parse_quantity", "quantity_bytes"]

_SUFFIX: Final[dict[str, Decimal]] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_SPLIT = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)|[a-zA-Z]*)$"
)


def parse_quantity(text: str | int) -> Decimal:
    """The exact value of a quantity; ``ValueError`` if it is not one."""
    s = str(text)
    if not FORMATS["quantity"].matches(s):
        raise ValueError(f"{s!r} is not a Kubernetes quantity")
    m = _SPLIT.match(s)
    if m is None:  # the format regex and this one accept the same language
        raise ValueError(f"{s!r} is not a Kubernetes quantity")
    number, suffix = m.groups()
    if suffix[:1] in ("e", "E"):
        return Decimal(number) * (Decimal(10) ** Decimal(suffix[1:]))
    return Decimal(number) * _SUFFIX[suffix]


def quantity_bytes(text: str | int) -> int:
    """A byte-size quantity as whole bytes (rounded up)."""
    value = parse_quantity(text)
    whole = int(value)
    return whole if whole == value else whole + 1
