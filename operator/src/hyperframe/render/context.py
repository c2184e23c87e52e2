"""What the operator knows at render time beyond the two objects."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RenderContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderContext:
    """Inputs of a render that are not in the job or runtime objects."""

    gang_generation: int = 0
    """Gang incarnation: part of every pod name and the gang-generation label."""
    excluded_nodes: tuple[str, ...] = ()
    """Nodes the pods must avoid (they failed the smoke gate): required node anti-affinity."""
    status_url: str | None = None
    """The operator's progress endpoint; when set, pods get it in env with a projected token."""
    status_ca: str | None = None
    """PEM CA of an HTTPS progress endpoint, put into the job's ConfigMap next to job.json."""

    def __post_init__(self) -> None:
        if self.gang_generation < 0:
            raise ValueError(f"gang_generation: {self.gang_generation} must be >= 0")
