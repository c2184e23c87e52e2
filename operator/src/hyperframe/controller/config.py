"""The operator's settings: one documented class, read from ``HYPERFRAME_*`` variables, validated at load.

Every field below maps to one environment variable: the field name upper-cased with the prefix
``HYPERFRAME_`` (``api_qps`` is ``HYPERFRAME_API_QPS``). A bad value stops the operator at start
with a message that names the variable and the fix; it never surfaces later in a handler.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperframe.constants import RESERVED_ENV

__all__ = ["ENV_PREFIX", "ConfigError", "OperatorConfig"]

ENV_PREFIX = "HYPERFRAME_"


class ConfigError(ValueError):
    """A ``HYPERFRAME_*`` variable has a value the operator cannot use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorConfig:
    """How the operator runs. Defaults suit a production cluster; tests shorten the backoffs."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch, comma-separated. Empty (the default) watches the whole cluster."""
    api_qps: float = 200.0
    """Sustained Kubernetes API requests per second of the operator's own client (not kopf's watches):
    about 20 per 4-pod job, so 200 lets it start about 10 such jobs per second."""
    api_burst: int = 400
    """Requests the client may send at once above ``api_qps`` before it is throttled."""
    workers: int = 16
    """Jobs reconciled concurrently; also the size of the API thread pool and connection pool."""
    lease_name: str = "hyperframe-operator"
    """coordination.k8s.io Lease the replicas elect their one active replica with; the empty
    string turns election off, and then exactly one replica may run."""
    lease_namespace: str = ""
    """Namespace of the Lease; empty: the operator pod's own namespace (``default`` outside a pod)."""
    lease_duration_seconds: float = 15.0
    """How long a standby waits after the Lease's last renewal before it takes over."""
    lease_renew_deadline_seconds: float = 10.0
    """A leader that could not renew for this long stops acting (must be < the lease duration)."""
    lease_retry_seconds: float = 2.0
    """How often the leader renews and a standby reads the Lease (must be < the renew deadline)."""
    pod_name: str = ""
    """The operator's own pod (the chart sets it from the downward API). With a Lease, the leader
    labels this pod ``hyperframe.dev/operator-leader=true`` and removes the label when it stops
    leading, so a Service selecting that label sends the progress posts to the leader alone.
    Empty (outside a pod): no label."""
    pod_namespace: str = ""
    """Namespace of ``pod_name``; empty: the service account's namespace (``default`` outside a pod)."""
    liveness_port: int = 8080
    """Port of kopf's liveness endpoint ``/healthz``; 0 disables it."""
    metrics_port: int = 9090
    """Port of the Prometheus ``/metrics`` endpoint; 0 disables it."""
    status_port: int = 8081
    """Port of the progress endpoint the training pods post to; 0 disables progress reporting."""
    status_endpoint_url: str = ""
    """Base URL the pods use to reach the progress endpoint (``https://<service>.<ns>.svc:8081``).
    Empty disables progress reporting: pods get no status URL."""
    status_tls_cert_file: str = ""
    """PEM serving certificate (chain) of the progress endpoint; empty serves plain HTTP."""
    status_tls_key_file: str = ""
    """PEM private key of that certificate."""
    status_tls_ca_file: str = ""
    """PEM CA that signed the serving certificate; each job's ConfigMap carries it to the pods,
    which trust only it for the progress endpoint."""
    restart_backoff_seconds: float = 10.0
    """Wait before the first gang restart; doubled for each further restart."""
    restart_backoff_max_seconds: float = 300.0
    """Upper bound of the doubling restart backoff."""
    node_not_ready_grace_seconds: float = 30.0
    """How long a node may be NotReady under a gang before its pods are force-deleted and the gang restarts."""
    terminating_grace_seconds: float = 60.0
    """How long a pod may sit in Terminating before the operator force-deletes it."""
    pod_resync_seconds: float = 120.0
    """How often the active replica lists the pods again; a pod deleted while no watch saw it leaves
    the cache within this time."""
    unschedulable_timeout_seconds: float = 300.0
    """How long a gang's pod may stay unschedulable (``PodScheduled=False/Unschedulable``) before
    the job gets the ``Unschedulable`` condition and event, and ``unschedulable_action`` applies."""
    unschedulable_action: str = "Fail"
    """``Fail``: the job then fails with reason ``Unschedulable``; ``Wait``: it keeps waiting with
    the condition set until the gang is placed."""
    progress_flush_seconds: float = 10.0
    """Most frequent ``status.progress`` write per job; reports in between are coalesced (must be <= 30)."""
    log_format: str = "json"
    """``json`` (one object per line) or ``text``."""
    log_level: str = "INFO"
    """Python logging level name."""

    def __post_init__(self) -> None:
        positive = (
            "api_qps",
            "restart_backoff_seconds",
            "restart_backoff_max_seconds",
            "progress_flush_seconds",
            "pod_resync_seconds",
            "lease_duration_seconds",
            "lease_renew_deadline_seconds",
            "lease_retry_seconds",
            "unschedulable_timeout_seconds",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{_var(name)}: must be > 0, got {getattr(self, name)}")
        for name in ("node_not_ready_grace_seconds", "terminating_grace_seconds"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{_var(name)}: must be >= 0, got {getattr(self, name)}")
        if not self.lease_retry_seconds < self.lease_renew_deadline_seconds < self.lease_duration_seconds:
            raise ConfigError(
                f"{_var('lease_retry_seconds')} ({self.lease_retry_seconds}) < "
                f"{_var('lease_renew_deadline_seconds')} ({self.lease_renew_deadline_seconds}) < "
                f"{_var('lease_duration_seconds')} ({self.lease_duration_seconds}) must hold, or two "
                "replicas could act at once; keep the defaults 2 < 10 < 15"
            )
        if self.api_burst < 1 or self.workers < 1:
            raise ConfigError(f"{_var('api_burst')} and {_var('workers')}: must be >= 1")
        for name in ("liveness_port", "metrics_port", "status_port"):
            port = getattr(self, name)
            if not 0 <= port <= 65535:
                raise ConfigError(f"{_var(name)}: {port} is not a port; use 1-65535, or 0 to disable")
        if self.progress_flush_seconds > 30:
            raise ConfigError(
                f"{_var('progress_flush_seconds')}: {self.progress_flush_seconds} s; "
                "status.progress must refresh at least every 30 s, set it to 30 or less"
            )
        if self.status_endpoint_url and not self.status_endpoint_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{_var('status_endpoint_url')}: {self.status_endpoint_url!r} must start with http:// or https://"
            )
        if bool(self.status_tls_cert_file) != bool(self.status_tls_key_file):
            raise ConfigError(
                f"{_var('status_tls_cert_file')} and {_var('status_tls_key_file')}: set both (HTTPS) or neither"
            )
        if self.status_tls_cert_file and not self.status_tls_ca_file:
            raise ConfigError(
                f"{_var('status_tls_ca_file')}: required with a serving certificate, the pods need it"
            )
        if self.status_tls_cert_file and self.status_endpoint_url.startswith("http://"):
            raise ConfigError(
                f"{_var('status_endpoint_url')}: {self.status_endpoint_url!r} is plain HTTP but the endpoint "
                "serves HTTPS; use https://"
            )
        if self.unschedulable_action not in ("Fail", "Wait"):
            raise ConfigError(
                f"{_var('unschedulable_action')}: {self.unschedulable_action!r}; use Fail or Wait"
            )
        if self.log_format not in ("json", "text"):
            raise ConfigError(f"{_var('log_format')}: {self.log_format!r}; use json or text")
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ConfigError(f"{_var('log_level')}: {self.log_level!r}; use DEBUG, INFO, WARNING or ERROR")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OperatorConfig:
        """Read every field from ``HYPERFRAME_<FIELD>``; unknown ``HYPERFRAME_*`` names are errors."""
        known = {_var(f.name): f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in env.items():
            if not key.startswith(ENV_PREFIX) or key in _NOT_OPERATOR_SETTINGS:
                continue
            field = known.get(key)
            if field is None and _is_service_link(key, raw):
                continue
            if field is None:
                raise ConfigError(f"{key}: not an operator setting; known: {', '.join(sorted(known))}")
            values[field.name] = _convert(key, raw, field.type)
        return cls(**values)


# Variables with the prefix that belong to the training pods, not to the operator.
_NOT_OPERATOR_SETTINGS = RESERVED_ENV

# The variables the kubelet injects for every Service of the namespace (service links): a Service
# named `hyperframe-operator` yields HYPERFRAME_OPERATOR_SERVICE_HOST, ..._PORT=tcp://..., and
# ..._PORT_8080_TCP_PROTO. The chart turns service links off; this keeps a pod spec that does not
# from crash-looping the operator on names it never asked for.
_SERVICE_LINK = re.compile(
    r"_SERVICE_HOST$|_SERVICE_PORT(_[A-Z0-9_]+)?$|_PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?$"
)
_SERVICE_LINK_URL = re.compile(r"^(tcp|udp|sctp)://")


def _is_service_link(key: str, value: str) -> bool:
    if _SERVICE_LINK.search(key):
        return True
    return key.endswith("_PORT") and bool(_SERVICE_LINK_URL.match(value))


def _var(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def _convert(key: str, raw: str, type_name: object) -> Any:
    text = raw.strip()
    try:
        if type_name == "tuple[str, ...]":
            return tuple(part.strip() for part in text.split(",") if part.strip())
        if type_name == "int":
            return int(text)
        if type_name == "float":
            return float(text)
    except ValueError:
        raise ConfigError(f"{key}: {raw!r} is not a {type_name}") from None
    return text
