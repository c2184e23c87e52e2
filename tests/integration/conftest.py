"""Integration tests run against the real local control plane (docs/local-cluster.md).

Fixtures, registered for all test trees in tests/conftest.py through
`hyperframe_devcluster.pytest_plugin`:

- `local_cluster`: the session's LocalCluster (started once, stopped at the end; with
  HYPERFRAME_USE_RUNNING_CLUSTER=1 the one `make cluster-up` started);
- `kubeconfig`: admin kubeconfig path; `kubectl`: a Kubectl bound to it;
- `namespace`: a fresh namespace per test, ready for pods.

Mark such tests `@pytest.mark.cluster`. On failure the report shows component log tails and
`kubectl describe` of the test namespace.
"""
