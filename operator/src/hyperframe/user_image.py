"""``hyperframe image build DIR --from RUNTIME``: a job's own image, FROM the runtime's framework image.

The image is the runtime's framework image (pinned by digest, so the gate, the launcher and
hyperframe-runtime are the ones the operator expects) plus a ``COPY`` of the user's project to
:data:`WORKDIR`, which is also on ``PYTHONPATH``: ``entrypoint.script`` names a file there or a
module of the project. The build runs on the project's own BuildKit path (``images/build.sh
--user-image``: its private buildkitd, the same engine ``make images`` uses), pushes to the
registry of the tag and prints the pushed reference, ``repo@sha256:...``, for ``spec.image``.

The decisions (which framework image, the Dockerfile, the tag, whether the runtime will admit
the image) are pure functions here; :func:`build` is the one call that runs the engine.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.models import HyperFrameRuntime
from hyperframe.api.resolve import image_matches

__all__ = [
    "BUILD_SCRIPT",
    "WORKDIR",
    "UserImage",
    "admission_problem",
    "build",
    "dockerfile",
    "plan_image",
]

WORKDIR: Final = "/workspace"
BUILD_SCRIPT: Final = Path("images/build.sh")
REGISTRY_ENV: Final = "HYPERFRAME_REGISTRY"
_TAG_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-/:")


@dataclass(frozen=True, slots=True, kw_only=True)
class UserImage:
    """What to build: the project directory, the base, the name to push to."""

    project: Path
    framework: str
    """The runtime's framework image, by digest."""
    name: str
    """Where to push, ``registry/repository[:tag]``."""


def dockerfile(framework: str) -> str:
    """The Dockerfile: the framework image plus the project, owned by root (the image's non-root
    user can read and run it, not change it), importable from anywhere."""
    return (
        "# Written by `hyperframe image build`: the runtime's framework image plus this project.\n"
        f"FROM {framework}\n"
        f"WORKDIR {WORKDIR}\n"
        f"COPY . {WORKDIR}\n"
        f"ENV PYTHONPATH={WORKDIR}\n"
    )


def _default_name(project: Path, env: Mapping[str, str]) -> str:
    registry = env.get(REGISTRY_ENV, "").strip().rstrip("/")
    if not registry:
        raise SpecError(
            [
                FieldError(
                    "--tag",
                    f"not given, and {REGISTRY_ENV} is not set",
                    "pass --tag registry.example.com/ml/my-project, or set "
                    f"{REGISTRY_ENV} (`python -m hyperframe_devcluster env` sets it for the local cluster)",
                )
            ]
        )
    return f"{registry}/{project.resolve().name.lower()}"


def plan_image(
    project: Path, runtime: HyperFrameRuntime, tag: str | None, env: Mapping[str, str] = os.environ
) -> UserImage:
    """The build of ``project`` FROM ``runtime``'s framework image; SpecError naming the argument."""
    if not project.is_dir():
        raise SpecError([FieldError(str(project), "is not a directory", "give the project's directory")])
    name = tag or _default_name(project, env)
    if "@" in name or not set(name) <= _TAG_CHARS or name.startswith(("/", ":")):
        raise SpecError(
            [
                FieldError(
                    "--tag",
                    f"{name!r} is not an image name to push to",
                    "use registry/repository[:tag] in lower case, without a digest",
                )
            ]
        )
    return UserImage(project=project, framework=runtime.spec.images.framework, name=name)


def admission_problem(reference: str, runtime: HyperFrameRuntime) -> str | None:
    """Why a job naming ``reference`` would be refused by ``runtime`` (None: it is admitted)."""
    rt = runtime.spec
    name = runtime.metadata.name
    if "image" not in rt.allowed_overrides:
        return f'HyperFrameRuntime "{name}" does not allow jobs their own image ("image" is not in its allowedOverrides)'
    if not any(image_matches(reference, p) for p in rt.images.allowed_prefixes):
        prefixes = ", ".join(rt.images.allowed_prefixes)
        return f'{reference.split("@", 1)[0]} is not under an allowed prefix of HyperFrameRuntime "{name}" ({prefixes})'
    return None


def build(image: UserImage, repo_root: Path, env: Mapping[str, str] = os.environ) -> str:
    """Build and push with ``images/build.sh --user-image``; the pushed ``repo@sha256:...``.

    The engine's log goes to stderr as it runs; a failed build raises CalledProcessError."""
    with tempfile.TemporaryDirectory(prefix="hyperframe-image-") as tmp:
        docker = Path(tmp) / "Dockerfile"
        docker.write_text(dockerfile(image.framework), encoding="utf-8")
        done = subprocess.run(
            [
                "bash",
                str(repo_root / BUILD_SCRIPT),
                "--user-image",
                str(image.project.resolve()),
                str(docker),
                image.name,
            ],
            cwd=repo_root,
            env=dict(env),
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
    lines = done.stdout.strip().splitlines()
    if not lines or "@sha256:" not in lines[-1]:
        raise subprocess.CalledProcessError(done.returncode, BUILD_SCRIPT.name, output=done.stdout)
    return lines[-1].strip()
