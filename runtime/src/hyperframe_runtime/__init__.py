"""HyperFrame runtime: smoke gate, launcher, local mode and the pipeline scheduler.

``hyperframe_runtime.report(step=..., loss=..., **metrics)`` is the one call a plain script job
makes (:mod:`hyperframe_runtime.script_report`); it is imported on first use, so importing a
submodule (the smoke gate, the launcher) stays as light as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hyperframe_runtime.script_report import report

__all__ = ["report"]


def __getattr__(name: str) -> Any:
    if name == "report":
        from hyperframe_runtime.script_report import report

        return report
    raise AttributeError(f"module 'hyperframe_runtime' has no attribute {name!r}")
