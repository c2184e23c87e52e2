"""The release version is read from the distributions' metadata once per process, not per render."""

from __future__ import annotations

import pytest
from hyperframe import version as version_module
from hyperframe.version import OPERATOR_DISTRIBUTION, distribution_version


def test_the_version_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []

    def counted(name: str) -> str:
        reads.append(name)
        return "9.9.9"

    clear = getattr(distribution_version, "cache_clear", lambda: None)
    clear()
    monkeypatch.setattr(version_module, "version", counted)
    try:
        assert [distribution_version(OPERATOR_DISTRIBUTION) for _ in range(3)] == ["9.9.9"] * 3
        assert reads == [OPERATOR_DISTRIBUTION]
    finally:
        clear()
