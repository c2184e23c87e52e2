"""The startup gate: per-device checks and a job-wide all-reduce, bounded in time.

Entry point: ``hyperframe-smoke`` (:mod:`hyperframe_runtime.smoke.cli`). Layers, top to bottom:
cli -> settings (job.json + env -> GateConfig) -> node (agent: store, spawn, budgets) -> worker
(one rank) -> collective / probe / cuda_checks / host_checks -> summary / table -> outcome, config.
"""
