"""``python -m hyperframe.controller``: run the operator with settings from ``HYPERFRAME_*`` variables."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys

import kopf

from .app import Controller
from .config import ConfigError, OperatorConfig
from .handlers import build_registry


def main() -> int:
    # `kill -USR1 <pid>` prints every thread's stack to stderr: what a stuck operator is doing.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        config = OperatorConfig.from_env(os.environ)
    except ConfigError as exc:
        lines = "".join(f"\n  {error}" for error in exc.errors)
        print(
            f"hyperframe operator: bad configuration (fix these variables and start it again):{lines}",
            file=sys.stderr,
        )
        return 2
    kopf.configure(
        verbose=config.log_level.upper() == "DEBUG",
        log_format=kopf.LogFormat.JSON if config.log_format == "json" else kopf.LogFormat.FULL,
    )
    logging.getLogger().setLevel(config.log_level.upper())
    if config.log_level.upper() != "DEBUG":
        # kopf logs every handled watch event at INFO; the controller logs the transitions instead.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    controller = Controller(config)
    try:
        controller.metrics.serve(config.metrics_port)
    except OSError as exc:
        print(f"hyperframe operator: metrics port {config.metrics_port}: {exc}", file=sys.stderr)
        return 2
    kopf.run(
        registry=build_registry(controller),
        clusterwide=not config.namespaces,
        namespaces=config.namespaces,
        # kopf only feeds the caches (reads). Which replica acts is the Lease's job
        # (controller/leader.py): kopf peering would pause kopf's handlers only, not the work
        # queue, timers and progress endpoint, and needs CRDs of its own.
        standalone=True,
        liveness_endpoint=f"http://0.0.0.0:{config.liveness_port}/healthz" if config.liveness_port else None,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
