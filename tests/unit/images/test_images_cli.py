"""`python -m hyperframe.images`: validate, check and check --release answer with the right exit
codes and name what is wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hyperframe.images.__main__ import main
from hyperframe.images.repo import load_matrix

ROOT = Path(__file__).resolve().parents[3]


def test_validate_lists_every_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(ROOT), "validate"]) == 0
    out = capsys.readouterr().out
    for p in load_matrix(ROOT).profiles:
        assert f"  {p.name}" in out and p.torch.local_version in out


def test_release_check_refuses_unpublished_images(capsys: pytest.CaptureFixture[str]) -> None:
    m = load_matrix(ROOT)
    assert main(["--root", str(ROOT), "check", "--release"]) == 1
    err = capsys.readouterr().err
    assert "not pushed" in err and m.framework_image(m.default_profile) in err and m.operator_image() in err


def test_an_invalid_matrix_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for rel in ("images/matrix.yaml", "operator/pyproject.toml", "runtime/pyproject.toml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    matrix = tmp_path / "images/matrix.yaml"
    matrix.write_text(
        matrix.read_text(encoding="utf-8").replace("variant: cu129", "variant: cu130"), encoding="utf-8"
    )
    assert main(["--root", str(tmp_path), "validate"]) == 2
    assert "profiles.cuda12.torch.cuda: 12.9 does not match variant cu130" in capsys.readouterr().err
