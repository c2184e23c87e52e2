"""The one error type of the data path: bad data input, a configuration error (exit 2)."""

from __future__ import annotations

__all__ = ["DataError"]


class DataError(ValueError):
    """The data a config names cannot be read as configured; the message is ``path: problem: fix``."""
