"""Parse and resolve the (job, runtime) pair once, and the metadata every rendered object shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperframe.api.models import HyperFrameJob, HyperFrameRuntime, parse_job_and_runtime
from hyperframe.api.resolve import DEFAULT_NAMESPACE, Resolution, resolve
from hyperframe.constants import API_VERSION, JOB_KIND, LABEL_JOB, LABEL_MANAGED_BY, MANAGED_BY
from hyperframe.render.context import RenderContext

__all__ = ["Prepared", "prepare"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    job: HyperFrameJob
    runtime: HyperFrameRuntime
    resolution: Resolution
    ctx: RenderContext

    @property
    def name(self) -> str:
        return self.job.metadata.name

    @property
    def namespace(self) -> str:
        return self.job.metadata.namespace or DEFAULT_NAMESPACE

    def owner_refs(self) -> list[dict[str, Any]]:
        """ownerReferences to the job (none without a uid, e.g. in ``hyperframe render``)."""
        uid = self.job.metadata.uid
        if not uid:
            return []
        return [
            {
                "apiVersion": API_VERSION,
                "kind": JOB_KIND,
                "name": self.name,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]

    def job_labels(self) -> dict[str, str]:
        return {LABEL_JOB: self.name, LABEL_MANAGED_BY: MANAGED_BY}


def prepare(job: Mapping[str, Any], runtime: Mapping[str, Any], ctx: RenderContext) -> Prepared:
    """Parse both objects and resolve them; SpecError lists every problem of both."""
    parsed_job, parsed_runtime = parse_job_and_runtime(job, runtime)
    resolution = resolve(parsed_job, parsed_runtime, generation=ctx.gang_generation)
    return Prepared(job=parsed_job, runtime=parsed_runtime, resolution=resolution, ctx=ctx)
