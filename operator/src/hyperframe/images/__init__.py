"""The image pin matrix (`images/matrix.yaml`): its model, validation and generated files.

Import-light on purpose (no kopf, no kubernetes, no torch): `make generate`, the tests and
`images/build.sh` run it without a cluster.
"""
