"""Gang admission policy: a gang exists whole or not at all. Pure; no API calls.

The API server admits pods one at a time, so a gang can be refused part-way: a ResourceQuota
that has room for some of its pods, an admission webhook or policy that refuses one rank, a
create that races another job for the last quota. The rules:

- **Refused** (HTTP 400, 403 or 422 on a dry run or a real create): no pod of that gang is left.
  The pods already created are deleted (with uid preconditions), condition ``GangRefused`` is set
  with the server's own message and a ``FailedCreate`` event is posted.
- **422** (the object itself is invalid): the same manifest would be refused again, so the job
  fails (reason ``PodRejected``; :func:`~hyperframe.controller.state_machine.invalid`).
- **400 / 403** (quota, LimitRange, PodSecurity, a webhook's denial, RBAC): the cause lies outside
  the job and may go away (quota frees up when other jobs finish), so the job waits in ``Pending``
  and the whole gang is tried again after :func:`refusal_backoff` (the restart backoff, doubling
  per refusal in a row, capped), not counted against ``backoffLimit``; ``activeDeadlineSeconds``
  bounds the wait. ``status.createRefusals`` counts the refusals in a row.
- **Partial gang** (the operator stopped between the first and the last create, or a create failed
  for another reason, such as a timeout): the next reconcile completes it (every missing pod is
  dry-run first); if the completion is refused, the gang is rolled back as above.
"""

from __future__ import annotations

from dataclasses import dataclass

from .facts import PolicySettings
from .policy_failure import restart_backoff

__all__ = [
    "PERMANENT_REFUSAL",
    "REFUSED_STATUS_CODES",
    "Refusal",
    "refusal_backoff",
    "refusal_fix",
    "refusal_reason",
]

REFUSED_STATUS_CODES = frozenset({400, 403, 422})
"""Answers to a create that mean "the API server will not store this object", not "try again now"."""
PERMANENT_REFUSAL = 422
"""Invalid: no retry can help."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """One refused create (or dry run) of an object of the gang."""

    status_code: int
    kind: str
    """Kind of the refused object: ``Pod``, ``Service`` ..."""
    name: str
    message: str
    """The server's message, with each cause mapped to the job field it came from where possible."""
    dry_run: bool
    """Refused by the dry run: nothing of this attempt was created."""

    @property
    def permanent(self) -> bool:
        return self.status_code == PERMANENT_REFUSAL

    @property
    def reason(self) -> str:
        return refusal_reason(self.status_code, self.message)


def refusal_reason(status_code: int, message: str) -> str:
    """CamelCase reason of the ``GangRefused`` condition for a refused create."""
    if status_code == PERMANENT_REFUSAL:
        return "PodRejected"
    if "exceeded quota" in message:
        return "QuotaExceeded"
    if "admission webhook" in message:
        return "AdmissionWebhookDenied"
    if status_code == 403:
        return "Forbidden"
    return "AdmissionDenied"


def refusal_fix(reason: str) -> str:
    """What the user can do about a refusal of that reason."""
    if reason == "QuotaExceeded":
        return (
            "the namespace's ResourceQuota has no room for the whole gang: raise it, lower spec.nodes "
            "or the per-pod resources, or wait for other pods to free quota"
        )
    return "fix what the message names (the cluster's admission policy or the job's pod settings)"


def refusal_backoff(refusals: int, settings: PolicySettings) -> float:
    """Seconds from the ``refusals``-th refusal in a row to the next try: the restart backoff."""
    return restart_backoff(refusals, settings)
