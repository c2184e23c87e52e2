"""The processes of one cluster: started with a log and a pid file under its state directory,
found again by pid file (verified against the state directory), waited for and stopped.

The control plane (cluster.py) and the real node (node.py) both run their components through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .config import ClusterConfig
from .process import running_pid, start_component, stop_component, wait_until

__all__ = ["Supervisor"]


@dataclass(frozen=True, slots=True)
class Supervisor:
    config: ClusterConfig

    @property
    def marker(self) -> str:
        """What every component's command line names: the state directory."""
        return str(self.config.state_dir)

    def pid(self, component: str) -> int | None:
        return running_pid(self.config.pid_file(component), self.marker)

    def launch(self, component: str, command: list[str], env: Mapping[str, str] | None = None) -> None:
        start_component(
            command,
            self.config.log_file(component),
            self.config.pid_file(component),
            die_with_parent=self.config.die_with_parent,
            env=env,
        )

    def wait(self, component: str, what: str, ready: Callable[[], bool]) -> None:
        """Poll `ready`; fail with the component's log tail if it exits or times out first."""
        wait_until(
            ready,
            component=component,
            what=what,
            timeout_s=self.config.start_timeout_s,
            log_file=self.config.log_file(component),
            alive=lambda: self.pid(component) is not None,
        )

    def stop(self, component: str) -> bool:
        """Stop the component if it runs (SIGTERM, then SIGKILL); True if it ran."""
        return stop_component(self.config.pid_file(component), self.marker)
