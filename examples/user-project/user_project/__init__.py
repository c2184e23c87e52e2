"""An ML engineer's own project, as HyperFrame runs it: a data-prepare step and a DDP script."""
