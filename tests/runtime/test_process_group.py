"""Ranks leave their process group together after a run, alone after a failure (two real gloo
ranks, ``leave_harness.py``): what ``hyperframe-train`` and the smoke gate's ranks do at exit.

A gloo rank that tore its group down while a peer still used their connections aborted the peer
("terminate called without an active exception"); that race itself cannot be made to happen on
demand, so the tests check the leave's contract: a run that ended alike waits for every rank,
a rank that failed does not wait for anyone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).with_name("leave_harness.py")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("leave")
    proc = subprocess.run(
        [sys.executable, str(HARNESS), str(out)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]
    return out


def test_ranks_that_ended_alike_leave_together(results: Path) -> None:
    # Rank 0 was done first; its leave returned only after the late rank 1 had arrived.
    assert json.loads((results / "together.json").read_text()) == {"saw_peer_arrive": True}


def test_a_failed_rank_leaves_without_waiting_for_its_peers(results: Path) -> None:
    # Rank 1 waited for rank 0 to have left before it left itself: no barrier held rank 0.
    assert json.loads((results / "alone.json").read_text()) == {"peer_left_first": True}
