"""The gate's human-readable result for the init container's log (stdout)."""

from __future__ import annotations

from collections.abc import Sequence

from hyperframe.smoke_report import SmokeReport

from hyperframe_runtime.smoke.outcome import RankRecord
from hyperframe_runtime.smoke.summary import headline_figure

__all__ = ["format_table"]


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def format_table(report: SmokeReport, own: Sequence[RankRecord]) -> str:
    """Devices, all-reduce figures and the verdict with its remedy, as aligned plain text."""
    lines = [
        f"HyperFrame smoke gate: node {report.node or '?'} (node rank {report.node_rank}), "
        f"{report.world_size} ranks in the job"
    ]
    notes = sorted({note for record in own for note in record.notes})
    lines += [f"  note: {note}" for note in notes]
    inits = [r.group_init_s for r in own if r.group_init_s is not None]
    if inits:
        lines.append(f"  note: process group init (slowest local rank) {max(inits):.2f}s")
    if report.devices:
        lines.append(f"  {'node':>4}  {'dev':>3}  {'name':<28}  {'TFLOP/s':>8}  {'mem GB/s':>9}  ok")
        for d in report.devices:
            lines.append(
                f"  {'-' if d.node_rank is None else d.node_rank:>4}  {d.index:>3}  {d.name[:28]:<28}  "
                f"{_num(d.tflops):>8}  {_num(d.mem_bw_gbps, 0):>9}  {'yes' if d.ok else 'NO'}"
            )
    figures = [f for record in own[:1] for f in record.allreduce]
    if figures:
        lines.append(f"  {'all-reduce':>10}  {'time ms':>9}  {'algbw GB/s':>10}  {'busbw GB/s':>10}")
        for f in figures:
            lines.append(
                f"  {_size(f.size_bytes):>10}  {f.seconds * 1e3:>9.3f}  {f.algbw_gbps:>10.3f}  {f.busbw_gbps:>10.3f}"
            )
    headline = headline_figure(own)
    bus = f", busbw {headline.busbw_gbps:.3f} GB/s" if headline else ""
    if report.ok:
        lines.append(f"PASS in {report.duration_s:.1f}s{bus}")
    else:
        lines.append(
            f"FAIL (exit {report.exit_code}) [{report.failed_check}] in {report.duration_s:.1f}s{bus}"
        )
        lines.append(f"  reason: {report.reason}")
        lines.append(f"  remedy: {report.remedy}")
    return "\n".join(lines)
