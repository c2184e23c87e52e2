"""Component processes: pid files that are verified before use, stopping, readiness waits.

Covers: a pid file only counts while its process runs and names the marker (a recycled pid is
never signalled); stop removes the pid file and leaves no process; a readiness timeout or an
exited process raises an error carrying the component's log tail.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hyperframe_devcluster.process import (
    ComponentNotReadyError,
    running_pid,
    start_component,
    stop_component,
    wait_until,
)


def sleeper(tmp_path: Path, *, text: str = "started") -> list[str]:
    code = f"import sys, time; print({text!r}, flush=True); time.sleep(60)"
    return [sys.executable, "-c", code, str(tmp_path)]


def test_pid_file_is_trusted_only_for_a_live_process_naming_the_marker(tmp_path: Path) -> None:
    proc = start_component(sleeper(tmp_path), tmp_path / "c.log", tmp_path / "c.pid", die_with_parent=True)
    try:
        assert running_pid(tmp_path / "c.pid", str(tmp_path)) == proc.pid
        assert running_pid(tmp_path / "c.pid", "/some/other/cluster") is None
    finally:
        stop_component(tmp_path / "c.pid", str(tmp_path))


def test_stop_terminates_the_process_and_removes_the_pid_file(tmp_path: Path) -> None:
    proc = start_component(sleeper(tmp_path), tmp_path / "c.log", tmp_path / "c.pid", die_with_parent=True)

    assert stop_component(tmp_path / "c.pid", str(tmp_path)) is True

    assert proc.poll() is not None
    assert not (tmp_path / "c.pid").exists()
    assert stop_component(tmp_path / "c.pid", str(tmp_path)) is False


def test_a_stale_pid_file_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "c.pid").write_text(f"{os.getpid()}\n")  # alive, but not a component
    assert running_pid(tmp_path / "c.pid", str(tmp_path / "elsewhere")) is None


def test_wait_until_reports_the_log_tail_on_timeout(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)) + "F1129 fatal: bind: address already in use\n")

    with pytest.raises(
        ComponentNotReadyError, match=r"(?s)kube-apiserver was not ready after 0s.*address already in use"
    ):
        wait_until(lambda: False, component="kube-apiserver", what="/readyz", timeout_s=0.2, log_file=log)


def test_wait_until_stops_early_when_the_process_exits(tmp_path: Path) -> None:
    with pytest.raises(ComponentNotReadyError, match="etcd exited while waiting for /health"):
        wait_until(
            lambda: False, component="etcd", what="/health", timeout_s=60, log_file=None, alive=lambda: False
        )


def test_an_own_child_that_execs_again_stays_running_and_gets_its_environment(tmp_path: Path) -> None:
    # A wrapper shell that execs the real program: between the two execs the command line reads
    # empty, which must never count as an exit (Kueue "exited" with an empty log on CI that way).
    script = f'echo "dir=$COMPONENT_DIR"; exec {sys.executable} -c "import time; time.sleep(60)" {tmp_path}'
    proc = start_component(
        ["sh", "-c", script, str(tmp_path)],
        tmp_path / "c.log",
        tmp_path / "c.pid",
        die_with_parent=True,
        env={"COMPONENT_DIR": "/from/env"},
    )
    try:
        for _ in range(200):
            assert running_pid(tmp_path / "c.pid", str(tmp_path)) == proc.pid
        wait_until(
            lambda: "dir=/from/env" in (tmp_path / "c.log").read_text(),
            component="c",
            what="its output",
            timeout_s=10,
            log_file=tmp_path / "c.log",
        )
    finally:
        stop_component(tmp_path / "c.pid", str(tmp_path))
    assert running_pid(tmp_path / "c.pid", str(tmp_path)) is None
