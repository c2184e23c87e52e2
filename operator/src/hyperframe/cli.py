"""The ``hyperframe`` command: ``render`` (like ``helm template``, no cluster), ``local`` and
``data`` (``data prepare``: token shards from text; both need hyperframe-runtime)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.manifests import add_job_file_arguments, load_documents, select_job_and_runtime
from hyperframe.render import RenderContext, render_job
from hyperframe.render.yamlout import dump_manifests

__all__ = ["main"]


def _render(args: argparse.Namespace) -> int:
    try:
        docs = load_documents(args.job)
        extra = [d for path in args.runtime for d in load_documents(path)]
        job, runtime = select_job_and_runtime(docs, extra)
        job = _with_namespace(job, args.namespace)
        ctx = RenderContext(gang_generation=args.generation, excluded_nodes=tuple(args.exclude_node))
        objects = render_job(job, runtime, ctx)
    except SpecError as exc:
        print(f"error: cannot render {args.job}:", file=sys.stderr)
        for err in exc.errors:
            print(f"  {err}", file=sys.stderr)
        return 1
    sys.stdout.write(dump_manifests(objects))
    return 0


def _with_namespace(job: Mapping[str, Any], namespace: str | None) -> Mapping[str, Any]:
    """Like ``kubectl -n``: fills in the job's namespace; a different one in the file is an error."""
    if namespace is None:
        return job
    meta = dict(job.get("metadata") or {})
    if meta.get("namespace") not in (None, namespace):
        raise SpecError(
            [
                FieldError(
                    "metadata.namespace",
                    f'is "{meta["namespace"]}" but --namespace is "{namespace}"',
                    "drop one of them",
                )
            ]
        )
    meta["namespace"] = namespace
    return {**job, "metadata": meta}


def _local(argv: list[str], command: str = "local", module: str = "hyperframe_runtime.local") -> int:
    try:
        local = importlib.import_module(module)
    except ImportError as exc:
        print(
            f"error: `hyperframe {command}` needs the hyperframe-runtime package (torch), which is not "
            f"importable here ({exc}); install it: pip install hyperframe-runtime",
            file=sys.stderr,
        )
        return 2
    code = local.main(argv)
    return int(code or 0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hyperframe", description="HyperFrame: distributed PyTorch on Kubernetes."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser(
        "render",
        help="print the manifests a HyperFrameJob becomes (no cluster needed)",
        description="Render a HyperFrameJob into Kubernetes manifests (multi-document YAML on stdout). "
        "The runtime it references may be in the same file or in --runtime files.",
    )
    add_job_file_arguments(render)
    render.add_argument(
        "-n", "--namespace", help="namespace of the job when its metadata has none (default: default)"
    )
    render.add_argument("--generation", type=int, default=0, help="gang generation to render (default 0)")
    render.add_argument(
        "--exclude-node",
        action="append",
        default=[],
        metavar="NODE",
        help="node to keep the pods off (repeatable)",
    )
    sub.add_parser(
        "local",
        help="run a HyperFrameJob as processes on this machine (CPU/gloo; needs hyperframe-runtime)",
        add_help=False,
    )
    sub.add_parser(
        "data",
        help="prepare training data: `hyperframe data prepare TEXT... -o DIR` (needs hyperframe-runtime)",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["local"]:
        return _local(args_list[1:])
    if args_list[:1] == ["data"]:
        return _local(args_list[1:], "data", "hyperframe_runtime.data.prepare")
    args = _parser().parse_args(args_list)
    if args.generation < 0:
        print("error: --generation must be >= 0", file=sys.stderr)
        return 2
    return _render(args)


if __name__ == "__main__":
    raise SystemExit(main())
