"""Dependency-free SVG Gantt charts of a schedule: one row per rank, one box per action.

Used by the bench (planned orders replayed on a cost model) and by the executor's observability
(the spans it measured). Colours: F blue, I orange, W green, B purple, DP all-reduce grey; a
rank's second and later stages are drawn in a lighter shade. Boxes carry the micro-batch number
and a tooltip with the full action and times.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from hyperframe_runtime.schedule.ir import OpKind
from hyperframe_runtime.schedule.simulate import SimResult, Span

__all__ = ["gantt_svg", "write_gantt_svg"]

_COLOURS = {
    OpKind.F: ("#2f6fdb", "#8fb3f0"),
    OpKind.I: ("#e8871e", "#f5c48c"),
    OpKind.W: ("#2e9e5b", "#93d3ac"),
    OpKind.B: ("#8a4fc7", "#c6a6e6"),
}
_ALLREDUCE = "#9aa0a6"
_ROW = 26
_LEFT = 64
_TOP = 34
_WIDTH = 1100


def gantt_svg(
    spans: Sequence[Span],
    num_ranks: int,
    *,
    title: str = "",
    makespan: float | None = None,
) -> str:
    """SVG text for ``spans`` (from :func:`simulate` or measured by the executor)."""
    end = makespan if makespan is not None else max((s.end for s in spans), default=1.0)
    end = end if end > 0 else 1.0
    scale = (_WIDTH - _LEFT - 10) / end
    height = _TOP + num_ranks * _ROW + 40
    first_stage: dict[int, int] = {}
    for span in spans:
        first_stage[span.rank] = min(first_stage.get(span.rank, span.stage), span.stage)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
        f'font-family="Helvetica,Arial,sans-serif" font-size="10">',
        f'<rect width="{_WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{_LEFT}" y="18" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for rank in range(num_ranks):
        y = _TOP + rank * _ROW
        parts.append(f'<text x="6" y="{y + _ROW * 0.62:.1f}">rank {rank}</text>')
        parts.append(
            f'<rect x="{_LEFT}" y="{y}" width="{end * scale:.2f}" height="{_ROW - 4}" fill="#f3f3f3"/>'
        )
    for span in spans:
        x = _LEFT + span.start * scale
        w = max((span.end - span.start) * scale, 0.5)
        y = _TOP + span.rank * _ROW
        if span.action is None:
            fill, label, tip = _ALLREDUCE, "", f"all-reduce stage {span.stage}"
            y_box, h_box = y + (_ROW - 4) * 0.6, (_ROW - 4) * 0.4
        else:
            dark, light = _COLOURS.get(span.action.kind, ("#555555", "#aaaaaa"))
            fill = dark if span.stage == first_stage.get(span.rank) else light
            label, tip = str(span.action.microbatch), str(span.action)
            y_box, h_box = y, _ROW - 4
        parts.append(
            f'<rect x="{x:.2f}" y="{y_box:.1f}" width="{w:.2f}" height="{h_box:.1f}" fill="{fill}" '
            f'stroke="white" stroke-width="0.5"><title>{escape(tip)} '
            f"[{span.start:.3g}, {span.end:.3g}]</title></rect>"
        )
        if label and w >= 7 * len(label):
            parts.append(
                f'<text x="{x + w / 2:.2f}" y="{y + _ROW * 0.55:.1f}" text-anchor="middle" '
                f'fill="white">{label}</text>'
            )
    legend_y = _TOP + num_ranks * _ROW + 18
    x = _LEFT
    for kind, (dark, light) in _COLOURS.items():
        parts.append(f'<rect x="{x}" y="{legend_y - 9}" width="12" height="10" fill="{dark}"/>')
        parts.append(f'<rect x="{x + 12}" y="{legend_y - 9}" width="12" height="10" fill="{light}"/>')
        parts.append(f'<text x="{x + 28}" y="{legend_y}">{kind.value}</text>')
        x += 60
    parts.append(f'<rect x="{x}" y="{legend_y - 9}" width="12" height="10" fill="{_ALLREDUCE}"/>')
    parts.append(f'<text x="{x + 16}" y="{legend_y}">all-reduce</text>')
    parts.append(
        f'<text x="{x + 100}" y="{legend_y}">makespan {end:.4g} (light: a rank\'s later stage)</text>'
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_gantt_svg(result: SimResult, path: str | Path, *, title: str = "") -> None:
    """Write the Gantt chart of a replay to ``path``."""
    svg = gantt_svg(result.spans, result.num_ranks, title=title, makespan=result.makespan)
    Path(path).write_text(svg, encoding="utf-8")
