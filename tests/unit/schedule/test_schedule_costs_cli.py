"""Cost files and the hyperframe-sched command (replay, plan, baseline, Gantt)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hyperframe_runtime.schedule.cli import main
from hyperframe_runtime.schedule.costs import CostModel
from hyperframe_runtime.schedule.csvio import load_orders_csv
from hyperframe_runtime.schedule.ir import ScheduleError


def test_cost_mapping_round_trip_and_broadcast() -> None:
    costs = CostModel.from_mapping({"forward": [1, 2], "backward_input": 1.5, "p2p": 0.1, "activation": 2})
    assert costs.backward_input == (1.5, 1.5)
    assert costs.backward_weight == (1.0, 2.0)  # defaults to forward
    assert costs.activation == (2.0, 2.0)
    assert CostModel.from_mapping(costs.to_mapping()) == costs


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"forward": [1], "bogus": 1}, r"unknown keys \['bogus'\]"),
        ({"backward_input": [1]}, "costs.forward: missing"),
        ({"forward": [1, -1]}, r"costs.forward\[1\] = -1.0: must be a finite number >= 0"),
        ({"forward": [1, 1], "backward_weight": [1]}, "costs.backward_weight: has 1 entries"),
        ({"forward": [1], "rank_slowdown": [0]}, r"costs.rank_slowdown\[0\] = 0.0"),
    ],
)
def test_cost_errors_name_the_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        CostModel.from_mapping(data)


def test_plan_then_replay_with_gantt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    costs = tmp_path / "costs.yaml"
    costs.write_text(yaml.safe_dump({"forward": [0.5] * 8, "backward_input": 0.5, "backward_weight": 0.5}))
    out, svg = tmp_path / "plan.csv", tmp_path / "plan.svg"
    assert (
        main(["plan", "--p", "4", "--m", "8", "--costs", str(costs), "-o", str(out), "--budget", "0.05"]) == 0
    )
    assert len(load_orders_csv(out)) == 4
    capsys.readouterr()
    assert main(["replay", str(out), "--costs", str(costs), "--gantt", str(svg)]) == 0
    text = capsys.readouterr().out
    assert "4 ranks, 8 stages, 8 micro-batches" in text
    assert "makespan/LB_tight 1.0000" in text
    assert svg.read_text().startswith("<svg") and "rank 3" in svg.read_text()


def test_baseline_export_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    costs = tmp_path / "costs.yaml"
    costs.write_text(yaml.safe_dump({"forward": [1.0] * 4, "backward_input": 1.0, "backward_weight": 1.0}))
    out = tmp_path / "1f1b.csv"
    assert main(["baseline", "1F1B", "--p", "4", "--m", "4", "-o", str(out)]) == 0
    assert main(["replay", str(out), "--costs", str(costs)]) == 0
    assert "makespan         21.0000" in capsys.readouterr().out


def test_errors_are_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("0F0,0B0\n1B0,1F0\n")
    costs = tmp_path / "costs.yaml"
    costs.write_text("forward: [1, 1]\n")
    assert main(["replay", str(bad), "--costs", str(costs)]) == 2
    err = capsys.readouterr().err
    assert "hyperframe-sched: error: deadlock" in err and ">1B0<" in err
