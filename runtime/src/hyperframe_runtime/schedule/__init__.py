"""Pure pipeline-schedule tooling: IR, cost model, simulator, validation, planner, partitioner.

Nothing in this package imports torch; torch's own schedules are reached through
``hyperframe_runtime.pipeline.torch_adapter``.
"""
