"""Pod field paths the API server names map back to the job field the user wrote.

Each case renders a real pod, finds the pod path of a job field by looking into that pod, and
checks the mapping returns the job field: the test follows the layout the renderer actually
produced, not a copy of it.
"""

from __future__ import annotations

from typing import Any

from api_helpers import example_pair, patched
from hyperframe.render import RenderContext, render_pod
from hyperframe.render.field_map import job_field_of_pod_field

STATUS = RenderContext(status_url="https://op.example:8081/v1/namespaces/ns/hyperframejobs/j/progress")


def job_and_runtime() -> tuple[dict[str, Any], dict[str, Any]]:
    job, runtime = example_pair("cpu-2node.yaml")
    runtime = patched(runtime, {"spec": {"allowedOverrides": ["env", "tolerations"]}})
    job = patched(
        job,
        {
            "spec": {
                "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}],
                "volumeMounts": [
                    {"name": "data", "mountPath": "/data"},
                    {"name": "cache", "mountPath": "/cache"},
                ],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "runtimeOverrides": {
                    "env": [{"name": "OMP_NUM_THREADS", "value": "4"}],
                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                },
            }
        },
    )
    return job, runtime


def index_of(items: list[dict[str, Any]], key: str, value: str) -> int:
    return next(i for i, item in enumerate(items) if item[key] == value)


def test_mounts_volumes_env_and_tolerations_map_to_the_job_fields() -> None:
    job, runtime = job_and_runtime()
    for ctx in (RenderContext(), STATUS):  # with and without the status-token volume and env
        pod = render_pod(job, runtime, 1, ctx)["spec"]
        main = pod["containers"][0]

        def mapped(field: str, ctx: RenderContext = ctx) -> str | None:
            return job_field_of_pod_field(job, runtime, field, ctx)

        m = index_of(main["volumeMounts"], "mountPath", "/cache")
        assert mapped(f"spec.containers[0].volumeMounts[{m}].mountPath") == "spec.volumeMounts[1].mountPath"
        assert mapped(f"spec.initContainers[0].volumeMounts[{m}]") == "spec.volumeMounts[1]"
        v = index_of(pod["volumes"], "name", "data")
        assert mapped(f"spec.volumes[{v}].emptyDir") == "spec.volumes[0].emptyDir"
        e = index_of(main["env"], "name", "B")
        assert mapped(f"spec.containers[0].env[{e}].value") == "spec.env[1].value"
        e = index_of(main["env"], "name", "OMP_NUM_THREADS")
        assert mapped(f"spec.containers[0].env[{e}].value") == "spec.runtimeOverrides.env[0].value"
        assert mapped("spec.tolerations[0].value") == "spec.runtimeOverrides.tolerations[0].value"
        # What HyperFrame itself renders has no job field.
        assert mapped("spec.containers[0].volumeMounts[0].mountPath") is None
        assert mapped(f"spec.containers[0].env[{index_of(main['env'], 'name', 'WORLD_SIZE')}]") is None
        assert mapped("metadata.name") is None


def test_runtime_fields_map_to_the_runtime() -> None:
    job, runtime = example_pair("cpu-2node.yaml")
    pod = render_pod(job, runtime, 0)["spec"]
    e = index_of(pod["containers"][0]["env"], "name", "OMP_NUM_THREADS")
    field = f"spec.containers[0].env[{e}].value"
    assert (
        job_field_of_pod_field(job, runtime, field, RenderContext())
        == "HyperFrameRuntime.spec.pod.env[0].value"
    )
    assert job_field_of_pod_field(job, runtime, "spec.nodeSelector", RenderContext()) == (
        "HyperFrameRuntime.spec.pod.nodeSelector"
    )
