"""The torch side of the HyperFrame scheduler: executor, frame loop, checkpoints and traces."""
