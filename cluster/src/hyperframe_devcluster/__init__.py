"""A real local Kubernetes control plane for tests, CI and the demo."""
