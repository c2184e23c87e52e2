"""Running the pinned `kubectl` against one cluster, as a user would."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from . import paths

__all__ = ["Kubectl", "KubectlError", "poll"]

T = TypeVar("T")


class KubectlError(RuntimeError):
    """kubectl exited non-zero; the message holds the command and its stderr."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.args_ = args
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True, slots=True)
class Kubectl:
    """`kubectl --kubeconfig <kubeconfig> ...` with the binary pinned in versions.env."""

    kubeconfig: Path
    binary: Path | None = None
    timeout_s: float = 60.0

    def command(self, *args: str) -> list[str]:
        exe = self.binary or paths.kubectl()
        # Discovery is cached next to the kubeconfig: each cluster has a new port, and the default
        # cache (~/.kube/cache, keyed by host:port) would collect one stale entry per test session.
        cache = self.kubeconfig.parent / "kube-cache"
        return [str(exe), f"--kubeconfig={self.kubeconfig}", f"--cache-dir={cache}", *args]

    def run(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl; raise KubectlError on a non-zero exit when `check`."""
        result = subprocess.run(
            self.command(*args),
            input=input,
            capture_output=True,
            text=True,
            timeout=self.timeout_s,
            check=False,
        )
        if check and result.returncode != 0:
            raise KubectlError(list(args), result.returncode, result.stderr)
        return result

    def json(self, *args: str) -> Any:
        """`kubectl <args> -o json`, parsed."""
        return json.loads(self.run(*args, "-o", "json").stdout)

    def apply(
        self, objects: Iterable[Mapping[str, Any]], *, namespace: str | None = None, server_side: bool = False
    ) -> None:
        """`kubectl apply -f -` of the given objects (sent as a JSON List), into `namespace` if given."""
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        extra = ["--server-side", "--force-conflicts"] if server_side else []
        ns = ["-n", namespace] if namespace else []
        self.run("apply", *ns, *extra, "-f", "-", input=body)

    def apply_file(self, path: Path) -> None:
        self.run("apply", "-f", str(path))

    def annotate(
        self, kind: str, name: str, annotations: Mapping[str, str | None], namespace: str | None = None
    ) -> None:
        """Set (value) or remove (None) annotations on one object, overwriting existing ones."""
        pairs = [f"{key}-" if value is None else f"{key}={value}" for key, value in annotations.items()]
        ns = ["-n", namespace] if namespace else []
        self.run("annotate", *ns, "--overwrite", kind, name, *pairs)


def poll(
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.2,
) -> T:
    """Call `fetch` until `done(result)`; return that result or raise TimeoutError naming `what`.

    The error carries the last value seen, so a failing test shows what the state was instead.
    """
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while True:
        last = fetch()
        if done(last):
            return last
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"timed out after {timeout_s:.0f}s waiting for {what}; last seen: {last!r}"[:4000]
            )
        time.sleep(interval_s)
