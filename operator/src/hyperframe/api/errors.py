"""Errors users see when a HyperFrameJob or HyperFrameRuntime is wrong.

Every error names the field path, the problem and the fix, so a user can act on it without
reading the source. One :class:`SpecError` carries *all* problems found, never just the first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["FieldError", "SpecError"]


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field."""

    path: str
    """Dotted field path as the user wrote it, e.g. ``spec.parallelism`` or ``spec.env[2].name``."""
    problem: str
    """What is wrong, with the offending values."""
    fix: str
    """What to change to make it right."""

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""  # "" is the whole object
        return f"{where}{self.problem}: {self.fix}"


class SpecError(ValueError):
    """A spec is invalid; ``errors`` lists every problem, ``str()`` gives one line per problem."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: list[FieldError] = list(errors)
        if not self.errors:
            raise ValueError("SpecError needs at least one FieldError")
        super().__init__("\n".join(str(e) for e in self.errors))

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def paths(self) -> list[str]:
        """The field paths of all errors, in order (handy in tests and events)."""
        return [e.path for e in self.errors]
