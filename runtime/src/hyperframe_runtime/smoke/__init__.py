"""The startup gate: per-device checks and a job-wide all-reduce, bounded in time.

Entry point: ``hyperframe-smoke`` (:mod:`hyperframe_runtime.smoke.cli`). Modules, top to bottom:
cli -> settings (job.json + env -> GateConfig) -> node (the node agent: rendezvous store, forked
rank processes, time budgets) -> worker (one rank) -> collective / probe / cuda_checks /
host_checks -> summary / table -> outcome, config. The report format and the remedy table live in
the operator package (:mod:`hyperframe.smoke_report`, :mod:`hyperframe.smoke_remedies`) because
the operator parses them without torch.
"""
