"""Run every benchmark in turn (``make bench``); a failing one is reported and the rest still run.

Each benchmark is a module ``bench.NAME`` with a ``main()``; add yours to BENCHES.
``python -m bench NAME ...`` runs only the named ones.
"""

from __future__ import annotations

import subprocess
import sys

# gpu_profile is left out: it needs CUDA (run it by hand on a GPU machine).
BENCHES: tuple[str, ...] = (
    "schedules",
    "partitioner",
    "activation_memory",
    "uneven_ranks",
    "smoke_gate",
    "real_cpu",
    "split_backward",
    "data_pipeline",
    "stage_moves",
    "render_scale",
    "cluster_startup",
    "operator_scale",
)


def main() -> int:
    only = sys.argv[1:]
    failed = []
    for name in BENCHES:
        if only and name not in only:
            continue
        print(f"\n=== bench.{name} ===", flush=True)
        if subprocess.run([sys.executable, "-m", f"bench.{name}"], check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
