"""HyperFrame: API, renderer, CLI and operator (no torch)."""
