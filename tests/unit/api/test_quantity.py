"""Kubernetes quantities, as the shm size and the NCCL message sizes use them."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hyperframe.api.quantity import parse_quantity, quantity_bytes


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Mi", Decimal(1 << 20)),
        ("16Gi", Decimal(16 << 30)),
        ("1k", Decimal(1000)),
        ("500m", Decimal("0.5")),
        ("1e3", Decimal(1000)),
        ("1.5Gi", Decimal(3 << 29)),
        (2048, Decimal(2048)),
        (".5", Decimal("0.5")),
    ],
)
def test_parse(text: str | int, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["lots", "1GB", "Gi", "", "1 Gi", "-"])
def test_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


def test_bytes_round_up() -> None:
    assert quantity_bytes("1Mi") == 1 << 20
    assert quantity_bytes("1500m") == 2
