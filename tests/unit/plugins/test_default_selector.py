"""helper.DefaultSelector and PodTopologySpread's default constraints built from it:
upstream's helper/spread_test.go (TestGetPodServices, TestDefaultSelector) and the
podtopologyspread scoring_test / filtering_test cases with Services and ReplicaSets,
plus the owner references upstream ignores."""

from __future__ import annotations

import math
from typing import Any

import pytest

from shared.api.models import LabelSelector
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.handle import Handle
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.helper import default_selector, pod_services
from shared.plugins.podtopologyspread.plugin import new
from shared.plugins.podtopologyspread.scoring import PreScoreState
from tests.builders import HOSTNAME, ZONE, cluster_objects, make_node, make_pod

PRE_SCORE = StateKey[PreScoreState]("PreScorePodTopologySpread")


def service(name: str, selector: dict[str, str] | None, namespace: str = "test") -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def controller(
    kind: str, name: str, selector: dict[str, Any], namespace: str = "test"
) -> dict[str, Any]:
    """A ReplicaSet or StatefulSet whose template its selector matches (the API server
    refuses one that does not; upstream's fakes have no template)."""
    labels = dict(selector.get("matchLabels") or {})
    labels.update({e["key"]: "x" for e in selector.get("matchExpressions") or []})
    spec = {"selector": selector, "template": {"metadata": {"labels": labels}}}
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec}


def replication_controller(name: str, selector: dict[str, str]) -> dict[str, Any]:
    spec = {"selector": selector, "template": {"metadata": {"labels": selector}}}
    meta = {"name": name, "namespace": "test"}
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": meta, "spec": spec}


def equalities(selector: LabelSelector) -> dict[str, str]:
    """The selector as the labels.Set upstream's expectations are written in: every
    requirement an equality."""
    out = dict(selector.match_labels)
    for req in selector.match_expressions:
        assert req.operator == "In" and len(req.values) == 1, req
        out[req.key] = req.values[0]
    return out


# --- TestGetPodServices ---------------------------------------------------------------


@pytest.mark.parametrize(("index", "expect"), [(0, [0]), (1, [1]), (2, [2]), (3, []), (4, [])])
def test_get_pod_services(index: int, expect: list[int]) -> None:
    objects = cluster_objects(*(service(f"service-{i}", {"app": f"test-{i}"}) for i in range(3)))
    pod = (
        make_pod(f"test-pod-{index}", "test")
        .label("app", f"test-{index}")
        .label("label", f"label-{index}")
    )
    got = [s.metadata.name for s in pod_services(pod.info(), objects)]
    assert got == [f"service-{i}" for i in expect]


# --- TestDefaultSelector (its fakes accumulate from case to case) -----------------------

POD_LABEL = {"podLabelKey": "podLabelVal"}
SERVICE = service("test-service", POD_LABEL)
REPLICA_SET = controller(
    "ReplicaSet", "test-replicaset", {"matchLabels": {"replicaSetLabelKey": "replicaSetLabelVal"}}
)
RC = replication_controller(
    "test-replicationcontroller", {"replicationLabelKey": "replicationLabelVal"}
)
STATEFUL_SET = controller(
    "StatefulSet",
    "test-statefulset",
    {"matchLabels": {"statefulSetLabelKey": "statefulSetLabelVal"}},
)


@pytest.mark.parametrize(
    ("owner", "objects", "expect"),
    [
        pytest.param(None, [], {}, id="default case"),
        pytest.param(None, [SERVICE], POD_LABEL, id="no OwnerReference pod case"),
        pytest.param(
            ("apps/v1", "ReplicaSet", "test-replicaset"),
            [SERVICE, REPLICA_SET],
            {**POD_LABEL, "replicaSetLabelKey": "replicaSetLabelVal"},
            id="ReplicaSet OwnerReference pod case",
        ),
        pytest.param(
            ("v1", "ReplicationController", "test-replicationcontroller"),
            [SERVICE, REPLICA_SET, RC],
            {**POD_LABEL, "replicationLabelKey": "replicationLabelVal"},
            id="ReplicationController OwnerReference pod case",
        ),
        pytest.param(
            ("apps/v1", "StatefulSet", "test-statefulset"),
            [SERVICE, REPLICA_SET, RC, STATEFUL_SET],
            {**POD_LABEL, "statefulSetLabelKey": "statefulSetLabelVal"},
            id="StatefulSet OwnerReference pod case",
        ),
    ],
)
def test_default_selector(
    owner: tuple[str, str, str] | None, objects: list[dict[str, Any]], expect: dict[str, str]
) -> None:
    pod = make_pod("test-pod", "test").label("podLabelKey", "podLabelVal")
    if owner is not None:
        api_version, kind, name = owner
        pod.owner(kind, name, api_version)
    assert equalities(default_selector(pod.info(), cluster_objects(*objects))) == expect


# --- what upstream leaves out: owners it does not know, expressions kept -----------------


def _pod_owned(owner: dict[str, Any]) -> PodInfo:
    raw = make_pod("p", "test").label("app", "web").obj()
    raw["metadata"]["ownerReferences"] = [owner]
    return PodInfo.of(raw)


@pytest.mark.parametrize(
    "owner",
    [
        pytest.param(
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": False},
            id="not the controller",
        ),
        pytest.param({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs"}, id="no flag"),
        pytest.param(
            {"apiVersion": "apps/v1beta2", "kind": "ReplicaSet", "name": "rs", "controller": True},
            id="another group version",
        ),
        pytest.param(
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "controller": True},
            id="no such ReplicaSet",
        ),
        pytest.param(
            {"apiVersion": "batch/v1", "kind": "Job", "name": "rs", "controller": True},
            id="a Job",
        ),
    ],
)
def test_owners_default_selector_does_not_use(owner: dict[str, Any]) -> None:
    objects = cluster_objects(controller("ReplicaSet", "rs", {"matchLabels": {"app": "web"}}))
    assert default_selector(_pod_owned(owner), objects) == LabelSelector()


def test_a_controller_of_another_namespace_or_a_service_elsewhere_gives_nothing() -> None:
    objects = cluster_objects(
        controller("StatefulSet", "db", {"matchLabels": {"app": "web"}}, namespace="other"),
        service("web", {"app": "web"}, namespace="other"),
    )
    ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": True}
    assert default_selector(_pod_owned(ref), objects) == LabelSelector()


def test_match_expressions_of_the_controller_are_added_as_requirements() -> None:
    exists = {"key": "tier", "operator": "Exists"}
    objects = cluster_objects(
        controller(
            "ReplicaSet", "rs", {"matchLabels": {"app": "web"}, "matchExpressions": [exists]}
        )
    )
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True}
    got = default_selector(_pod_owned(ref), objects)
    assert got.match_labels == {}
    assert [(r.key, r.operator, r.values) for r in got.match_expressions] == [
        ("app", "In", ["web"]),
        ("tier", "Exists", []),
    ]


# --- podtopologyspread: TestPreScoreStateEmptyNodes / TestPreScoreSkip -------------------

RS1 = controller("ReplicaSet", "rs1", {"matchExpressions": [{"key": "foo", "operator": "Exists"}]})


def _rs1_pod() -> PodInfo:
    pod = make_pod("p").label("foo", "tar").label("baz", "sup").owner("ReplicaSet", "rs1")
    return pod.info()


def _pre_score(args: dict[str, Any], nodes: list[NodeInfo], pod: PodInfo) -> PreScoreState | None:
    rs1 = {**RS1, "metadata": {"name": "rs1", "namespace": "default"}}
    snapshot = ClusterSnapshot(nodes, cluster_objects(rs1))
    plugin = new(args, Handle(snapshot=snapshot))
    state = CycleState()
    status = plugin.pre_score(state, pod, snapshot.nodes)
    if status.code == Code.SKIP:
        return None
    assert status.ok, status
    return state.read(PRE_SCORE)


def _summary(s: PreScoreState) -> list[tuple[int, str, bool]]:
    """(maxSkew, topologyKey, whether the selector is rs1's) per constraint."""
    return [
        (c.max_skew, c.topology_key, c.matches({"foo": "x"}) and not c.matches({"baz": "sup"}))
        for c in s.constraints
    ]


def test_system_default_constraints_and_a_replicaset() -> None:
    nodes = [
        make_node("node-a").zone("mars").info(),
        make_node("node-b").zone("mars").info(),
        # nodes with no zone are not excluded: they are a separate zone
        make_node("node-c").info(),
        make_node("node-d").info(),
    ]
    s = _pre_score({"defaultingType": "System"}, nodes, _rs1_pod())
    assert s is not None
    assert _summary(s) == [(3, HOSTNAME, True), (5, ZONE, True)]
    assert s.ignored == set()
    assert s.counts[1] == {"mars": 0, "": 0}
    assert s.weights == [math.log(4 + 2), math.log(2 + 2)]


def test_list_default_constraints_and_a_replicaset() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": "ScheduleAnyway"},
        ],
    }
    node = make_node("node-a").label("rack", "rack1").label("planet", "mars").info()
    s = _pre_score(args, [node], _rs1_pod())
    assert s is not None
    assert _summary(s) == [(1, HOSTNAME, True), (2, "planet", True)]
    assert s.counts[1] == {"mars": 0}
    assert s.weights == [math.log(1 + 2), math.log(1 + 2)]


def test_default_constraints_and_a_replicaset_but_the_pod_has_constraints() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 2, "topologyKey": "galaxy", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
    }
    pod = (
        make_pod("p")
        .label("foo", "bar")
        .label("baz", "sup")
        .owner("ReplicaSet", "rs1")
        .spread(1, "zone", "bar", "", hard=True)
        .spread(2, "planet", "baz", "sup", hard=False)
    )
    node = make_node("node-a").label("planet", "mars").label("galaxy", "andromeda").info()
    s = _pre_score(args, [node], pod.info())
    assert s is not None
    assert [(c.max_skew, c.topology_key) for c in s.constraints] == [(2, "planet")]
    assert s.constraints[0].matches({"baz": "sup"})


def test_default_constraints_and_a_replicaset_that_does_not_match_skip() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
    }
    pod = make_pod("p").label("foo", "bar").label("baz", "sup").owner("ReplicaSet", "rs2")
    node = make_node("node-a").label("planet", "mars").info()
    assert _pre_score(args, [node], pod.info()) is None


# --- filtering_test: TestPreFilterState "default constraints and a service" ----------------


def test_do_not_schedule_defaults_take_the_service_selector_in_pre_filter() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 5, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"},
        ],
    }
    snapshot = ClusterSnapshot([], cluster_objects(service("svc", {"foo": "bar"}, "default")))
    plugin = new(args, Handle(snapshot=snapshot))
    pod = make_pod("p").label("foo", "bar").label("baz", "kar").info()
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, [])
    assert status.ok
    pre = state.read(StateKey("PreFilterPodTopologySpread"))
    assert pre is not None
    got = [(c.max_skew, c.topology_key, c.selector) for c in pre.constraints]
    want = LabelSelector(match_labels={"foo": "bar"})
    assert got == [(3, "node", want), (5, "rack", want)]


# --- enqueue: as upstream, no Service or controller events ------------------------------


def test_events_to_register_are_pod_and_node_events_only() -> None:
    """Upstream's PodTopologySpread registers no Service (or controller) event: a pod its
    default constraints rejected moves when pods or nodes change."""
    events = new({}, Handle()).events_to_register()
    assert {e.event.resource for e in events} == {"Pod", "Node"}


def test_the_pod_hint_judges_with_the_default_constraints_the_objects_give() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
        ],
    }
    objects = cluster_objects(service("web", {"app": "web"}, "default"))
    plugin = new(args, Handle(snapshot=ClusterSnapshot([], objects)))
    pending = make_pod("p").label("app", "web").info()
    gone = make_pod("q").label("app", "web").node("n1").info()
    assert plugin.is_schedulable_after_pod_change(pending, gone, None)
    # without the Service the pod has no default constraint a pod's leaving could help
    bare = new(args, Handle(snapshot=ClusterSnapshot([])))
    assert not bare.is_schedulable_after_pod_change(pending, gone, None)
