"""HyperFrame runtime: smoke gate, launcher, local mode and the pipeline scheduler."""
