"""SVG Gantt charts of a replay."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hyperframe_runtime.schedule.baselines import textbook_1f1b
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.gantt import gantt_svg
from hyperframe_runtime.schedule.ir import Placement
from hyperframe_runtime.schedule.simulate import simulate

SVG = "{http://www.w3.org/2000/svg}"


def test_one_box_per_action_and_all_reduce_with_tooltips() -> None:
    costs = CostModel(
        forward=(1.0, 1.0),
        backward_input=(1.0, 1.0),
        backward_weight=(1.0, 1.0),
        allreduce=(0.5, 0.5),
    )
    result = simulate(textbook_1f1b(2, 3), Placement.one_per_rank(2), costs, 3)
    root = ET.fromstring(gantt_svg(result.spans, 2, title="1F1B <p=2>", makespan=result.makespan))
    tips = [t.text or "" for t in root.iter(f"{SVG}title")]
    assert sum(1 for t in tips if t.startswith(("0F", "1F", "0B", "1B"))) == 12
    assert sum(1 for t in tips if t.startswith("all-reduce stage")) == 2
    assert any(t.startswith("1B2 [") for t in tips)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "1F1B <p=2>" in texts  # escaped in the file, intact once parsed
    assert "rank 0" in texts and "rank 1" in texts
