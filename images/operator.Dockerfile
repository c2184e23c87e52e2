# HyperFrame operator image: the `hyperframe` distribution (API, renderer, kopf operator) on a
# small Python base pinned by digest. No CUDA and no torch: the build fails if torch sneaks in.
# BASE_IMAGE and the HF_ args come from images/matrix.yaml (operator:) through docker-bake.hcl;
# the tag is the hyperframe package version, the same value as the chart's appVersion.
# The `local` profile builds the same file on its debootstrap root filesystem (tag <version>-local),
# its pip steps reading the mounted wheelhouse (PIP_NO_INDEX/PIP_FIND_LINKS, see Dockerfile.framework).

ARG BASE_IMAGE

# --- builder: the hyperframe wheel, built as the image's non-root user ------------------------
FROM ${BASE_IMAGE} AS builder
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
WORKDIR /tmp/src
COPY --chown=65534:65534 operator/pyproject.toml operator/
COPY --chown=65534:65534 operator/src operator/src
USER 65534:65534
RUN --mount=type=bind,from=wheelhouse,target=/wheelhouse \
    python3 -m pip wheel --no-cache-dir --no-deps --wheel-dir /tmp/wheels /tmp/src/operator

# --- operator ---------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS operator
ARG BASE_IMAGE
ARG HF_PYTHON_VERSION
ARG HF_UID=10001
ARG HF_USER=hyperframe
ARG HF_VERSION
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

RUN have="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    && if [[ "${have}" != "${HF_PYTHON_VERSION}" ]]; then \
        echo "operator.Dockerfile: python3 is ${have}, images/matrix.yaml says ${HF_PYTHON_VERSION}" >&2; \
        exit 1; \
    fi \
    && groupadd --gid "${HF_UID}" "${HF_USER}" \
    && useradd --uid "${HF_UID}" --gid "${HF_UID}" --no-create-home --shell /usr/sbin/nologin "${HF_USER}"

# The wheel's own dependency ranges resolve here, with the operator extra (kopf, kubernetes,
# aiohttp, prometheus-client); the freeze is kept in the image so a running operator's exact
# versions can be read back.
RUN --mount=type=bind,from=builder,source=/tmp/wheels,target=/tmp/wheels \
    --mount=type=bind,from=wheelhouse,target=/wheelhouse \
    python3 -m venv /opt/hyperframe/venv \
    && wheel="$(echo /tmp/wheels/hyperframe-*.whl)" \
    && /opt/hyperframe/venv/bin/pip install --no-cache-dir "${wheel}[operator]" \
    && /opt/hyperframe/venv/bin/pip check \
    && if /opt/hyperframe/venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)'; then \
        echo "operator.Dockerfile: torch got installed; the operator must not depend on it" >&2; \
        exit 1; \
    fi \
    && /opt/hyperframe/venv/bin/pip freeze --all >/opt/hyperframe/pip-freeze.txt

ENV PATH="/opt/hyperframe/venv/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

LABEL org.opencontainers.image.title="hyperframe-operator" \
      org.opencontainers.image.description="HyperFrame operator (kopf): HyperFrameJob and HyperFrameRuntime" \
      org.opencontainers.image.version="${HF_VERSION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      dev.hyperframe.python="${HF_PYTHON_VERSION}"

USER ${HF_UID}:${HF_UID}
ENTRYPOINT ["python", "-m", "hyperframe.controller"]
