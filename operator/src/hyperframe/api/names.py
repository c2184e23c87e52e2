"""Names of the objects rendered for a job, and the stable per-rank DNS names.

Pod names include the gang generation, so re-creating the pods of one generation collides
(AlreadyExists) instead of duplicating them. Hostnames do not, so every rank keeps its DNS
name ``<job>-<rank>.<service>.<namespace>.svc`` across gang restarts.
"""

from __future__ import annotations

from typing import Final

from hyperframe.api.errors import FieldError

__all__ = [
    "DNS_LABEL_MAX",
    "check_name_lengths",
    "configmap_name",
    "hostname",
    "master_addr",
    "pod_name",
    "podgroup_name",
    "rank_dns_name",
    "service_name",
]

DNS_LABEL_MAX: Final = 63


def service_name(job: str) -> str:
    """The headless Service (also the pods' subdomain)."""
    return job


def configmap_name(job: str) -> str:
    return f"{job}-config"


def podgroup_name(job: str) -> str:
    return job


def pod_name(job: str, generation: int, rank: int) -> str:
    return f"{job}-g{generation}-{rank}"


def hostname(job: str, rank: int) -> str:
    return f"{job}-{rank}"


def rank_dns_name(job: str, namespace: str, rank: int) -> str:
    return f"{hostname(job, rank)}.{service_name(job)}.{namespace}.svc"


def master_addr(job: str, namespace: str) -> str:
    """MASTER_ADDR: node rank 0's stable DNS name."""
    return rank_dns_name(job, namespace, 0)


def check_name_lengths(job: str, nodes: int, generation: int) -> list[FieldError]:
    """Errors for rendered names longer than a DNS label (63), naming ``metadata.name``."""
    last = nodes - 1
    longest = {
        "pod name": pod_name(job, generation, last),
        "hostname": hostname(job, last),
        "ConfigMap name": configmap_name(job),
    }
    errors = []
    for what, name in longest.items():
        if len(name) > DNS_LABEL_MAX:
            room = DNS_LABEL_MAX - (len(name) - len(job))
            errors.append(
                FieldError(
                    "metadata.name",
                    f"the rendered {what} {name!r} is {len(name)} characters, more than {DNS_LABEL_MAX}",
                    f"shorten the job name to at most {room} characters",
                )
            )
    return errors
