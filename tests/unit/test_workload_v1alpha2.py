"""1.36's Workload API (scheduling.k8s.io/v1alpha2, KEP-5832) at ksched's door: a Workload
with podGroupTemplates, a PodGroup object on its own subject, a pod's spec.schedulingGroup,
each validated with the API server's messages; and the immutable fields refused on
update (shared/api/immutable.py), at the watcher and in the informers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.binder.podgroups import wanted_conditions
from services.watcher.immutables import Retained, accepted
from shared.api.events import BadEvent, SubjectRef, decode_cluster_event
from shared.api.immutable import ImmutableFields
from shared.api.podgroup import (
    SchedulingPodGroup,
    scheduled_condition,
    with_scheduled_condition,
)
from shared.api.workload import Workload, gang_of
from shared.framework.interface import ClusterObjects
from shared.runtime.informer import owners_handler
from shared.subjects import UNDO_HEADER, object_of_subject
from shared.tools.synthetic import (
    make_group_pod,
    make_pod,
    make_pod_group,
    make_scheduling_pod_group,
    make_workload,
    make_workload_v1alpha2,
)

WL = "ksched.cluster.workloads.default.job"
PG = "ksched.cluster.workloadpodgroups.default.pg"
POD = "ksched.cluster.pods.default.p"
LABEL_GRAMMAR = "a lowercase RFC 1123 label must consist of lower case alphanumeric"
GANG = {"gang": {"minCount": 2}}


def decode(subject: str, obj: dict[str, Any], etype: str = "ADDED") -> Any:
    data = json.dumps({"type": etype, "object": obj}).encode()
    return decode_cluster_event(subject, data, None, 1)


def refused(subject: str, obj: dict[str, Any]) -> str:
    with pytest.raises(BadEvent) as err:
        decode(subject, obj)
    return str(err.value)


# --- Workload v1alpha2 ---------------------------------------------------------------------


def test_a_v1alpha2_workload_is_read_beside_v1alpha1_on_the_same_subject() -> None:
    ev = decode(WL, make_workload_v1alpha2("job", {"workers": 3, "driver": None}))
    assert isinstance(ev.obj, Workload) and ev.unknown == []
    workers = ev.obj.policy("workers")
    assert workers is not None and workers.gang is not None and workers.gang.min_count == 3
    assert ev.obj.policy("driver").gang is None and ev.obj.policy("x") is None
    old = decode(WL, make_workload("job", {"workers": 2}))
    assert old.obj.policy("workers").gang.min_count == 2
    # each version's own fields: v1alpha1's podGroups is unknown in v1alpha2
    v2 = make_workload_v1alpha2("job", {"workers": 3})
    v2["spec"]["podGroups"] = []
    assert decode(WL, v2).unknown == ["spec.podGroups"]


def templates(*items: dict[str, Any]) -> dict[str, Any]:
    obj = make_workload_v1alpha2("job", {})
    obj["spec"] = {"podGroupTemplates": list(items)}
    return obj


def template(name: str = "g", policy: Any = None, **more: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": policy if policy is not None else GANG, **more}


TOPOLOGY = {"topologyConstraints": [{"topologyKey": "topology.kubernetes.io/rack"}]}


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        (templates(), "spec.podGroupTemplates: Required value: must have at least one item"),
        (
            templates(*[template(f"g{i}") for i in range(9)]),
            "spec.podGroupTemplates: Too many: 9: must have at most 8 items",
        ),
        (templates(template("")), "spec.podGroupTemplates[0].name: Required value"),
        (
            templates(template("Bad_Name")),
            f'spec.podGroupTemplates[0].name: Invalid value: "Bad_Name": {LABEL_GRAMMAR}',
        ),
        (
            templates(template("g"), template("g")),
            "spec.podGroupTemplates[1]: Duplicate value: ",
        ),
        (
            templates(template(policy={})),
            'spec.podGroupTemplates[0].schedulingPolicy: Invalid value: "": '
            "must specify one of: `basic`, `gang`",
        ),
        (
            templates(template(policy={"basic": {}, **GANG})),
            "spec.podGroupTemplates[0].schedulingPolicy: Invalid value: "
            '"{`basic`, `gang`}": exactly one of `basic`, `gang` is required',
        ),
        (
            templates(template(policy={"gang": {"minCount": 0}})),
            "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Required value",
        ),
        (
            templates(template(policy={"gang": {"minCount": -1}})),
            "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Invalid value: -1: "
            "must be greater than or equal to 1",
        ),
        (
            templates(template(schedulingConstraints={"topologyConstraints": []})),
            "spec.podGroupTemplates[0].schedulingConstraints.topologyConstraints: Required value",
        ),
        (
            templates(
                template(schedulingConstraints={"topologyConstraints": [{"topologyKey": "a"}] * 2})
            ),
            "spec.podGroupTemplates[0].schedulingConstraints.topologyConstraints: Too many: 2: "
            "must have at most 1 item",
        ),
        (
            templates(template(schedulingConstraints={"topologyConstraints": [{}]})),
            "schedulingConstraints.topologyConstraints[0].topologyKey: Required value",
        ),
        (
            templates(
                template(schedulingConstraints={"topologyConstraints": [{"topologyKey": "a b"}]})
            ),
            'schedulingConstraints.topologyConstraints[0].topologyKey: Invalid value: "a b"',
        ),
    ],
)
def test_an_invalid_v1alpha2_workload_is_refused(obj: dict[str, Any], error: str) -> None:
    reason = refused(WL, obj)
    assert reason.startswith('Workload.scheduling.k8s.io "job" is invalid: ')
    assert error in reason


def test_a_v1alpha2_workload_at_its_limits_is_accepted() -> None:
    at_limit = templates(*[template(f"g{i}") for i in range(8)])
    at_limit["spec"]["podGroupTemplates"][0]["schedulingPolicy"] = {"gang": {"minCount": 1}}
    at_limit["spec"]["podGroupTemplates"][1]["schedulingConstraints"] = TOPOLOGY
    assert decode(WL, at_limit).obj.policy("g0").gang.min_count == 1


# --- PodGroup v1alpha2 ----------------------------------------------------------------------


def test_a_v1alpha2_pod_group_has_a_subject_of_its_own() -> None:
    assert object_of_subject(PG) == ("workloadpodgroup", "default", "pg")
    ev = decode(PG, make_scheduling_pod_group("pg", 3, workload="job", template="workers"))
    assert isinstance(ev.obj, SchedulingPodGroup) and ev.obj.min_count == 3
    assert ev.unknown == []
    assert decode(PG, make_scheduling_pod_group("pg", None)).obj.min_count is None
    # scheduler-plugins' PodGroup on this subject is refused: it has no schedulingPolicy
    assert "spec.schedulingPolicy: Invalid value" in refused(PG, make_pod_group("pg", 3))


def pod_group(spec: dict[str, Any]) -> dict[str, Any]:
    obj = make_scheduling_pod_group("pg", 2)
    obj["spec"] = spec
    return obj


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            {},
            'spec.schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`',
        ),
        ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "gang.minCount: Required value"),
        (
            {"schedulingPolicy": {"gang": {"minCount": -3}}},
            "spec.schedulingPolicy.gang.minCount: Invalid value: -3: "
            "must be greater than or equal to 1",
        ),
        (
            {"schedulingPolicy": GANG, "podGroupTemplateRef": {}},
            'spec.podGroupTemplateRef: Invalid value: "": must specify one of: `workload`',
        ),
        (
            {"schedulingPolicy": GANG, "podGroupTemplateRef": {"workload": {"workloadName": "j"}}},
            "spec.podGroupTemplateRef.workload.podGroupTemplateName: Required value",
        ),
        (
            {
                "schedulingPolicy": GANG,
                "podGroupTemplateRef": {
                    "workload": {"workloadName": "j.k", "podGroupTemplateName": "t"}
                },
            },
            'spec.podGroupTemplateRef.workload.workloadName: Invalid value: "j.k"',
        ),
        (
            {"schedulingPolicy": GANG, "schedulingConstraints": {"topologyConstraints": []}},
            "spec.schedulingConstraints.topologyConstraints: Required value",
        ),
    ],
)
def test_an_invalid_v1alpha2_pod_group_is_refused(spec: dict[str, Any], error: str) -> None:
    reason = refused(PG, pod_group(spec))
    assert reason.startswith('PodGroup.scheduling.k8s.io "pg" is invalid: ')
    assert error in reason


def test_a_pod_group_name_is_a_dns_subdomain() -> None:
    obj = make_scheduling_pod_group("pg", 2)
    obj["metadata"]["name"] = "PG"
    assert "podgroup name" in refused("ksched.cluster.workloadpodgroups.default.PG", obj)


# --- the pod's spec.schedulingGroup ---------------------------------------------------------


def test_a_scheduling_group_pod_names_its_gang() -> None:
    ev = decode(POD, make_group_pod("p", "train.a"))
    assert ev.obj.spec.scheduling_group.pod_group_name == "train.a" and ev.unknown == []
    assert gang_of(ev.raw) == "default/PodGroup:train.a"
    both = make_group_pod("p", "pg")
    both["spec"]["workloadRef"] = {"name": "job", "podGroup": "workers"}
    assert gang_of(both) == "default/PodGroup:pg"  # 1.36's field wins


@pytest.mark.parametrize(
    ("group", "error"),
    [
        ({}, 'spec.schedulingGroup: Invalid value: "": must specify one of: `podGroupName`'),
        ({"podGroupName": "Bad!"}, 'spec.schedulingGroup.podGroupName: Invalid value: "Bad!"'),
        ({"podGroupName": "a" * 254}, "spec.schedulingGroup.podGroupName: Invalid value: "),
    ],
)
def test_an_invalid_scheduling_group_is_refused(group: dict[str, Any], error: str) -> None:
    pod = make_pod("p")
    pod["spec"]["schedulingGroup"] = group
    reason = refused(POD, pod)
    assert reason.startswith('Pod "p" is invalid: ') and error in reason


def test_a_scheduling_group_name_at_the_subdomain_limit_is_accepted() -> None:
    name = ".".join(["a" * 63] * 3) + "." + "b" * 61  # 253 characters
    assert decode(POD, make_group_pod("p", name)).obj.spec.scheduling_group.pod_group_name == name


# --- immutability ---------------------------------------------------------------------------

IMMUTABLE_CASES = [
    (
        "workload",
        make_workload("job", {"workers": 3}),
        make_workload("job", {"workers": 2}),
        'Workload.scheduling.k8s.io "job" is invalid: spec.podGroups: Invalid value: '
        '[{"name":"workers","policy":{"gang":{"minCount":2}}}]: field is immutable',
    ),
    (
        "workload",
        make_workload_v1alpha2("job", {"workers": 3}),
        make_workload_v1alpha2("job", {"workers": 3, "ps": None}),
        "spec.podGroupTemplates: Invalid value: ",
    ),
    (
        "workload",
        make_workload_v1alpha2("job", {"workers": 3}),
        {
            **make_workload_v1alpha2("job", {"workers": 3}),
            "spec": {
                **make_workload_v1alpha2("job", {"workers": 3})["spec"],
                "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "j"},
            },
        },
        'spec.controllerRef: Invalid value: {"apiGroup":"batch","kind":"Job","name":"j"}: '
        "field is immutable",
    ),
    (
        "workloadpodgroup",
        make_scheduling_pod_group("pg", 3),
        make_scheduling_pod_group("pg", 2),
        'PodGroup.scheduling.k8s.io "pg" is invalid: spec.schedulingPolicy: Invalid value: '
        '{"gang":{"minCount":2}}: field is immutable',
    ),
    (
        "workloadpodgroup",
        make_scheduling_pod_group("pg", 3),
        make_scheduling_pod_group("pg", 3, workload="job", template="t"),
        "spec.podGroupTemplateRef: Invalid value: ",
    ),
    (
        "pod",
        make_group_pod("p", "pg"),
        make_group_pod("p", "pg2"),
        'Pod "p" is invalid: spec.schedulingGroup: Invalid value: {"podGroupName":"pg2"}: '
        "field is immutable",
    ),
    (
        "pod",
        make_pod("p"),
        make_group_pod("p", "pg"),
        "spec.schedulingGroup: Invalid value: ",
    ),
    (
        "pod",
        {**make_pod("p"), "spec": {**make_pod("p")["spec"], "workloadRef": {"name": "a"}}},
        make_pod("p"),
        "spec.workloadRef: Invalid value: null: field is immutable",
    ),
]


@pytest.mark.parametrize(("kind", "old", "new", "error"), IMMUTABLE_CASES)
def test_an_update_that_changes_an_immutable_field_is_refused(
    kind: str, old: dict[str, Any], new: dict[str, Any], error: str
) -> None:
    seen = ImmutableFields()
    key = "default/" + old["metadata"]["name"]
    assert seen.refusal(kind, key, old, False) is None  # a create
    seen.remember(kind, key, old, False)
    reason = seen.refusal(kind, key, new, False)
    assert reason is not None and error in reason
    assert seen.refusal(kind, key, old, False) is None  # the same again
    # deleted and created again: a new object, free to differ
    assert seen.refusal(kind, key, new, True) is None
    seen.remember(kind, key, new, True)
    assert seen.refusal(kind, key, new, False) is None


def test_another_uid_is_another_object() -> None:
    seen = ImmutableFields()
    old = make_group_pod("p", "pg")
    old["metadata"]["uid"] = "u1"
    seen.remember("pod", "default/p", old, False)
    new = make_group_pod("p", "pg2")
    new["metadata"]["uid"] = "u2"
    assert seen.refusal("pod", "default/p", new, False) is None
    new["metadata"]["uid"] = "u1"
    assert seen.refusal("pod", "default/p", new, False) is not None
    # what the update may change: anything else
    other = make_group_pod("p", "pg", cpu="2")
    other["metadata"]["uid"] = "u1"
    other["metadata"]["labels"] = {"a": "b"}
    assert seen.refusal("pod", "default/p", other, False) is None


def test_the_informer_keeps_the_old_object_on_an_immutable_change() -> None:
    objects = ClusterObjects()
    on_change = owners_handler(objects)
    ref = SubjectRef("workloadpodgroup", "default", "pg")
    first = decode(PG, make_scheduling_pod_group("pg", 3)).obj
    on_change(ref, first)
    on_change(ref, decode(PG, make_scheduling_pod_group("pg", 2)).obj)
    assert objects.pod_groups["default/pg"] is first
    labelled = make_scheduling_pod_group("pg", 3)
    labelled["metadata"]["labels"] = {"a": "b"}
    on_change(ref, decode(PG, labelled).obj)  # a change of anything else is taken
    assert objects.pod_groups["default/pg"].metadata.labels == {"a": "b"}
    on_change(ref, None)  # deleted
    assert "default/pg" not in objects.pod_groups
    wref = SubjectRef("workload", "default", "job")
    w1 = decode(WL, make_workload("job", {"workers": 3})).obj
    on_change(wref, w1)
    on_change(wref, decode(WL, make_workload("job", {"workers": 1})).obj)
    assert objects.workloads["default/job"] is w1


# --- a new watcher leader: which retained event holds the accepted object --------------------


def retained(seq: int, undo: bool = False) -> Retained:
    return Retained(seq, b"", {UNDO_HEADER: str(seq - 1)} if undo else None)


@pytest.mark.parametrize(
    ("events", "processed_through", "chosen"),
    [
        ([retained(3), retained(7)], 10, 7),  # both processed: the latest
        ([retained(3), retained(7)], 5, 3),  # 7 not yet delivered: judged against 3 later
        ([retained(3), retained(7)], 2, None),  # nothing processed yet
        ([retained(3), retained(7, undo=True)], 5, 7),  # 3 refused, 7 restores the object
        ([retained(7, undo=True)], 0, 7),
        ([], 10, None),
    ],
)
def test_a_new_leader_remembers_the_last_accepted_event(
    events: list[Retained], processed_through: int, chosen: int | None
) -> None:
    found = accepted(events, processed_through)
    assert (found.seq if found else None) == chosen


# --- the PodGroupScheduled condition the binder writes ---------------------------------------


def test_the_binders_outcomes_give_each_pod_group_its_condition() -> None:
    a, b = make_group_pod("a", "pg"), make_group_pod("b", "pg2")
    plain = make_pod("c")
    wanted = wanted_conditions(
        [
            (a, False, "0/1 nodes are available: 1 rejected due to timeout", "GangScheduling"),
            (a, True, "", ""),  # a bound member wins over a rejected one
            (b, False, "0/1 nodes are available: 1 rejected due to timeout", "GangScheduling"),
            (b, False, "Binding rejected: conflict", ""),  # not a Permit rejection
            (plain, True, "", ""),  # in no PodGroup
        ]
    )
    assert wanted == {
        ("default", "pg"): ("True", "Scheduled", ""),
        ("default", "pg2"): (
            "False",
            "Unschedulable",
            "0/1 nodes are available: 1 rejected due to timeout",
        ),
    }


def test_the_condition_is_set_once_and_keeps_its_transition_time() -> None:
    group = make_scheduling_pod_group("pg", 2)
    failed = with_scheduled_condition(group, "False", "Unschedulable", "m", "t1")
    assert failed is not None and scheduled_condition(failed) == {
        "type": "PodGroupScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "m",
        "lastTransitionTime": "t1",
    }
    assert with_scheduled_condition(failed, "False", "Unschedulable", "m", "t2") is None
    again = with_scheduled_condition(failed, "False", "Unschedulable", "m2", "t2")
    assert again is not None and scheduled_condition(again)["lastTransitionTime"] == "t1"
    done = with_scheduled_condition(again, "True", "Scheduled", "", "t3")
    assert done is not None and len(done["status"]["conditions"]) == 1
    assert scheduled_condition(done)["lastTransitionTime"] == "t3"
    assert group.get("status") is None  # the object read is not changed
    assert decode(PG, done).obj.spec.scheduling_policy.gang.min_count == 2  # still valid
