"""The leader label's pure decision: write only when the pod's label differs from leadership."""

from __future__ import annotations

from hyperframe.constants import LABEL_OPERATOR_LEADER
from hyperframe.controller.leader_label import label_change


def pod(labels: dict[str, str] | None) -> dict[str, object]:
    return {"metadata": {"name": "op-1", "labels": labels} if labels is not None else {"name": "op-1"}}


def test_the_leader_labels_its_pod_once_and_a_standby_removes_a_label_left_behind() -> None:
    assert label_change(pod({"app": "x"}), leading=True) == {LABEL_OPERATOR_LEADER: "true"}
    assert label_change(pod({LABEL_OPERATOR_LEADER: "true"}), leading=True) is None
    assert label_change(pod({LABEL_OPERATOR_LEADER: "true"}), leading=False) == {LABEL_OPERATOR_LEADER: None}
    assert label_change(pod({LABEL_OPERATOR_LEADER: "yes"}), leading=True) == {LABEL_OPERATOR_LEADER: "true"}
    # A standby whose pod carries no label writes nothing: it stays write-free.
    assert label_change(pod(None), leading=False) is None
    assert label_change(pod({}), leading=False) is None
    assert label_change(None, leading=True) is None, "a pod that is gone is not labelled"
