"""The ``hyperframe`` command: ``render`` (like ``helm template``, no cluster), ``local`` and
``data`` (``data prepare``: token shards from text; both need hyperframe-runtime), and ``image
build`` (a job's own image FROM a runtime's framework image, :mod:`hyperframe.user_image`)."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.manifests import add_job_file_arguments, load_documents, select_job_and_runtime
from hyperframe.api.models import HyperFrameRuntime, parse_runtime
from hyperframe.constants import RUNTIME_KIND, RUNTIME_PLURAL
from hyperframe.images.repo import find_root
from hyperframe.render import RenderContext, render_job
from hyperframe.render.yamlout import dump_manifests
from hyperframe.user_image import BUILD_SCRIPT, admission_problem, build, dockerfile, plan_image

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


def _runtime_named(name: str, files: Sequence[str]) -> HyperFrameRuntime:
    """The HyperFrameRuntime ``name`` from ``files``, else from the cluster (kubectl)."""
    if files:
        found = [
            d
            for path in files
            for d in load_documents(path)
            if d.get("kind") == RUNTIME_KIND and (d.get("metadata") or {}).get("name") == name
        ]
        if not found:
            raise SpecError(
                [
                    FieldError(
                        "--from", f'HyperFrameRuntime "{name}" is not in {", ".join(files)}', "check the name"
                    )
                ]
            )
        return parse_runtime(found[-1])
    try:
        done = subprocess.run(
            ["kubectl", "get", f"{RUNTIME_PLURAL}.hyperframe.dev", name, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError as exc:
        raise SpecError(
            [
                FieldError(
                    "--from", f"cannot run kubectl ({exc.strerror})", "pass the runtime's file with --runtime"
                )
            ]
        ) from None
    if done.returncode != 0:
        raise SpecError(
            [
                FieldError(
                    "--from",
                    f"kubectl get hyperframeruntime {name}: {done.stderr.strip() or 'failed'}",
                    "check the name and KUBECONFIG, or pass the runtime's file with --runtime",
                )
            ]
        )
    return parse_runtime(json.loads(done.stdout))


def _image_build(args: argparse.Namespace) -> int:
    try:
        runtime = _runtime_named(args.from_runtime, args.runtime)
        image = plan_image(Path(args.dir), runtime, args.tag)
    except SpecError as exc:
        print("error: cannot build the image:", file=sys.stderr)
        for err in exc.errors:
            print(f"  {err}", file=sys.stderr)
        return 2
    if args.print_dockerfile:
        sys.stdout.write(dockerfile(image.framework))
        return 0
    try:
        root = find_root(Path.cwd())
    except FileNotFoundError:
        print(
            f"error: `hyperframe image build` runs the project's BuildKit ({BUILD_SCRIPT}) and needs a "
            "HyperFrame checkout: run it from one, or build the --print-dockerfile output with your own builder",
            file=sys.stderr,
        )
        return 2
    print(f"hyperframe image build: {image.project} FROM {image.framework} -> {image.name}", file=sys.stderr)
    try:
        reference = build(image, root)
    except subprocess.CalledProcessError as exc:
        print(f"error: the build failed (exit {exc.returncode}); BuildKit's log is above", file=sys.stderr)
        return 1
    problem = admission_problem(reference, runtime)
    if problem is not None:
        print(f"warning: a job naming this image will be refused: {problem}", file=sys.stderr)
    print(reference)
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
    image = sub.add_parser(
        "image", help="build a job's own image: `hyperframe image build DIR --from RUNTIME`"
    )
    image_sub = image.add_subparsers(dest="image_command", required=True)
    image_build = image_sub.add_parser(
        "build",
        help="build DIR FROM a runtime's framework image, push it and print the reference for spec.image",
        description="Build the project in DIR into an image FROM the framework image of HyperFrameRuntime "
        f"RUNTIME (the project is copied to /workspace, on PYTHONPATH), push it with the project's "
        f"BuildKit ({BUILD_SCRIPT}, as root) and print repo@sha256:... for the job's spec.image.",
    )
    image_build.add_argument("dir", help="the project directory (the build context)")
    image_build.add_argument(
        "--from", dest="from_runtime", required=True, metavar="RUNTIME", help="name of the HyperFrameRuntime"
    )
    image_build.add_argument(
        "--runtime",
        action="append",
        default=[],
        metavar="FILE",
        help="YAML file(s) holding the runtime (default: kubectl get hyperframeruntime RUNTIME)",
    )
    image_build.add_argument(
        "--tag", help="where to push, registry/repository[:tag] (default: $HYPERFRAME_REGISTRY/<dir name>)"
    )
    image_build.add_argument(
        "--print-dockerfile", action="store_true", help="print the Dockerfile and build nothing"
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
    if args.command == "image":
        return _image_build(args)
    if args.generation < 0:
        print("error: --generation must be >= 0", file=sys.stderr)
        return 2
    return _render(args)


if __name__ == "__main__":
    raise SystemExit(main())
