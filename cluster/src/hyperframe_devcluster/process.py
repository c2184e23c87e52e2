"""Starting, finding and stopping component processes through pid files, and waiting for readiness.

A pid file alone is not trusted: before signalling a pid, its command line must mention the
cluster's state directory (every component's flags do), so a recycled pid of an unrelated
process is never killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = [
    "ComponentNotReadyError",
    "log_tail",
    "running_pid",
    "start_component",
    "stop_component",
    "wait_until",
]

_PR_SET_PDEATHSIG = 1

# Components started by this process, by pid: kept referenced so that Popen objects are not
# collected (and warn) while their process runs, and waited for when stopped (no zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class ComponentNotReadyError(RuntimeError):
    """A component did not become ready in time (the message carries its log tail)."""


def log_tail(path: Path, lines: int = 40) -> str:
    """The last `lines` lines of a log file ('' if there is none)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def running_pid(pid_file: Path, marker: str) -> int | None:
    """The pid recorded in `pid_file` if that process is alive and its command line contains `marker`."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    cmdline = _cmdline(pid)
    child = _CHILDREN.get(pid)
    if child is not None:
        # Our own child: its exit status is the truth. Its command line reads empty for a moment
        # whenever it execs (e.g. a wrapper that execs the real binary), which is not an exit.
        if child.poll() is not None:
            return None
        return pid if not cmdline or marker in cmdline else None
    if marker not in cmdline or _is_zombie(pid):
        return None
    return pid


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the parent (e.g. pytest) dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_component(
    command: Sequence[str],
    log_file: Path,
    pid_file: Path,
    *,
    die_with_parent: bool,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a component in its own session, logging to `log_file`, and record its pid.

    `env` adds variables to this process's environment for the component."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
            env={**os.environ, **env} if env else None,
        )
    # Popen returns as soon as the child's execve has released the parent's memory, which is
    # before the kernel records the new argv: /proc/<pid>/cmdline reads empty for a moment (long
    # enough to see on a loaded machine), and the pid-file identity check would call the
    # component dead. Wait until its command line is readable.
    deadline = time.monotonic() + 5
    while not _cmdline(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    pid_file.write_text(f"{proc.pid}\n")
    _CHILDREN[proc.pid] = proc
    return proc


def stop_component(pid_file: Path, marker: str, *, grace_s: float = 10.0) -> bool:
    """SIGTERM the recorded process (SIGKILL after `grace_s`); remove the pid file. True if one ran."""
    pid = running_pid(pid_file, marker)
    stopped = False
    if pid is not None:
        stopped = True
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while running_pid(pid_file, marker) is not None and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.05)
        if running_pid(pid_file, marker) is not None:
            _signal(pid, signal.SIGKILL)
            while running_pid(pid_file, marker) is not None:
                _reap(pid)
                time.sleep(0.05)
        # An exiting process reads an empty command line before it is a zombie, so the checks
        # above can end early: wait until our own child is really gone (and reaped).
        child = _CHILDREN.pop(pid, None)
        if child is not None:
            try:
                child.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        _reap(pid)
    pid_file.unlink(missing_ok=True)
    return stopped


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our own child (no zombie left behind)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def wait_until(
    ready: Callable[[], bool],
    *,
    component: str,
    what: str,
    timeout_s: float,
    log_file: Path | None,
    alive: Callable[[], bool] | None = None,
    interval_s: float = 0.1,
) -> float:
    """Poll `ready` until it returns True; return the seconds waited.

    Raises ComponentNotReadyError with the component's log tail when the timeout passes or
    the process exits first.
    """
    start = time.monotonic()
    while True:
        if ready():
            return time.monotonic() - start
        if alive is not None and not alive():
            reason = "exited"
            break
        if time.monotonic() - start > timeout_s:
            reason = f"was not ready after {timeout_s:.0f}s"
            break
        time.sleep(interval_s)
    tail = log_tail(log_file) if log_file else ""
    where = f" (log: {log_file})" if log_file else ""
    raise ComponentNotReadyError(
        f"{component} {reason} while waiting for {what}{where}. Last log lines:\n{tail or '<empty log>'}"
    )
