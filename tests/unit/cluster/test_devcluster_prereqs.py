"""What the real node needs from the machine, and how a missing piece is said.

Covers: the message names every missing command with its Debian package and the apt-get
command that fixes it, and asks for root when not root.
"""

from __future__ import annotations

from hyperframe_devcluster.prereqs import Missing


def test_missing_packages_are_named_with_the_command_that_installs_them() -> None:
    missing = Missing(root=False, packages=("containerd", "runc"), what=("containerd", "ctr", "runc"))

    assert bool(missing)
    assert missing.describe() == (
        "the real node needs containerd, ctr, runc (Debian packages: containerd runc): "
        "apt-get install containerd runc"
    )


def test_not_root_says_why_root_is_needed() -> None:
    text = Missing(root=True, packages=(), what=()).describe()

    assert "root (it creates a network namespace, cgroups and mounts): run as root" in text


def test_nothing_missing_is_falsy() -> None:
    assert not Missing(root=False, packages=(), what=())
