"""1.37's Workload API (scheduling.k8s.io/v1beta1) at ksched's door: a Workload and a
PodGroup of that version on the subjects of the older ones, validated with the API
server's messages (each rule at and past its limit, the gated fields refused), and its
update rules: templates neither added nor removed, the basic/gang choice fixed, other
fields immutable, but a gang's minCount free to change, and the new count is what the
informers keep and GangScheduling reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.api.events import SubjectRef
from shared.api.immutable import ImmutableFields
from shared.api.podgroup import (
    SchedulingPodGroup,
    scheduled_condition,
    with_scheduled_condition,
)
from shared.api.workload import Workload
from shared.framework.events import ADD, WORKLOAD_POD_GROUP
from shared.framework.interface import ClusterEvent, ClusterObjects
from shared.runtime.informer import owners_handler
from shared.tools.synthetic import (
    make_pod_group_v1beta1,
    make_scheduling_pod_group,
    make_workload_v1alpha2,
    make_workload_v1beta1,
)
from tests.unit.plugins.test_gangscheduling import GangQueue, in_group
from tests.unit.test_workload_v1alpha2 import decode, refused

WL = "ksched.cluster.workloads.default.job"
PG = "ksched.cluster.workloadpodgroups.default.pg"
GANG = {"gang": {"minCount": 2}}
LABEL_GRAMMAR = "a lowercase RFC 1123 label must consist of lower case alphanumeric"
SUBDOMAIN_GRAMMAR = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric"


def templates(*items: dict[str, Any], **spec: Any) -> dict[str, Any]:
    obj = make_workload_v1beta1("job", {})
    obj["spec"] = {"podGroupTemplates": list(items), **spec}
    return obj


def template(name: str = "g", policy: Any = None, **more: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": policy if policy is not None else GANG, **more}


def claim(name: str = "c", **ref: Any) -> dict[str, Any]:
    return {"name": name, **(ref or {"resourceClaimName": "rc"})}


# --- Workload v1beta1 ----------------------------------------------------------------------


def test_a_v1beta1_workload_is_read_beside_the_older_versions_on_the_same_subject() -> None:
    obj = make_workload_v1beta1("job", {"workers": 3, "driver": None})
    obj["spec"]["podGroupTemplates"][0].update(
        resourceClaims=[claim()],
        disruptionMode={"all": {}},
        priorityClassName="high",
        priority=7,
        schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]},
    )
    ev = decode(WL, obj)
    assert isinstance(ev.obj, Workload) and ev.unknown == []
    workers = ev.obj.policy("workers")
    assert workers is not None and workers.gang is not None and workers.gang.min_count == 3
    assert ev.obj.policy("driver").gang is None
    kept = ev.obj.spec.pod_group_templates[0]
    assert (kept.priority, kept.priority_class_name, kept.disruption_mode) == (
        7,
        "high",
        {"all": {}},
    )
    # each version's own shape: v1alpha2's topologyConstraints is unknown in v1beta1
    old_shape = make_workload_v1beta1("job", {"workers": 3})
    old_shape["spec"]["podGroupTemplates"][0]["schedulingConstraints"] = {
        "topologyConstraints": [{"topologyKey": "k"}]
    }
    assert decode(WL, old_shape).unknown == [
        "spec.podGroupTemplates[0].schedulingConstraints.topologyConstraints"
    ]


TEMPLATE = "spec.podGroupTemplates[0]"


@pytest.mark.parametrize(
    ("obj", "errors"),
    [
        (
            templates(),
            [
                'spec: Invalid value: "": must specify one of: `podGroupTemplates`, '
                "`compositePodGroupTemplates`"
            ],
        ),
        (
            templates(compositePodGroupTemplates=[{"name": "c"}]),
            ["spec.compositePodGroupTemplates: Forbidden"],
        ),
        (
            templates(template(), compositePodGroupTemplates=[{"name": "c"}]),
            [
                'spec: Invalid value: "{`podGroupTemplates`, `compositePodGroupTemplates`}": '
                "exactly one of `podGroupTemplates`, `compositePodGroupTemplates` is required, "
                "but multiple fields are set",
                "spec.compositePodGroupTemplates: Forbidden",
            ],
        ),
        (
            templates(*[template(f"g{i}") for i in range(9)]),
            ["spec.podGroupTemplates: Too many: 9: must have at most 8 items"],
        ),
        (templates(template("g"), template("g")), ["spec.podGroupTemplates[1]: Duplicate value"]),
        (
            templates(template("Bad_Name")),
            [f'{TEMPLATE}.name: Invalid value: "Bad_Name": {LABEL_GRAMMAR}'],
        ),
        (
            templates(template(policy={"gang": {"minCount": 0}})),
            [f"{TEMPLATE}.schedulingPolicy.gang.minCount: Required value"],
        ),
        (
            templates(template(policy={"basic": {}, **GANG})),
            [f'{TEMPLATE}.schedulingPolicy: Invalid value: "{{`basic`, `gang`}}"'],
        ),
        (
            templates(template(resourceClaims=[claim(f"c{i}") for i in range(5)])),
            [f"{TEMPLATE}.resourceClaims: Too many: 5: must have at most 4 items"],
        ),
        (
            templates(template(resourceClaims=[claim("c"), claim("c")])),
            [f"{TEMPLATE}.resourceClaims[1]: Duplicate value: "],
        ),
        (
            templates(template(resourceClaims=[{"name": "c"}])),
            [
                f'{TEMPLATE}.resourceClaims[0]: Invalid value: "": must specify one of: '
                "`resourceClaimName`, `resourceClaimTemplateName`"
            ],
        ),
        (
            templates(
                template(
                    resourceClaims=[
                        claim(resourceClaimName="a", resourceClaimTemplateName="b"),
                    ]
                )
            ),
            [f"{TEMPLATE}.resourceClaims[0]: Invalid value: "],
        ),
        (
            templates(template(resourceClaims=[claim("", resourceClaimName="a")])),
            [f"{TEMPLATE}.resourceClaims[0].name: Required value"],
        ),
        (
            templates(template(resourceClaims=[claim(resourceClaimTemplateName="A_b")])),
            [
                f'{TEMPLATE}.resourceClaims[0].resourceClaimTemplateName: Invalid value: "A_b": '
                f"{SUBDOMAIN_GRAMMAR}"
            ],
        ),
        (
            templates(template(disruptionMode={})),
            [f'{TEMPLATE}.disruptionMode: Invalid value: "": must specify one of: `single`, `all`'],
        ),
        (
            templates(template(disruptionMode={"single": {}, "all": {}})),
            [
                f'{TEMPLATE}.disruptionMode: Invalid value: "{{`single`, `all`}}": exactly one '
                "of `single`, `all` is required, but multiple fields are set"
            ],
        ),
        (
            templates(template(priorityClassName="High!")),
            [f'{TEMPLATE}.priorityClassName: Invalid value: "High!": {SUBDOMAIN_GRAMMAR}'],
        ),
        (
            templates(template(priority=1_000_000_001)),
            [
                f"{TEMPLATE}.priority: Invalid value: 1000000001: "
                "must be less than or equal to 1000000000"
            ],
        ),
        (
            templates(template(preemptionPolicy="Never")),
            [f"{TEMPLATE}.preemptionPolicy: Forbidden"],
        ),
        (
            templates(template(schedulingConstraints={"topology": [{"key": "a"}, {"key": "b"}]})),
            [f"{TEMPLATE}.schedulingConstraints.topology: Too many: 2: must have at most 1 item"],
        ),
        (
            templates(template(schedulingConstraints={"topology": [{}]})),
            [f"{TEMPLATE}.schedulingConstraints.topology[0].key: Required value"],
        ),
        (
            templates(template(schedulingConstraints={"topology": [{"key": "a b"}]})),
            [f'{TEMPLATE}.schedulingConstraints.topology[0].key: Invalid value: "a b"'],
        ),
    ],
)
def test_an_invalid_v1beta1_workload_is_refused(obj: dict[str, Any], errors: list[str]) -> None:
    reason = refused(WL, obj)
    assert reason.startswith('Workload.scheduling.k8s.io "job" is invalid: ')
    for error in errors:
        assert error in reason
    if len(errors) > 1:  # all of them, nothing lost
        assert reason.count(", ") >= len(errors) - 1


def test_a_v1beta1_workload_at_its_limits_is_accepted() -> None:
    items = [template(f"g{i}") for i in range(8)]
    items[0].update(
        schedulingPolicy={"gang": {"minCount": 1}},
        resourceClaims=[claim(f"c{i}") for i in range(3)]
        + [claim("t", resourceClaimTemplateName="tpl")],
        priority=1_000_000_000,
        disruptionMode={"single": {}},
        schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]},
    )
    items[1].update(priority=-5, priorityClassName="a.b", schedulingConstraints={})
    ev = decode(WL, templates(*items))
    assert ev.obj.policy("g0").gang.min_count == 1 and ev.unknown == []
    assert len(ev.obj.spec.pod_group_templates[0].resource_claims) == 4


# --- PodGroup v1beta1 ----------------------------------------------------------------------


def test_a_v1beta1_pod_group_is_read_on_the_pod_group_subject() -> None:
    ev = decode(PG, make_pod_group_v1beta1("pg", 3, workload="job", template="workers"))
    assert isinstance(ev.obj, SchedulingPodGroup) and ev.obj.min_count == 3
    assert ev.obj.spec.workload_ref is not None
    assert ev.obj.spec.workload_ref.template_name == "workers" and ev.unknown == []
    # v1alpha2's podGroupTemplateRef is not a v1beta1 field
    old_ref = make_pod_group_v1beta1("pg", 3)
    old_ref["spec"]["podGroupTemplateRef"] = {"workload": {"workloadName": "j"}}
    assert decode(PG, old_ref).unknown == ["spec.podGroupTemplateRef"]


def pod_group(**spec: Any) -> dict[str, Any]:
    obj = make_pod_group_v1beta1("pg", 2)
    obj["spec"].update(spec)
    return obj


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        (
            pod_group(schedulingPolicy={}),
            'spec.schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`',
        ),
        (
            pod_group(schedulingPolicy={"gang": {"minCount": -1}}),
            "spec.schedulingPolicy.gang.minCount: Invalid value: -1: "
            "must be greater than or equal to 1",
        ),
        (
            pod_group(parentCompositePodGroupName="cpg"),
            "spec.parentCompositePodGroupName: Forbidden",
        ),
        (pod_group(workloadRef={"workloadName": "j"}), "spec.workloadRef.templateName: Required"),
        (pod_group(workloadRef={"templateName": "t"}), "spec.workloadRef.workloadName: Required"),
        (
            pod_group(workloadRef={"workloadName": "j", "templateName": "t.x"}),
            'spec.workloadRef.templateName: Invalid value: "t.x": must not contain dots',
        ),
        (
            pod_group(resourceClaims=[claim(f"c{i}") for i in range(5)]),
            "spec.resourceClaims: Too many: 5: must have at most 4 items",
        ),
        (
            pod_group(priority=2_000_000_000),
            "spec.priority: Invalid value: 2000000000: must be less than or equal to 1000000000",
        ),
        (pod_group(preemptionPolicy="PreemptLowerPriority"), "spec.preemptionPolicy: Forbidden"),
        # an int32 in the API: what Go's decoder refuses
        (pod_group(priority="high"), "spec.priority: cannot unmarshal string into an int32"),
        (pod_group(disruptionMode={"none": {}}), 'spec.disruptionMode: Invalid value: ""'),
    ],
)
def test_an_invalid_v1beta1_pod_group_is_refused(obj: dict[str, Any], error: str) -> None:
    reason = refused(PG, obj)
    assert reason.startswith('PodGroup.scheduling.k8s.io "pg" is invalid: ') or (
        "unmarshal" in error
    )
    assert error in reason


def test_a_v1beta1_pod_group_at_its_limits_is_accepted() -> None:
    obj = pod_group(
        workloadRef={"workloadName": "job.x", "templateName": "workers"},
        resourceClaims=[claim(f"c{i}") for i in range(4)],
        priority=1_000_000_000,
        priorityClassName="high",
        disruptionMode={"all": {}},
        schedulingPolicy={"gang": {"minCount": 1}},
    )
    assert decode(PG, obj).obj.min_count == 1


# --- updates --------------------------------------------------------------------------------


def with_template(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    new = json.loads(json.dumps(obj))
    new["spec"]["podGroupTemplates"][0].update(fields)
    return new


WORKERS_4 = make_workload_v1beta1("job", {"workers": 4, "ps": None})
UPDATE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    # accepted: a gang's minCount, up or down
    ("workload", WORKERS_4, make_workload_v1beta1("job", {"workers": 3, "ps": None}), []),
    ("workload", WORKERS_4, make_workload_v1beta1("job", {"workers": 9, "ps": None}), []),
    ("workload", WORKERS_4, make_workload_v1beta1("job", {"ps": None, "workers": 4}), []),
    ("workloadpodgroup", make_pod_group_v1beta1("pg", 4), make_pod_group_v1beta1("pg", 3), []),
    # a PodGroup's disruptionMode defaults to single: absent and single are one value
    ("workloadpodgroup", pod_group(), pod_group(disruptionMode={"single": {}}), []),
    # refused
    (
        "workload",
        WORKERS_4,
        make_workload_v1beta1("job", {"workers": 4, "ps": None, "extra": 1}),
        ["spec.podGroupTemplates[2]: Forbidden: cannot add new items"],
    ),
    (
        "workload",
        WORKERS_4,
        make_workload_v1beta1("job", {"workers": 4}),
        ["spec.podGroupTemplates: Forbidden: cannot remove items"],
    ),
    (
        "workload",
        WORKERS_4,
        make_workload_v1beta1("job", {"workers": 4, "other": None}),
        [
            "spec.podGroupTemplates[1]: Forbidden: cannot add new items",
            "spec.podGroupTemplates: Forbidden: cannot remove items",
        ],
    ),
    (
        "workload",
        WORKERS_4,
        make_workload_v1beta1("job", {"workers": None, "ps": None}),
        [
            "spec.podGroupTemplates[0].schedulingPolicy.basic: Invalid value: null: "
            "field is immutable",
            "spec.podGroupTemplates[0].schedulingPolicy.gang: Forbidden: "
            "field cannot be cleared once set",
        ],
    ),
    (
        "workload",
        WORKERS_4,
        make_workload_v1beta1("job", {"workers": 4, "ps": 2}),
        [
            "spec.podGroupTemplates[1].schedulingPolicy.basic: Invalid value: null: "
            "field is immutable",
            "spec.podGroupTemplates[1].schedulingPolicy.gang: Forbidden: "
            "field cannot be set once created",
        ],
    ),
    *[
        (
            "workload",
            WORKERS_4,
            with_template(WORKERS_4, **{name: value}),
            [f"spec.podGroupTemplates[0].{name}: Invalid value: null: field is immutable"],
        )
        for name, value in [
            ("priority", 5),
            ("priorityClassName", "high"),
            ("disruptionMode", {"all": {}}),
            ("resourceClaims", [claim()]),
            ("schedulingConstraints", {"topology": [{"key": "k"}]}),
        ]
    ],
    (
        "workload",
        WORKERS_4,
        {**WORKERS_4, "spec": {**WORKERS_4["spec"], "controllerRef": {"kind": "Job", "name": "j"}}},
        ["spec.controllerRef: Invalid value: null: field is immutable"],
    ),
    *[
        (
            "workloadpodgroup",
            pod_group(),
            pod_group(**{name: value}),
            [f"spec.{name}: Invalid value: null: field is immutable"],
        )
        for name, value in [
            ("workloadRef", {"workloadName": "j", "templateName": "t"}),
            ("priority", 1),
            ("priorityClassName", "p"),
            ("disruptionMode", {"all": {}}),
            ("resourceClaims", [claim()]),
        ]
    ],
    (
        "workloadpodgroup",
        make_pod_group_v1beta1("pg", 4),
        make_pod_group_v1beta1("pg", None),
        ["spec.schedulingPolicy.gang: Forbidden: field cannot be cleared once set"],
    ),
    # from v1alpha2 to v1beta1: judged by v1beta1's rules, the old values read at its paths
    (
        "workload",
        make_workload_v1alpha2("job", {"w": 4}),
        make_workload_v1beta1("job", {"w": 3}),
        [],
    ),
    (
        "workload",
        make_workload_v1beta1("job", {"w": 4}),
        make_workload_v1alpha2("job", {"w": 3}),
        ["spec.podGroupTemplates: Invalid value: [{"],  # v1alpha2: all immutable
    ),
]


@pytest.mark.parametrize(("kind", "old", "new", "errors"), UPDATE_CASES)
def test_v1beta1_updates_follow_the_api_servers_rules(
    kind: str, old: dict[str, Any], new: dict[str, Any], errors: list[str]
) -> None:
    decode(PG if kind == "workloadpodgroup" else WL, new)  # each is valid on its own
    seen = ImmutableFields()
    key = "default/" + old["metadata"]["name"]
    seen.remember(kind, key, old, False)
    reason = seen.refusal(kind, key, new, False)
    if not errors:
        assert reason is None
        return
    assert reason is not None
    for error in errors:
        assert error in reason
    # deleted and created again: a new object, free to differ
    assert seen.refusal(kind, key, new, True) is None


def test_the_informers_take_a_new_min_count_and_keep_the_old_object_otherwise() -> None:
    objects = ClusterObjects()
    on_change = owners_handler(objects)
    ref = SubjectRef("workloadpodgroup", "default", "pg")
    on_change(ref, decode(PG, make_pod_group_v1beta1("pg", 4)).obj)
    on_change(ref, decode(PG, make_pod_group_v1beta1("pg", 3)).obj)
    assert objects.pod_groups["default/pg"].min_count == 3
    kept = objects.pod_groups["default/pg"]
    on_change(ref, decode(PG, pod_group(priority=5)).obj)  # immutable: refused
    assert objects.pod_groups["default/pg"] is kept
    on_change(ref, decode(PG, make_pod_group_v1beta1("pg", None)).obj)  # gang cleared
    assert objects.pod_groups["default/pg"] is kept
    wref = SubjectRef("workload", "default", "job")
    on_change(wref, decode(WL, WORKERS_4).obj)
    on_change(wref, decode(WL, make_workload_v1beta1("job", {"workers": 2, "ps": None})).obj)
    assert objects.workloads["default/job"].policy("workers").gang.min_count == 2
    # a v1alpha2 PodGroup stays all immutable
    on_change(ref, None)
    on_change(ref, decode(PG, make_scheduling_pod_group("pg", 4)).obj)
    alpha = objects.pod_groups["default/pg"]
    on_change(ref, decode(PG, make_scheduling_pod_group("pg", 3)).obj)
    assert objects.pod_groups["default/pg"] is alpha


def test_a_lowered_min_count_lets_the_held_gang_into_the_queue() -> None:
    """Three pods of a gang of minCount 4 wait at PreEnqueue; the PodGroup's update to
    minCount 3, as the queue's informer takes it, lets all three in."""
    gq = GangQueue()
    on_change = owners_handler(gq.objects)
    ref = SubjectRef("workloadpodgroup", "default", "pg")
    on_change(ref, decode(PG, make_pod_group_v1beta1("pg", 4)).obj)
    for name in "abc":
        gq.add(in_group(name))
    assert gq.where("a", "b", "c") == ["gated", "gated", "gated"]
    update = decode(PG, make_pod_group_v1beta1("pg", 3), "MODIFIED")
    on_change(ref, update.obj)
    # the queue service reports a changed PodGroup as its Add event (services/queue)
    gq.q.move_all_to_active_or_backoff(ClusterEvent(WORKLOAD_POD_GROUP, ADD), None, update.raw)
    assert gq.where("a", "b", "c") == ["active", "active", "active"]


# --- the PodGroupInitiallyScheduled condition -----------------------------------------------


def test_a_v1beta1_pod_group_gets_pod_group_initially_scheduled_which_stays_true() -> None:
    group = make_pod_group_v1beta1("pg", 2)
    failed = with_scheduled_condition(group, "False", "Unschedulable", "m", "t1")
    assert failed is not None
    assert [c["type"] for c in failed["status"]["conditions"]] == ["PodGroupInitiallyScheduled"]
    done = with_scheduled_condition(failed, "True", "Scheduled", "", "t2")
    assert done is not None and scheduled_condition(done)["status"] == "True"
    # a terminal state: nothing moves it back
    assert with_scheduled_condition(done, "False", "Unschedulable", "later", "t3") is None
    assert decode(PG, done).obj.min_count == 2 and decode(PG, done).unknown == []
