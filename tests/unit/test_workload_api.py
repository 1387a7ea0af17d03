"""The Workload API at ksched's doors: a scheduling.k8s.io/v1alpha1 Workload and a pod's
spec.workloadRef validated with the API server's messages (the watcher), and `ksched
apply` of a Workload."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.api.events import BadEvent, decode_cluster_event
from shared.api.workload import gang_of
from shared.subjects import object_of_subject
from shared.tools.cli.apply import Current, plan
from shared.tools.cli.manifests import ManifestError, parse_manifests
from shared.tools.synthetic import make_pod, make_workload

WL_SUBJECT = "ksched.cluster.workloads.default.job"
LABEL_GRAMMAR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def decode(subject: str, obj: dict[str, Any]) -> Any:
    data = json.dumps({"type": "ADDED", "object": obj}).encode()
    return decode_cluster_event(subject, data, None, 1)


def workload(*groups: dict[str, Any], **spec: Any) -> dict[str, Any]:
    obj = make_workload("job", {})
    obj["spec"] = {"podGroups": list(groups), **spec}
    return obj


def test_a_valid_workload_is_accepted_on_its_subject() -> None:
    assert object_of_subject(WL_SUBJECT) == ("workload", "default", "job")
    ev = decode(WL_SUBJECT, make_workload("job", {"workers": 3, "driver": None}))
    group = ev.obj.policy("workers")
    assert group is not None and group.gang is not None
    assert group.gang.min_count == 3
    assert ev.obj.policy("driver").gang is None
    assert ev.unknown == []


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({}, "spec.podGroups: Required value: must have at least one item"),
        (
            {"podGroups": [{"name": "g", "policy": {"basic": {}}}] * 9},
            "spec.podGroups: Too many: 9: must have at most 8 items",
        ),
        (
            {"podGroups": [{"name": "", "policy": {"basic": {}}}]},
            "spec.podGroups[0].name: Required value",
        ),
        (
            {"podGroups": [{"name": "Bad_Name", "policy": {"basic": {}}}]},
            f'spec.podGroups[0].name: Invalid value: "Bad_Name": {LABEL_GRAMMAR}',
        ),
        (
            {"podGroups": [{"name": "g", "policy": {}}]},
            'spec.podGroups[0].policy: Invalid value: "": must specify one of: `basic`, `gang`',
        ),
        (
            {"podGroups": [{"name": "g", "policy": {"basic": {}, "gang": {"minCount": 1}}}]},
            'spec.podGroups[0].policy: Invalid value: "{`basic`, `gang`}": exactly one of '
            "`basic`, `gang` is required, but multiple fields are set",
        ),
        (
            {"podGroups": [{"name": "g", "policy": {"gang": {"minCount": 0}}}]},
            "spec.podGroups[0].policy.gang.minCount: Required value",
        ),
        (
            {"podGroups": [{"name": "g", "policy": {"gang": {"minCount": -2}}}]},
            "spec.podGroups[0].policy.gang.minCount: Invalid value: -2: "
            "must be greater than or equal to 0",
        ),
        (
            {"podGroups": [{"name": "g", "policy": {"basic": {}}}] * 2},
            'spec.podGroups[1]: Duplicate value: {"name":"g","policy":{"basic":{}}}',
        ),
        (
            {
                "controllerRef": {"apiGroup": "batch", "name": "j"},
                "podGroups": [{"name": "g", "policy": {"basic": {}}}],
            },
            "spec.controllerRef.kind: Required value",
        ),
    ],
)
def test_an_invalid_workload_is_refused_with_the_api_servers_message(
    spec: dict[str, Any], error: str
) -> None:
    obj = make_workload("job", {})
    obj["spec"] = spec
    with pytest.raises(BadEvent) as err:
        decode(WL_SUBJECT, obj)
    assert str(err.value).startswith('Workload.scheduling.k8s.io "job" is invalid: ')
    assert error in str(err.value)


def pod_with_ref(ref: Any) -> dict[str, Any]:
    pod = make_pod("p", cpu="1")
    pod["spec"]["workloadRef"] = ref
    return pod


@pytest.mark.parametrize(
    ("ref", "error"),
    [
        ({"podGroup": "g"}, "spec.workloadRef.name: Required value"),
        ({"name": "job"}, "spec.workloadRef.podGroup: Required value"),
        ({"name": "Job!", "podGroup": "g"}, 'spec.workloadRef.name: Invalid value: "Job!"'),
        ({"name": "job", "podGroup": "a.b"}, 'spec.workloadRef.podGroup: Invalid value: "a.b"'),
        (
            {"name": "job", "podGroup": "g", "podGroupReplicaKey": "R"},
            'spec.workloadRef.podGroupReplicaKey: Invalid value: "R"',
        ),
    ],
)
def test_an_invalid_workload_ref_is_refused(ref: dict[str, Any], error: str) -> None:
    with pytest.raises(BadEvent) as err:
        decode("ksched.cluster.pods.default.p", pod_with_ref(ref))
    assert str(err.value).startswith('Pod "p" is invalid: ')
    assert error in str(err.value)


def test_a_valid_workload_ref_is_parsed_and_names_its_gang() -> None:
    ref = {"name": "job", "podGroup": "workers", "podGroupReplicaKey": "r0"}
    ev = decode("ksched.cluster.pods.default.p", pod_with_ref(ref))
    assert ev.obj.spec.workload_ref.pod_group == "workers"
    assert ev.unknown == []
    assert gang_of(ev.raw) == "default/job/workers/r0"
    assert gang_of(make_pod("q")) == ""


WORKLOAD_YAML = """\
apiVersion: scheduling.k8s.io/v1alpha1
kind: Workload
metadata: {name: job}
spec:
  podGroups:
  - {name: workers, policy: {gang: {minCount: 3}}}
"""


def test_apply_publishes_a_workload_and_configures_it_again() -> None:
    (applied,) = plan(parse_manifests(WORKLOAD_YAML, "w.yaml"), Current(), "now")
    assert applied.line == "workload.scheduling.k8s.io/job created"
    (action,) = applied.actions
    assert action.subject == WL_SUBJECT
    assert action.obj["metadata"]["namespace"] == "default"
    current = Current(workloads={"default/job": (action.obj, 7)})
    (again,) = plan(parse_manifests(WORKLOAD_YAML, "w.yaml"), current, "now")
    assert again.line == "workload.scheduling.k8s.io/job unchanged"


def test_apply_refuses_an_invalid_workload() -> None:
    bad = WORKLOAD_YAML.replace("minCount: 3", "minCount: 0")
    with pytest.raises(ManifestError, match=r"spec.podGroups\[0\].policy.gang.minCount"):
        plan(parse_manifests(bad, "w.yaml"), Current(), "now")
