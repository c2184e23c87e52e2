"""How many nodes a job may exclude: never so many that its gang can no longer be scheduled.

The rule: a node the smoke gate names at fault is added to ``status.excludedNodes`` only while at
least ``num_nodes`` schedulable nodes (Ready and not cordoned, as the operator's node cache sees
them) stay outside the excluded list. Excluding a node that is not schedulable anyway costs the
gang nothing and is always allowed. Candidates are taken in the order given (rank order); the ones
the cap holds back are returned so that the caller can say so. The gang then restarts on nodes
that include a suspect one, and ``runPolicy.backoffLimit`` bounds the retries as for any failure.

``num_nodes`` is the gang's pod count: GPU gangs place one pod per node; CPU gangs may share a node,
so for them the rule is stricter than scheduling needs, which only ever keeps a node in the pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .observed import NodeState

__all__ = ["ExclusionDecision", "cap_exclusions", "schedulable_nodes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExclusionDecision:
    added: tuple[str, ...]
    """Nodes to append to ``status.excludedNodes``."""
    withheld: tuple[str, ...]
    """Nodes at fault that stay schedulable for the job, because excluding them would leave fewer
    schedulable nodes than the gang needs."""
    schedulable: int
    """Schedulable nodes outside the excluded list once ``added`` is excluded."""


def schedulable_nodes(nodes: Mapping[str, NodeState]) -> set[str]:
    """Nodes a new pod could be bound to as far as the operator knows: Ready and not cordoned."""
    return {name for name, node in nodes.items() if node.ready and not node.cordoned}


def cap_exclusions(
    excluded: Sequence[str], candidates: Sequence[str], nodes: Mapping[str, NodeState], *, needed: int
) -> ExclusionDecision:
    """Which of ``candidates`` to exclude on top of ``excluded`` (see the module's rule)."""
    pool = schedulable_nodes(nodes) - set(excluded)
    added: list[str] = []
    withheld: list[str] = []
    for node in candidates:
        if node in excluded or node in added or node in withheld:
            continue
        if node not in pool:
            added.append(node)
        elif len(pool) - 1 >= needed:
            pool.discard(node)
            added.append(node)
        else:
            withheld.append(node)
    return ExclusionDecision(added=tuple(added), withheld=tuple(withheld), schedulable=len(pool))
