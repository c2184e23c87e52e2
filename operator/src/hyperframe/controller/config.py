"""The operator's settings: one documented class, read from ``HYPERFRAME_*`` variables, validated at load.

Every field below maps to one environment variable: the field name upper-cased with the prefix
``HYPERFRAME_`` (``api_qps`` is ``HYPERFRAME_API_QPS``). A bad value stops the operator at start
with a message that names the variable and the fix; it never surfaces later in a handler.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from hyperframe.api.codec import check
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.fields import Format, value_rules
from hyperframe.api.introspect import Shape, model_fields
from hyperframe.constants import RESERVED_ENV

__all__ = ["ENV_PREFIX", "ConfigError", "OperatorConfig"]

ENV_PREFIX = "HYPERFRAME_"


class ConfigError(SpecError):
    """``HYPERFRAME_*`` variables with values the operator cannot use: one line each, ``VAR: problem: fix``."""


_PORT: Final[dict[str, Any]] = {"minimum": 0, "maximum": 65535}
_POSITIVE: Final[dict[str, Any]] = {"minimum": 0, "exclusive_minimum": True, "finite": True}
_HTTP_URL: Final = Format(
    r"^(https?://.+)?$",
    "an http:// or https:// URL",
    "https://hyperframe-operator.hyperframe.svc:8081",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorConfig:
    """How the operator runs. Defaults suit a production cluster; tests shorten the backoffs.

    Each field's rules are declared with it and checked by the job API's codec on construction
    (:func:`hyperframe.api.codec.check`); every problem is named by its variable, as
    ``HYPERFRAME_<FIELD>: problem: fix``, all at once."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch, comma-separated. Empty (the default) watches the whole cluster."""
    api_qps: float = field(default=200.0, metadata=value_rules(**_POSITIVE))
    """Sustained Kubernetes API requests per second of the operator's own client (not kopf's watches):
    about 20 per 4-pod job, so 200 lets it start about 10 such jobs per second."""
    api_burst: int = field(default=400, metadata=value_rules(minimum=1))
    """Requests the client may send at once above ``api_qps`` before it is throttled."""
    workers: int = field(default=16, metadata=value_rules(minimum=1))
    """Jobs reconciled concurrently; also the size of the API thread pool and connection pool."""
    lease_name: str = "hyperframe-operator"
    """coordination.k8s.io Lease the replicas elect their one active replica with; the empty
    string turns election off, and then exactly one replica may run."""
    lease_namespace: str = ""
    """Namespace of the Lease; empty: the operator pod's own namespace (``default`` outside a pod)."""
    lease_duration_seconds: float = field(default=15.0, metadata=value_rules(**_POSITIVE))
    """How long a standby waits after the Lease's last renewal before it takes over."""
    lease_renew_deadline_seconds: float = field(default=10.0, metadata=value_rules(**_POSITIVE))
    """A leader that could not renew for this long stops acting (must be < the lease duration)."""
    lease_retry_seconds: float = field(default=2.0, metadata=value_rules(**_POSITIVE))
    """How often the leader renews and a standby reads the Lease (must be < the renew deadline)."""
    pod_name: str = ""
    """The operator's own pod (the chart sets it from the downward API). With a Lease, the leader
    labels this pod ``hyperframe.dev/operator-leader=true`` and removes the label when it stops
    leading, so a Service selecting that label sends the progress posts to the leader alone.
    Empty (outside a pod): no label."""
    pod_namespace: str = ""
    """Namespace of ``pod_name``; empty: the service account's namespace (``default`` outside a pod)."""
    liveness_port: int = field(default=8080, metadata=value_rules(**_PORT))
    """Port of kopf's liveness endpoint ``/healthz``; 0 disables it."""
    metrics_port: int = field(default=9090, metadata=value_rules(**_PORT))
    """Port of the Prometheus ``/metrics`` endpoint; 0 disables it."""
    status_port: int = field(default=8081, metadata=value_rules(**_PORT))
    """Port of the progress endpoint the training pods post to; 0 disables progress reporting."""
    status_endpoint_url: str = field(default="", metadata=value_rules(fmt=_HTTP_URL))
    """Base URL the pods use to reach the progress endpoint (``https://<service>.<ns>.svc:8081``).
    Empty disables progress reporting: pods get no status URL."""
    status_tls_cert_file: str = ""
    """PEM serving certificate (chain) of the progress endpoint; empty serves plain HTTP."""
    status_tls_key_file: str = ""
    """PEM private key of that certificate."""
    status_tls_ca_file: str = ""
    """PEM CA that signed the serving certificate; each job's ConfigMap carries it to the pods,
    which trust only it for the progress endpoint."""
    restart_backoff_seconds: float = field(default=10.0, metadata=value_rules(**_POSITIVE))
    """Wait before the first gang restart; doubled for each further restart."""
    restart_backoff_max_seconds: float = field(default=300.0, metadata=value_rules(**_POSITIVE))
    """Upper bound of the doubling restart backoff."""
    node_not_ready_grace_seconds: float = field(default=30.0, metadata=value_rules(minimum=0, finite=True))
    """How long a node may be NotReady under a gang before its pods are force-deleted and the gang restarts."""
    terminating_grace_seconds: float = field(default=60.0, metadata=value_rules(minimum=0, finite=True))
    """How long a pod may sit in Terminating before the operator force-deletes it."""
    pod_resync_seconds: float = field(default=120.0, metadata=value_rules(**_POSITIVE))
    """How often the active replica lists the pods again; a pod deleted while no watch saw it leaves
    the cache within this time."""
    unschedulable_timeout_seconds: float = field(default=300.0, metadata=value_rules(**_POSITIVE))
    """How long a gang's pod may stay unschedulable (``PodScheduled=False/Unschedulable``) before
    the job gets the ``Unschedulable`` condition and event, and ``unschedulable_action`` applies."""
    unschedulable_action: Literal["Fail", "Wait"] = "Fail"
    """``Fail``: the job then fails with reason ``Unschedulable``; ``Wait``: it keeps waiting with
    the condition set until the gang is placed."""
    progress_flush_seconds: float = field(default=10.0, metadata=value_rules(**_POSITIVE, maximum=30))
    """Most frequent ``status.progress`` write per job; reports in between are coalesced (must be <= 30)."""
    log_format: Literal["json", "text"] = "json"
    """``json`` (one object per line) or ``text``."""
    log_level: str = "INFO"
    """Python logging level name."""

    def __post_init__(self) -> None:
        errors = [FieldError(_var(e.path), e.problem, e.fix) for e in check(self)]

        def bad(name: str, problem: str, fix: str) -> None:
            errors.append(FieldError(_var(name), problem, fix))

        retry, renew, lease = (
            self.lease_retry_seconds,
            self.lease_renew_deadline_seconds,
            self.lease_duration_seconds,
        )
        if not errors and not retry < renew < lease:
            bad(
                "lease_retry_seconds",
                f"{retry} s, a renew deadline of {renew} s and a lease of {lease} s are not in increasing "
                "order, so two replicas could act at once",
                f"keep {_var('lease_retry_seconds')} < {_var('lease_renew_deadline_seconds')} < "
                f"{_var('lease_duration_seconds')} (the defaults are 2 < 10 < 15)",
            )
        if bool(self.status_tls_cert_file) != bool(self.status_tls_key_file):
            given, missing = ("cert", "key") if self.status_tls_cert_file else ("key", "cert")
            problem = f"required with {_var(f'status_tls_{given}_file')}"
            bad(f"status_tls_{missing}_file", problem, "set both (HTTPS) or neither (plain HTTP)")
        if self.status_tls_cert_file and not self.status_tls_ca_file:
            fix = "set it to the PEM CA that signed the certificate; the pods trust only it"
            bad("status_tls_ca_file", "required with a serving certificate", fix)
        if self.status_tls_cert_file and self.status_endpoint_url.startswith("http://"):
            problem = f'"{self.status_endpoint_url}" is plain HTTP but the endpoint serves HTTPS'
            bad("status_endpoint_url", problem, "use https://")
        if self.log_level.upper() not in _LOG_LEVELS:
            bad("log_level", f'unknown level "{self.log_level}"', "use " + ", ".join(_LOG_LEVELS))
        if errors:
            raise ConfigError(errors)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OperatorConfig:
        """Read every field from ``HYPERFRAME_<FIELD>``; unknown ``HYPERFRAME_*`` names are errors.
        Raises :class:`ConfigError` naming every bad variable."""
        known = {_var(f.name): (f.name, shape) for f, shape in model_fields(cls)}
        values: dict[str, Any] = {}
        errors: list[FieldError] = []
        for key, raw in env.items():
            if not key.startswith(ENV_PREFIX) or key in _NOT_OPERATOR_SETTINGS:
                continue
            if key in known:
                name, shape = known[key]
                values[name] = _convert(raw, shape)
            elif not _is_service_link(key, raw):
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"did you mean {close[0]}?" if close else "known: " + ", ".join(sorted(known))
                errors.append(
                    FieldError(key, "not an operator setting", f"remove it or fix the spelling ({hint})")
                )
        try:
            config = cls(**values)
        except ConfigError as exc:
            errors += exc.errors
        if errors:
            raise ConfigError(errors)
        return config


_LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")

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


def _convert(raw: str, shape: Shape) -> Any:
    """A variable's text as the field's type; text that is not one is kept for the codec to name."""
    text = raw.strip()
    if shape.kind == "list":
        return tuple(part.strip() for part in text.split(",") if part.strip())
    try:
        if shape.kind == "int":
            return int(text)
        if shape.kind == "float":
            return float(text)
    except ValueError:
        pass
    return text
