# HyperFrame developer entry points. The two commands the README promises:
#   make demo   - set everything up and run the local demo job (CPU, gloo)
#   make test   - set everything up and run lint, type checks and all tests (CI runs this)
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# A persistent per-user wheelhouse: the registry here sends no cacheable responses, so pip's own
# cache stays empty and every fresh clone (CI) would download torch again. `pip download` skips
# wheels already in the wheelhouse, so only the first run on a machine pays for the download.
WHEELHOUSE ?= $(HOME)/.cache/hyperframe/wheels

.PHONY: venv demo demo-cluster test lint typecheck unit cluster-build cluster-up cluster-down bench generate images clean

venv: $(STAMP)

$(STAMP): requirements-dev.txt operator/pyproject.toml runtime/pyproject.toml cluster/pyproject.toml
	@echo ">> setting up $(VENV) (first run downloads torch from PyPI; later runs reuse $(WHEELHOUSE))"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	mkdir -p $(WHEELHOUSE)
	$(PY) -m pip download -q -d $(WHEELHOUSE) -r requirements-dev.txt
	$(PY) -m pip install -q --no-index --find-links $(WHEELHOUSE) -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -e operator -e runtime -e cluster
	touch $(STAMP)

demo: venv
	$(VENV)/bin/hyperframe local examples/cpu-tiny.yaml

# The whole product on the real node: cluster, images, helm install, a 2-pod CPU job to Succeeded.
demo-cluster: venv cluster-build
	HYPERFRAME_CLUSTER_REAL_NODE=1 $(PY) -m hyperframe_devcluster.demo

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: venv
	$(VENV)/bin/mypy
	# Scripts outside the packages, with the same strict settings from pyproject.toml.
	$(VENV)/bin/mypy charts/hyperframe-operator/hack/generate.py bench

unit: venv cluster-build
	$(PY) -m pytest tests/unit -q

cluster-build:
	bash cluster/build.sh

cluster-up: venv cluster-build
	$(PY) -m hyperframe_devcluster up

cluster-down: venv
	$(PY) -m hyperframe_devcluster down

# The tests' cluster gets two real nodes, hf-real-0 and hf-real-1 (containers on this machine),
# unless the caller says HYPERFRAME_CLUSTER_REAL_NODE=0 (none) or HYPERFRAME_CLUSTER_REAL_NODES=1.
test: venv cluster-build lint typecheck
	HYPERFRAME_CLUSTER_REAL_NODE=$${HYPERFRAME_CLUSTER_REAL_NODE:-1} \
	HYPERFRAME_CLUSTER_REAL_NODES=$${HYPERFRAME_CLUSTER_REAL_NODES:-2} $(PY) -m pytest -q

bench: venv
	$(PY) -m bench

# Regenerates every generated file from its single source (each area adds its line).
generate: venv
	$(PY) -m hyperframe.api.crd crds
	$(PY) -m hyperframe.api.docgen docs/api.md
	$(PY) -m hyperframe.images generate
	# Last: the chart copies crds/ and images/generated/ (and reads controller/rbac.py).
	$(PY) charts/hyperframe-operator/hack/generate.py

# Builds the local profile's images (operator, base, framework) with a private BuildKit, pushes them
# to $$HYPERFRAME_REGISTRY and writes their digests to .cluster/images/ (docs/images.md). Exits 3
# with the reason where no engine can run (1 with CI=true).
images: venv cluster-build
	HYPERFRAME_WHEELHOUSE=$(WHEELHOUSE) PYTHON=$(PY) bash images/build.sh

clean:
	-test -x $(PY) && $(PY) -m hyperframe_devcluster down
	rm -rf $(VENV) .cluster
