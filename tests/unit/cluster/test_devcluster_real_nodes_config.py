"""How many real nodes a cluster gets: HYPERFRAME_CLUSTER_REAL_NODE(S), recorded in state.json.

Covers: REAL_NODE=1 alone meaning one node; REAL_NODES=N meaning N (0: none), also beside
REAL_NODE=1; REAL_NODE=0 turning them off whatever the count (`make test` sets both); an
explicit override winning over both; bad values named with the fix; the count
surviving `from_state`; and the dev cluster's node limit matching the network plan's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hyperframe_devcluster import config as config_module
from hyperframe_devcluster import node_config
from hyperframe_devcluster.config import ENV_REAL_NODE, ENV_REAL_NODES, ClusterConfig, Ports


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({ENV_REAL_NODE: "1"}, (True, 1)),
        ({ENV_REAL_NODES: "2"}, (True, 2)),
        ({ENV_REAL_NODE: "1", ENV_REAL_NODES: "2"}, (True, 2)),
        ({ENV_REAL_NODE: "1", ENV_REAL_NODES: "0"}, (False, 1)),
        ({ENV_REAL_NODE: "0", ENV_REAL_NODES: "2"}, (False, 2)),
        ({}, (False, 1)),
    ],
)
def test_the_environment_picks_how_many_real_nodes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], expected: tuple[bool, int]
) -> None:
    for name in (ENV_REAL_NODE, ENV_REAL_NODES):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = ClusterConfig.from_env(tmp_path)
    assert (config.real_node, config.real_nodes) == expected


def test_an_explicit_override_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV_REAL_NODES, "0")
    config = ClusterConfig.from_env(tmp_path, real_node=True)
    assert config.real_node is True


@pytest.mark.parametrize("raw", ["two", "5", "-1"])
def test_a_bad_count_is_named_with_the_range(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, raw: str
) -> None:
    monkeypatch.setenv(ENV_REAL_NODES, raw)
    with pytest.raises(ValueError, match=rf"{ENV_REAL_NODES}=.*expected 0\.\.4"):
        ClusterConfig.from_env(tmp_path)


def test_the_count_is_recorded_for_down_status_and_env(tmp_path: Path) -> None:
    ClusterConfig(state_dir=tmp_path, real_node=True, real_nodes=2).write_state(Ports(*range(1, 8)))
    restored = ClusterConfig.from_state(tmp_path)
    assert (restored.real_node, restored.real_nodes) == (True, 2)


def test_the_config_limit_is_the_network_plans_limit() -> None:
    assert config_module._MAX_REAL_NODES == node_config.MAX_REAL_NODES
