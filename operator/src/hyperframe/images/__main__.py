"""`python -m hyperframe.images COMMAND`: the pin matrix tooling behind `make generate` and
`images/build.sh`.

  validate             validate images/matrix.yaml; print one line per profile
  generate             write every generated file that is stale
  check [--release]    exit 1 when a generated file is stale; --release also when an image
                       of a profile was never pushed (its runtime would carry the zero digest)
  resolve [--write]    re-read base digests and torch NCCL pins from the registries
  record-push FILE     merge the digests of `docker buildx bake --metadata-file FILE` into
                       images/published.yaml, then regenerate
  sizes                layer sizes of the Python environment running this command
  local-profiles       the names of the profiles `make images` builds here (release: false)
  rootfs PROFILE       make (or reuse) the profile's debootstrap root filesystem; print the
                       bake variables naming it: ROOTFS_<P>_DIR=... and ROOTFS_<P>_SHA256=...
  stage-wheels PROFILE OUT [--wheelhouse DIR]
                       hard-link the wheels the profile's images install into OUT
  write-local PROFILE REGISTRY METADATA OUT
                       write digests.json, values-local.yaml and runtimes-local.yaml into OUT
                       from a `buildx bake --metadata-file` of the push to REGISTRY
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from hyperframe.images.generate import stale_files, write_files
from hyperframe.images.published import (
    PUBLISHED_FILE,
    digests_from_bake_metadata,
    load_published,
    render_published,
)
from hyperframe.images.repo import MATRIX_FILE, find_root, load_matrix
from hyperframe.images.validate import MatrixError

__all__ = ["main"]


def _validate(root: Path) -> int:
    m = load_matrix(root)
    print(f"{MATRIX_FILE}: valid, release {m.version}, {len(m.profiles)} profiles")
    for p in m.profiles:
        cuda = f"CUDA {p.cuda}" if p.cuda else "CPU"
        mark = " (default)" if p.default else ""
        print(
            f"  {p.name}{mark}: {cuda}, Python {p.python}, torch {p.torch.local_version}, NCCL {p.torch.nccl or 'none'}"
        )
    return 0


def _generate(root: Path) -> int:
    written = write_files(root, load_matrix(root), load_published(root))
    for rel in written:
        print(f"wrote {rel}")
    if not written:
        print("generated files are up to date")
    return 0


def _check(root: Path, release: bool) -> int:
    m = load_matrix(root)
    published = load_published(root)
    status = 0
    stale = stale_files(root, m, published)
    if stale:
        print("stale generated files (run `make generate` and commit):", *stale, sep="\n  ", file=sys.stderr)
        status = 1
    if release:
        missing = [
            ref for p in m.profiles for ref in (m.base_image(p), m.framework_image(p)) if ref not in published
        ]
        if m.operator_image() not in published:
            missing.append(m.operator_image())
        if missing:
            print(
                "not pushed, so the default runtimes would not pull (run images/build.sh --push):",
                *missing,
                sep="\n  ",
                file=sys.stderr,
            )
            status = 1
    if status == 0:
        print("generated files are up to date" + (" and every image is published" if release else ""))
    return status


def _resolve(root: Path, write: bool) -> int:
    from hyperframe.images.resolve import pip_nccl_reader, registry_digest_reader, resolve_matrix_text

    path = root / MATRIX_FILE
    text, changes = resolve_matrix_text(
        path.read_text(encoding="utf-8"),
        load_matrix(root),
        digest_of=registry_digest_reader,
        nccl_of=pip_nccl_reader,
        today=datetime.date.today().isoformat(),
    )
    for change in changes:
        print(change)
    if not changes:
        print("every pin matches the registries")
    if write:
        path.write_text(text, encoding="utf-8")
        load_matrix(root)  # the rewritten matrix must still validate
        print(f"wrote {MATRIX_FILE} (sources updated); run `make generate`")
    return 0


def _record_push(root: Path, metadata_file: Path) -> int:
    pushed = digests_from_bake_metadata(metadata_file.read_text(encoding="utf-8"))
    if not pushed:
        print(f"{metadata_file}: no pushed image digests found", file=sys.stderr)
        return 1
    published = {**load_published(root), **pushed}
    (root / PUBLISHED_FILE).write_text(render_published(published), encoding="utf-8")
    print(f"recorded {len(pushed)} digests in {PUBLISHED_FILE}")
    return _generate(root)


def _sizes() -> int:
    from hyperframe.images.sizes import layer_sizes, render_sizes

    print(render_sizes(layer_sizes()))
    return 0


def _local(root: Path, args: argparse.Namespace) -> int:
    from hyperframe.images import local
    from hyperframe.images.generate import rootfs_variables

    m = load_matrix(root)
    if args.command == "local-profiles":
        print(" ".join(p.name for p in m.local_profiles))
        return 0
    p = m.profile(args.profile)
    if args.command == "rootfs":
        directory, digest = local.make_rootfs(p, local.cache_dir())
        dir_var, sha_var = rootfs_variables(p)
        print(f"{dir_var}={directory}\n{sha_var}={digest}")
        return 0
    if args.command == "stage-wheels":
        names = local.stage_wheels(root, p, args.wheelhouse, args.out)
        print(f"staged {len(names)} wheels of profile {p.name} in {args.out}", file=sys.stderr)
        return 0
    written = local.write_cluster_files(
        root, m, p, args.registry, args.metadata.read_text(encoding="utf-8"), args.out
    )
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperframe.images", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=None, help="repository root (default: found from cwd)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("validate", help="validate images/matrix.yaml")
    sub.add_parser("generate", help="write the stale generated files")
    check = sub.add_parser("check", help="fail when a generated file is stale")
    check.add_argument("--release", action="store_true", help="also fail when an image was never pushed")
    resolve = sub.add_parser("resolve", help="re-read digests and NCCL pins from the registries")
    resolve.add_argument("--write", action="store_true", help="rewrite images/matrix.yaml")
    record = sub.add_parser("record-push", help="record pushed digests from a bake metadata file")
    record.add_argument("metadata_file", type=Path)
    sub.add_parser("sizes", help="layer sizes of this Python environment")
    sub.add_parser("local-profiles", help="the profiles make images builds here")
    rootfs = sub.add_parser("rootfs", help="make the debootstrap root filesystem of a profile")
    rootfs.add_argument("profile")
    stage = sub.add_parser("stage-wheels", help="stage the wheels a wheelhouse profile installs")
    stage.add_argument("profile")
    stage.add_argument("out", type=Path)
    stage.add_argument(
        "--wheelhouse",
        type=Path,
        default=Path.home() / ".cache/hyperframe/wheels",
        help="the project's wheelhouse",
    )
    write_local = sub.add_parser("write-local", help="write the development cluster's image files")
    write_local.add_argument("profile")
    write_local.add_argument("registry")
    write_local.add_argument("metadata", type=Path)
    write_local.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "sizes":
        return _sizes()
    root = args.root.resolve() if args.root else find_root()
    try:
        if args.command == "validate":
            return _validate(root)
        if args.command == "generate":
            return _generate(root)
        if args.command == "check":
            return _check(root, args.release)
        if args.command == "resolve":
            return _resolve(root, args.write)
        if args.command in ("local-profiles", "rootfs", "stage-wheels", "write-local"):
            return _local(root, args)
        return _record_push(root, args.metadata_file)
    except MatrixError as err:
        print(err, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
