"""The HyperFrameJob and HyperFrameRuntime APIs: models, validation, resolution, CRD schemas.

Layering (imports go downwards only): ``fields`` / ``introspect`` -> ``codec`` -> the model
modules (``kube``, ``runtime``, ``job``, ``status``) -> ``models`` -> ``resolved`` -> ``resolve``
-> ``crd`` / ``docgen``. Nothing here talks to a cluster.
"""
