"""`python -m hyperframe_devcluster up|down|status|env` (what `make cluster-up/-down` run)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import paths
from .cluster import LocalCluster
from .config import ClusterConfig
from .prereqs import PrerequisiteError
from .process import ComponentNotReadyError


def _link_client_binaries(state_dir: Path) -> Path:
    """`<state>/bin/{kubectl,helm,...}` symlinks to the pinned binaries, for PATH."""
    bin_dir = state_dir / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in paths.BINARIES:
        link = bin_dir / name
        link.unlink(missing_ok=True)
        link.symlink_to(paths.binary(name))
    return bin_dir


def _env_lines(cluster: LocalCluster) -> list[str]:
    bin_dir = cluster.config.state_dir / "bin"
    lines = [
        f"export KUBECONFIG={cluster.kubeconfig}",
        f'export PATH="{bin_dir}:$PATH"  # pinned kubectl and helm',
    ]
    registry = cluster.registry()
    if registry is not None:
        lines.append(f"export HYPERFRAME_REGISTRY={registry}  # the real node pulls from here (make images)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperframe_devcluster", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status", "env"])
    parser.add_argument(
        "--state-dir", type=Path, default=None, help="default: $HYPERFRAME_CLUSTER_DIR or .cluster/dev"
    )
    parser.add_argument(
        "--restart", action="store_true", help="up: restart even if the cluster is already up"
    )
    args = parser.parse_args(argv)

    state_dir = (args.state_dir or paths.cluster_dir()).resolve()
    if args.command == "up":
        cluster = LocalCluster(ClusterConfig.from_env(state_dir))
    else:
        # down/status/env describe the cluster as it was started, whatever this shell's settings.
        cluster = LocalCluster(ClusterConfig.from_state(state_dir))
    if args.command == "up":
        try:
            report = cluster.up(reuse=not args.restart)
            _link_client_binaries(state_dir)
        except (paths.BinaryMissingError, ComponentNotReadyError, PrerequisiteError) as error:
            print(f"cluster up failed: {error}", file=sys.stderr)
            return 1
        if report.reused:
            print(f"cluster already up (state: {state_dir})")
        else:
            steps = ", ".join(f"{name} {secs:.1f}s" for name, secs in report.steps.items())
            print(f"cluster up in {report.total_s:.1f}s ({steps}); state: {state_dir}")
        print("\n".join(_env_lines(cluster)))
        return 0
    if args.command == "down":
        stopped = cluster.down()
        print(f"stopped: {', '.join(stopped)}" if stopped else f"nothing running in {state_dir}")
        return 0
    if args.command == "status":
        running = cluster.running_components()
        print(f"state: {state_dir}")
        print(f"running: {', '.join(running) or 'none'}; apiserver ready: {cluster.apiserver_ready()}")
        return 0 if cluster.is_up() else 1
    print("\n".join(_env_lines(cluster)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
