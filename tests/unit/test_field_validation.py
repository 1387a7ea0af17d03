"""What `kubectl create -f` meets for one object, for ksched's CLI: the API server's
strict-decoding errors, then its validation errors, each as kubectl prints it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.api.field_validation import ObjectErrors, check_object, invalid_message
from tests.fuzz_strategies import junk

MANIFESTS = Path(__file__).parents[1] / "data" / "manifests"


def docs(name: str, index: int = 0) -> dict[str, Any]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d][index]


@pytest.mark.parametrize(
    "name", ["exec-liveness.yaml", "security-context.yaml", "dapi-volume.yaml", "deployment.yaml"]
)
def test_docs_manifests_are_created(name: str) -> None:
    errors = check_object(docs(name))
    assert not errors
    assert errors.message() == errors.kubectl_error(name) == ""


def test_both_documents_of_the_statefulset_example() -> None:
    assert not check_object(docs("web.yaml", 0)) and not check_object(docs("web.yaml", 1))


def test_an_unknown_field_as_kubectl_prints_it() -> None:
    pod = docs("exec-liveness.yaml")
    pod["spec"]["nodeSelecter"] = {"disk": "ssd"}
    assert check_object(pod).kubectl_error("exec-liveness.yaml") == (
        'Error from server (BadRequest): error when creating "exec-liveness.yaml": Pod in '
        'version "v1" cannot be handled as a Pod: strict decoding error: unknown field '
        '"spec.nodeSelecter"'
    )


def test_several_unknown_fields_of_a_deployment() -> None:
    deployment = docs("deployment.yaml")
    deployment["spec"]["replica"] = deployment["spec"].pop("replicas")
    deployment["spec"]["template"]["spec"]["containers"][0]["requets"] = {}
    errors = check_object(deployment)
    assert errors.unknown == ["spec.replica", "spec.template.spec.containers[0].requets"]
    # apps/v1: the version without its group
    assert errors.message() == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.replica", unknown field "spec.template.spec.containers[0].requets"'
    )


def test_decoding_fails_before_validation() -> None:
    pod = docs("exec-liveness.yaml")
    pod["spec"]["containerz"] = pod["spec"].pop("containers")
    errors = check_object(pod)
    assert errors.invalid == ["spec.containers: Required value"]
    assert errors.message().startswith('Pod in version "v1" cannot be handled as a Pod')


def test_one_validation_error_as_kubectl_prints_it() -> None:
    pod = docs("exec-liveness.yaml")
    del pod["spec"]["containers"]
    errors = check_object(pod)
    assert errors.kubectl_error("p.yaml") == (
        'The Pod "liveness-exec" is invalid: spec.containers: Required value'
    )
    assert errors.message() == 'Pod "liveness-exec" is invalid: spec.containers: Required value'


def test_several_validation_errors_each_on_a_line() -> None:
    pod = docs("exec-liveness.yaml")
    pod["metadata"]["labels"] = {"test": "-x"}
    pod["spec"]["containers"][0]["name"] = ""
    pod["spec"]["restartPolicy"] = "Sometimes"
    errors = check_object(pod)
    assert errors.kubectl_error("p.yaml").splitlines() == [
        'The Pod "liveness-exec" is invalid: ',
        '* metadata.labels: Invalid value: "-x": a valid label must be an empty string or '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
        "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        "* spec.containers[0].name: Required value",
        '* spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"OnFailure", "Never"',
    ]


def test_a_workloads_template_is_validated_as_a_pod_spec() -> None:
    deployment = docs("deployment.yaml")
    deployment["spec"]["template"]["spec"]["nodeSelector"] = {"disk": "ssd!"}
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = 0
    errors = check_object(deployment)
    assert [e.split(":")[0] for e in errors.invalid] == [
        "spec.template.spec.containers[0].ports[0].containerPort",
        "spec.template.spec.nodeSelector",
    ]
    assert errors.message().startswith('Deployment.apps "nginx-deployment" is invalid: [')


def test_the_invalid_message_names_the_kind_with_its_group() -> None:
    assert invalid_message("Job", "j", ["a: Required value"]) == (
        'Job.batch "j" is invalid: a: Required value'
    )
    assert invalid_message("Pod", "p", ["a", "b", "a"]) == 'Pod "p" is invalid: [a, b]'


def test_other_kinds_have_no_pod_spec_to_validate() -> None:
    assert check_object({"kind": "Node", "metadata": {"name": "n"}}) == ObjectErrors(
        "Node", "n", "v1"
    )


SOURCES = ["exec-liveness.yaml", "deployment.yaml", "web.yaml", "dapi-volume.yaml"]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SOURCES), st.data())
def test_any_value_anywhere_gives_errors_never_a_crash(name: str, data: st.DataObject) -> None:
    obj = copy.deepcopy(docs(name, -1))
    node: Any = obj
    while isinstance(node, dict | list) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        if not isinstance(node[key], dict | list) or data.draw(st.booleans()):
            node[key] = data.draw(junk)
            break
        node = node[key]
    errors = check_object(obj)
    assert isinstance(errors.kubectl_error(name), str)
