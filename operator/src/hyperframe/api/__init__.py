"""The HyperFrameJob and HyperFrameRuntime APIs: models, validation, resolution, CRD schemas.

Layering (imports go downwards only):

- ``errors``, ``fields``, ``introspect``: field metadata and type shapes;
- ``codec`` (parse/dump), ``openapi`` (schemas), ``quantity``;
- the models: ``kube``, ``runtime``, ``job_rules`` + ``job``, ``status``, ``builtin_models``;
- ``models`` (whole objects: ``parse_job``, ``parse_runtime``), ``names``;
- ``resolved`` (``ResolvedJobConfig``, the job.json contract) and ``resolve`` (defaults + overrides);
- ``manifests`` (YAML files), ``crd`` and ``docgen`` (generators run by ``make generate``).

Nothing here talks to a cluster; ``hyperframe.render`` builds on it.
"""
