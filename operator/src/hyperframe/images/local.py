"""What `make images` needs around the BuildKit build of a local profile (images/build.sh):

- the Debian root filesystem of a debootstrap base, made once and cached by its command;
- the wheels the profile's pip steps read, hard-linked from the project's wheelhouse (no second
  download of torch; a wheel missing from the wheelhouse is fetched into it, as `make venv` does);
- after the push, the digests the registry holds, written for the development cluster as
  digests.json, values-local.yaml (`helm install -f`) and runtimes-local.yaml (`hyperframe render
  --runtime`). Nothing committed changes on a build.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hyperframe.constants import RUNTIME_KIND
from hyperframe.images.generate import LABEL_PROFILE, runtime_manifest
from hyperframe.images.matrix import DebootstrapBase, Matrix, Profile
from hyperframe.images.published import digests_from_bake_metadata

__all__ = [
    "LocalImages",
    "cache_dir",
    "link_exactly",
    "local_images",
    "make_rootfs",
    "profile_requirements",
    "stage_wheels",
    "write_cluster_files",
]

ROOTFS_TAR = "rootfs.tar"
# Not part of an image: the container runtime mounts /dev, /proc and /sys, and device nodes in a
# layer would need mknod where the image is unpacked.
ROOTFS_EXCLUDES = ("./dev/*", "./proc/*", "./sys/*", "./run/*", "./tmp/*", "./var/cache/apt/archives/*.deb")
# The example runtimes whose images a local build replaces, so `hyperframe render examples/...
# --runtime runtimes-local.yaml` renders pods of the local images (matched by runtime name).
EXAMPLES_DIR = Path("examples")


def cache_dir() -> Path:
    """Per-user cache of `make images`: root filesystems, staged wheels, BuildKit's state."""
    env = os.environ.get("HYPERFRAME_IMAGES_CACHE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "hyperframe" / "images"


def _log(message: str) -> None:
    print(f">> {message}", file=sys.stderr, flush=True)


# --- the debootstrap root filesystem -------------------------------------------------------------


def _rootfs_key(base: DebootstrapBase) -> str:
    return hashlib.sha256(base.command.encode()).hexdigest()[:16]


def make_rootfs(p: Profile, cache: Path) -> tuple[Path, str]:
    """The directory holding rootfs.tar for profile p, and the tarball's sha256 (hex).

    Made once per debootstrap command (the cache key); an older root filesystem of the same profile
    is removed, so the cache holds one per profile.
    """
    if not isinstance(p.base, DebootstrapBase):
        raise ValueError(f"profiles.{p.name}.base: not a debootstrap base")
    base = p.base
    root = cache / "rootfs"
    out = root / f"{p.name}-{_rootfs_key(base)}"
    tar, digest_file = out / ROOTFS_TAR, out / f"{ROOTFS_TAR}.sha256"
    if tar.is_file() and digest_file.is_file():
        return out, digest_file.read_text(encoding="utf-8").strip()
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed; apt-get install debootstrap")
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob(f"{p.name}-*"):
        shutil.rmtree(old, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=f"{p.name}-", suffix=".tmp", dir=root))
    try:
        tree = work / "tree"
        command = base.command.replace("ROOTFS", str(tree)).split()
        _log(f"making the {p.name} root filesystem: {' '.join(command)}")
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        # Deterministic: sorted names, numeric owners, fixed mtimes; the sha256 names this tree.
        excludes = [f"--exclude={pattern}" for pattern in ROOTFS_EXCLUDES]
        subprocess.run(
            [
                "tar", "--sort=name", "--numeric-owner", "--mtime=@0", "--xattrs",
                "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
                *excludes, "-C", str(tree), "-cf", str(work / ROOTFS_TAR), ".",
            ],
            check=True,
        )  # fmt: skip
        digest = _sha256(work / ROOTFS_TAR)
        (work / f"{ROOTFS_TAR}.sha256").write_text(digest + "\n", encoding="utf-8")
        shutil.rmtree(tree)
        work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out, digest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- the wheels of a wheelhouse profile ----------------------------------------------------------


def profile_requirements(root: Path, p: Profile) -> list[str]:
    """Everything the pip steps of the profile's images install or build with: torch at its pin,
    hyperframe and hyperframe-runtime's dependencies (hyperframe's operator extra for the operator
    image) and the build backend of both (builds are isolated and offline)."""
    reqs = [f"torch=={p.torch.version}"]
    for rel in ("operator/pyproject.toml", "runtime/pyproject.toml"):
        data = tomllib.loads((root / rel).read_text(encoding="utf-8"))
        project = data["project"]
        reqs += data["build-system"]["requires"]
        reqs += project.get("dependencies", [])
        for extra in project.get("optional-dependencies", {}).values():
            reqs += extra
    own = re.compile(r"^(hyperframe|hyperframe-runtime|torch)\b")
    return [reqs[0], *sorted({r for r in reqs[1:] if not own.match(r)})]


def _resolve(
    reqs: list[str], find_links: Path, *, offline: bool, report: Path
) -> subprocess.CompletedProcess[str]:
    index = ["--no-index"] if offline else []
    return subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
            "--disable-pip-version-check", "--only-binary=:all:", *index, "--find-links", str(find_links),
            "--report", str(report), *reqs,
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip


def stage_wheels(root: Path, p: Profile, wheelhouse: Path, out: Path) -> list[str]:
    """Hard-link into `out` exactly the wheels the profile needs; return their names.

    Resolved by this interpreter's pip, which must be the profile's Python (the wheels are
    CPython-version specific). Offline first; only what the wheelhouse lacks is downloaded into it.
    """
    have = f"{sys.version_info.major}.{sys.version_info.minor}"
    if have != p.python:
        raise RuntimeError(
            f"staging the wheels of profile {p.name} needs Python {p.python} (the image's), this is {have}; "
            "run make images with the project's virtualenv"
        )
    reqs = profile_requirements(root, p)
    wheelhouse.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        result = _resolve(reqs, wheelhouse, offline=True, report=report)
        if result.returncode != 0:
            _log(f"the wheelhouse lacks wheels of profile {p.name}; downloading only those into {wheelhouse}")
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "-d", str(wheelhouse), *reqs],
                check=True,
            )  # fmt: skip
            result = _resolve(reqs, wheelhouse, offline=True, report=report)
            if result.returncode != 0:
                raise RuntimeError(f"pip cannot resolve {reqs} from {wheelhouse}:\n{result.stderr}")
        installs = json.loads(report.read_text(encoding="utf-8"))["install"]
    names = sorted(Path(item["download_info"]["url"].removeprefix("file://")).name for item in installs)
    link_exactly(names, wheelhouse, out)
    return names


def link_exactly(names: list[str], source: Path, out: Path) -> None:
    """Make `out` hold hard links to exactly `names` in `source`, updating it in place: a file left
    as it was keeps its metadata, so BuildKit does not send it again (re-linking all of them made
    every warm build transfer the 2.6 GB of wheels once more)."""
    out.mkdir(parents=True, exist_ok=True)
    for path in out.iterdir():
        if path.name not in names or not path.samefile(source / path.name):
            path.unlink()
    for name in names:
        if not (out / name).exists():
            os.link(source / name, out / name)


# --- what the development cluster reads ----------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalImages:
    """The pushed images of one local profile, each `registry/repository:tag@sha256:...`."""

    operator: str
    base: str
    framework: str


def local_images(m: Matrix, p: Profile, registry: str, pushed: Mapping[str, str]) -> LocalImages:
    """Pin the profile's three tags in `registry` to the digests the push reported."""

    def pin(ref: str) -> str:
        if ref not in pushed:
            raise KeyError(
                f"{ref} was not pushed (the bake metadata has: {', '.join(sorted(pushed)) or 'nothing'})"
            )
        return f"{ref}@{pushed[ref]}"

    return LocalImages(
        operator=pin(m.operator_image(registry, profile=p)),
        base=pin(m.base_image(p, registry)),
        framework=pin(m.framework_image(p, registry)),
    )


def _example_runtimes(root: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((root / EXAMPLES_DIR).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            is_runtime = isinstance(doc, dict) and doc.get("kind") == RUNTIME_KIND
            if is_runtime and doc.get("spec", {}).get("accelerator") == "cpu" and doc not in docs:
                docs.append(doc)
    return docs


def local_runtimes(root: Path, m: Matrix, p: Profile, images: LocalImages) -> list[dict[str, Any]]:
    """The profile's HyperFrameRuntime, and each CPU example runtime re-pointed at the local images
    (same name, so `--runtime runtimes-local.yaml` takes its place)."""
    own = runtime_manifest(m, p, {})
    own["metadata"]["annotations"] = {}
    own["spec"]["images"] = {"base": images.base, "framework": images.framework}
    runtimes = [own]
    for doc in _example_runtimes(root):
        doc["metadata"].setdefault("labels", {})[LABEL_PROFILE] = p.name
        doc["spec"]["images"] = dict(own["spec"]["images"])
        doc["spec"]["versions"] = dict(own["spec"]["versions"])
        runtimes.append(doc)
    return runtimes


def _digests(images: LocalImages) -> dict[str, str]:
    """Image name (the repository's last part) -> `repository@sha256:...`."""
    out = {}
    for ref in (images.operator, images.base, images.framework):
        name_tag, _, digest = ref.partition("@")
        repository = name_tag.rsplit(":", 1)[0]
        out[repository.rsplit("/", 1)[-1]] = f"{repository}@{digest}"
    return out


def _values(m: Matrix, p: Profile, images: LocalImages, own_runtime: Mapping[str, Any]) -> dict[str, Any]:
    repository, _, digest = images.operator.partition("@")
    return {
        "image": {"repository": repository.rsplit(":", 1)[0], "tag": m.operator_tag(p), "digest": digest},
        "runtimes": {
            # The released defaults name images this cluster's registry does not hold.
            "exclude": [q.name for q in m.released_profiles],
            "profiles": {p.name: own_runtime["spec"]},
        },
    }


def write_cluster_files(
    root: Path, m: Matrix, p: Profile, registry: str, metadata_json: str, out: Path
) -> list[Path]:
    """Write digests.json, values-local.yaml and runtimes-local.yaml into `out`; return them."""
    images = local_images(m, p, registry, digests_from_bake_metadata(metadata_json))
    runtimes = local_runtimes(root, m, p, images)
    out.mkdir(parents=True, exist_ok=True)
    note = (
        f"# Written by `make images` (images/build.sh) for the development cluster's registry {registry}.\n"
    )
    files = {
        out / "digests.json": json.dumps(_digests(images), indent=2) + "\n",
        out / "values-local.yaml": note
        + "# helm install -f this file: the operator and the runtime pinned to the images just pushed.\n"
        + yaml.safe_dump(_values(m, p, images, runtimes[0]), sort_keys=False),
        out / "runtimes-local.yaml": note
        + "# hyperframe render JOB.yaml --runtime this file (or kubectl apply -f it).\n---\n"
        + "---\n".join(yaml.safe_dump(doc, sort_keys=False) for doc in runtimes),
    }
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    return list(files)
