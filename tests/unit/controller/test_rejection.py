"""A refusal of the API server becomes one line in the job's terms, never the JSON body."""

from __future__ import annotations

import json

from hyperframe.controller.kube import ApiError
from hyperframe.controller.rejection import rejection_message

# The shape of the API server's answer to a pod with two mounts at one path (HTTP 422).
STATUS_422 = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": 'Pod "j-g0-0" is invalid: [spec.containers[0].volumeMounts[3].mountPath: Invalid value: '
        '"/data": must be unique, spec.initContainers[0].volumeMounts[3].mountPath: Invalid value: "/data": '
        "must be unique]",
        "reason": "Invalid",
        "details": {
            "name": "j-g0-0",
            "kind": "Pod",
            "causes": [
                {
                    "reason": "FieldValueInvalid",
                    "message": 'Invalid value: "/data": must be unique',
                    "field": "spec.containers[0].volumeMounts[3].mountPath",
                },
                {
                    "reason": "FieldValueInvalid",
                    "message": 'Invalid value: "/data": must be unique',
                    "field": "spec.initContainers[0].volumeMounts[3].mountPath",
                },
                {"reason": "FieldValueRequired", "message": "Required value", "field": "metadata.name"},
            ],
        },
        "code": 422,
    },
    indent=2,
)


def job_field(field: str) -> str | None:
    return "spec.volumeMounts[1].mountPath" if ".volumeMounts[3]" in field else None


def test_causes_are_mapped_to_job_fields_deduplicated_on_one_line() -> None:
    error = ApiError(422, "Unprocessable Entity", STATUS_422)
    message = rejection_message(error, "Pod", job_field)
    assert message == (
        'spec.volumeMounts[1].mountPath: Invalid value: "/data": must be unique; '
        "pod metadata.name: Required value"
    )
    assert "\n" not in str(error) and "{" not in str(error)


def test_a_body_without_causes_gives_the_server_message_and_never_json() -> None:
    body = json.dumps({"kind": "Status", "message": 'admission webhook "x" denied the request:\n no GPUs'})
    assert rejection_message(ApiError(422, "Invalid", body), "Service", job_field) == (
        'admission webhook "x" denied the request: no GPUs'
    )
    assert rejection_message(ApiError(422, "Invalid", "not json"), "Pod", job_field) == "not json"
