"""Shared pytest configuration for every test tree (unit, integration, e2e).

The local-cluster fixtures (`local_cluster`, `kubeconfig`, `kubectl`, `namespace`) come from the
`hyperframe_devcluster.pytest_plugin` plugin; see docs/local-cluster.md.
"""

pytest_plugins = ["hyperframe_devcluster.pytest_plugin"]
