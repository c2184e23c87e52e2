"""User metrics on their way to status.progress: the runtime's bound and the operator's parser."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from hyperframe.constants import MAX_PROGRESS_METRICS, PROGRESS_METRIC_NAME_MAX
from hyperframe.controller.progress_server import parse_progress
from hyperframe_runtime.progress import ProgressUpdate, bounded_metrics


def test_the_first_names_in_sorted_order_are_kept_and_the_rest_named_as_dropped() -> None:
    values = {f"m{i:03d}": float(i) for i in reversed(range(MAX_PROGRESS_METRICS + 5))}
    bounded = bounded_metrics(values)
    assert list(bounded.kept) == [f"m{i:03d}" for i in range(MAX_PROGRESS_METRICS)]
    assert sorted(bounded.dropped) == [
        f"m{i:03d}" for i in range(MAX_PROGRESS_METRICS, MAX_PROGRESS_METRICS + 5)
    ]
    assert all(f"more than {MAX_PROGRESS_METRICS}" in why for why in bounded.dropped.values())


def test_bad_names_and_values_are_dropped_not_counted() -> None:
    long = "x" * (PROGRESS_METRIC_NAME_MAX + 1)
    bounded = bounded_metrics({"ok": 1, "nan": float("nan"), "flag": True, "text": "1", long: 2.0, "": 3.0})
    assert bounded.kept == {"ok": 1.0}
    assert set(bounded.dropped) == {"nan", "flag", "text", long, ""}


def test_the_operator_takes_what_the_runtime_sends() -> None:
    kept = bounded_metrics({f"m{i}": float(i) for i in range(2 * MAX_PROGRESS_METRICS)}).kept
    update = ProgressUpdate(
        frame=3, totalFrames=9, step=3, loss=1.5, samplesPerSecond=2.0, etaSeconds=4.0, metrics=kept
    )
    assert parse_progress(asdict(update))["metrics"] == kept


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({f"m{i}": 1.0 for i in range(MAX_PROGRESS_METRICS + 1)}, f"at most {MAX_PROGRESS_METRICS}"),
        ({"a": float("inf")}, "metrics.a: inf is not a finite number: use a finite number"),
        ([1, 2], "metrics: expected a map, got a list"),
        (
            {"x" * (PROGRESS_METRIC_NAME_MAX + 1): 1.0},
            f"metrics: key .* characters: use 1 to {PROGRESS_METRIC_NAME_MAX} characters",
        ),
    ],
)
def test_the_operator_refuses_a_report_past_the_bound(metrics: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_progress({"frame": 1, "metrics": metrics})
