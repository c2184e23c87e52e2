"""Run ``hyperframe-train`` on this machine's ranks through the launcher's torchrun wrapper.

    python launch_driver.py NPROC PORT SHUTDOWN_TIMEOUT CONFIG RESULT

The process is what ``hyperframe-launch`` is in a pod (torchrun in-process, SIGTERM handled by
torchrun, exit code from :func:`hyperframe_runtime.launcher.run_torchrun`) without the resolved
job config and env it reads there. Writes the launch result as JSON to RESULT.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from hyperframe_runtime.launcher import TRAIN_MODULE, run_torchrun


def main(nproc: str, port: str, shutdown_timeout: str, config: str, result_path: str) -> int:
    result = run_torchrun(
        [
            "--nnodes=1",
            "--node-rank=0",
            f"--nproc-per-node={nproc}",
            "--master-addr=127.0.0.1",
            f"--master-port={port}",
            "--max-restarts=0",
            f"--shutdown-timeout={shutdown_timeout}",
            "--module",
            TRAIN_MODULE,
            "--config",
            config,
        ]
    )
    Path(result_path).write_text(json.dumps(asdict(result)), encoding="utf-8")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
