"""The exclusion cap: nodes at fault are excluded only while the gang can still be scheduled."""

from __future__ import annotations

from controller_builders import T0, cordoned, not_ready, ready
from hyperframe.controller.policy_exclusion import cap_exclusions

NODES = {**{n: ready(n) for n in ("a", "b", "c", "d")}, "off": cordoned("off"), "down": not_ready("down", T0)}


def test_candidates_are_excluded_in_order_until_only_the_gang_size_is_left() -> None:
    decision = cap_exclusions((), ("a", "b", "c"), NODES, needed=2)
    assert decision.added == ("a", "b") and decision.withheld == ("c",) and decision.schedulable == 2


def test_nodes_that_are_not_schedulable_are_excluded_at_no_cost() -> None:
    decision = cap_exclusions(("a",), ("off", "down", "gone", "b", "c"), NODES, needed=2)
    assert decision.added == ("off", "down", "gone", "b") and decision.withheld == ("c",)


def test_already_excluded_and_repeated_candidates_are_skipped() -> None:
    decision = cap_exclusions(("a",), ("a", "b", "b"), NODES, needed=1)
    assert decision.added == ("b",) and decision.withheld == ()


def test_a_cluster_already_short_of_nodes_excludes_nothing_schedulable() -> None:
    decision = cap_exclusions((), ("a",), {"a": ready("a")}, needed=2)
    assert decision.added == () and decision.withheld == ("a",) and decision.schedulable == 1
