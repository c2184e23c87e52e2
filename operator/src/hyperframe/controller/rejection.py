"""The one-line job message for objects the API server refused (HTTP 422), in the job's own terms.

The server's Status names pod paths in its causes; each is mapped to the job field it came from
(:func:`hyperframe.render.field_map.job_field_of_pod_field`) and printed with the server's own
message: ``spec.volumes[0].hostPath.type: Unsupported value: "Bogus": supported values: ...``.
Never the JSON body.
"""

from __future__ import annotations

from collections.abc import Callable

from .kube import ApiError

__all__ = ["rejection_message"]


def rejection_message(error: ApiError, kind: str, job_field: Callable[[str], str | None]) -> str:
    """``<job path>: <server message>`` per cause, joined by ``; `` (duplicates dropped: the init
    and main containers share mounts and env, so one mistake is reported twice by the server)."""
    if not error.causes:
        return error.message
    parts: list[str] = []
    for field, message in error.causes:
        mapped = job_field(field) if field and kind == "Pod" else None
        where = mapped or (f"{kind.lower()} {field}" if field else kind.lower())
        line = f"{where}: {message}"
        if line not in parts:
            parts.append(line)
    return "; ".join(parts)
