"""The HyperFrame operator: kopf wiring, a pure reconcile state machine and its API side.

Layers, from top to bottom (a module may import only the layers below it):

- ``handlers`` and ``__main__``: kopf decorators and startup settings, nothing else;
- ``reconciler``, ``progress_server``: read the caches, call the state machine, apply its plan;
- ``kube``, ``caches``, ``workqueue``, ``metrics``: API access, informer-style caches, the queue;
- ``state_machine`` and the ``policy_*`` modules: pure functions from (job, status, pods, nodes, now)
  to a :class:`~hyperframe.controller.plan.Plan`; unit-tested with no cluster;
- ``status``, ``observed``, ``facts``, ``plan``, ``config``, ``rbac``: plain data.
"""
