"""Cluster events: ActionType matching, naming node and pod changes, plugins' hints.

Modelled on kube-scheduler's framework/types_test.go (MatchClusterEvents),
events_test.go (NodeSchedulingPropertiesChange, PodSchedulingPropertiesChange)
and the plugins' Test_isSchedulableAfter* tables.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from services.queue.hints import to_hint_object
from shared.framework.events import (
    ActionType,
    action_type,
    event_from_label,
    event_label,
    match_cluster_events,
    node_update_actions,
    pod_update_actions,
)
from shared.framework.handle import Handle
from shared.framework.interface import ClusterEvent
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY

# --- builders ---------------------------------------------------------------------------


def node(
    name: str = "n",
    *,
    cpu: str = "4",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": pods}},
    }


def pod(
    name: str = "p",
    *,
    uid: str = "",
    ns: str = "default",
    node_name: str = "",
    cpu: str = "",
    labels: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    host_port: int = 0,
    affinity: dict[str, Any] | None = None,
    spread: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
    gates: list[str] | None = None,
    nominated: str = "",
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "i"}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    if host_port:
        container["ports"] = [{"containerPort": 80, "hostPort": host_port}]
    spec: dict[str, Any] = {"containers": [container]}
    optional = {
        "nodeName": node_name,
        "tolerations": tolerations,
        "affinity": affinity,
        "topologySpreadConstraints": spread,
        "nodeSelector": node_selector,
        "schedulingGates": [{"name": g} for g in gates or []],
    }
    spec |= {k: v for k, v in optional.items() if v}
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid or f"uid-{name}",
            "labels": labels or {},
        },
        "spec": spec,
        "status": {"nominatedNodeName": nominated} if nominated else {},
    }


def ni(raw: dict[str, Any] | None) -> NodeInfo | None:
    return to_hint_object("Node", raw)  # type: ignore[no-any-return]


def pi(raw: dict[str, Any] | None) -> PodInfo | None:
    return to_hint_object("Pod", raw)  # type: ignore[no-any-return]


def plugin(name: str) -> Any:
    return REGISTRY[name]({}, Handle())


def hint(plugin_name: str, event: ClusterEvent) -> Any:
    """The hint a plugin registered for an incoming event."""
    for reg in plugin(plugin_name).events_to_register():
        if match_cluster_events(reg.event, event):
            return reg.hint
    raise AssertionError(f"{plugin_name} did not register {event}")


# --- ActionType and matching ------------------------------------------------------------


def test_action_bits_follow_kube_order() -> None:
    assert int(ActionType.ADD) == 1 and int(ActionType.DELETE) == 2
    assert int(ActionType.UPDATE_NODE_ALLOCATABLE) == 4
    assert int(ActionType.UPDATE_POD_LABEL) == 1 << 8
    assert ActionType.ALL == ActionType.ADD | ActionType.DELETE | ActionType.UPDATE
    assert action_type("Add|UpdateNodeTaint") == ActionType.ADD | ActionType.UPDATE_NODE_TAINT
    with pytest.raises(ValueError, match="unknown cluster event action 'Frobnicate'"):
        action_type("Add|Frobnicate")


@pytest.mark.parametrize(
    ("registered", "incoming", "matches"),
    [
        pytest.param(("Node", "Add"), ("Node", "Add"), True, id="same event"),
        pytest.param(("Node", "Update"), ("Node", "UpdateNodeLabel"), True, id="finer incoming"),
        pytest.param(("Node", "UpdateNodeLabel"), ("Node", "Update"), False, id="coarser incoming"),
        pytest.param(("Node", "UpdateNodeLabel"), ("Node", "UpdateNodeTaint"), False, id="sibling"),
        pytest.param(
            ("Node", "Add|UpdateNodeTaint"), ("Node", "UpdateNodeTaint"), True, id="union"
        ),
        pytest.param(("Node", "All"), ("Node", "Delete"), True, id="All"),
        pytest.param(("Pod", "Add"), ("AssignedPod", "Add"), True, id="Pod covers AssignedPod"),
        pytest.param(("Pod", "Delete"), ("UnschedulablePod", "Delete"), True, id="and unscheduled"),
        pytest.param(("AssignedPod", "Add"), ("UnschedulablePod", "Add"), False, id="not across"),
        pytest.param(("Pod", "Add"), ("Node", "Add"), False, id="other resource"),
        pytest.param(("*", "All"), ("Node", "UpdateNodeLabel"), True, id="wildcard registration"),
        pytest.param(("Node", "All"), ("*", "All"), False, id="wildcard incoming"),
    ],
)
def test_match_cluster_events(
    registered: tuple[str, str], incoming: tuple[str, str], matches: bool
) -> None:
    assert match_cluster_events(ClusterEvent(*registered), ClusterEvent(*incoming)) is matches


def test_labels() -> None:
    assert event_label(ClusterEvent("Node", "Add")) == "NodeAdd"
    assert event_label(ClusterEvent("Node", "UpdateNodeLabel")) == "NodeUpdateNodeLabel"
    assert event_label(event_from_label("AssignedPodDelete")) == "AssignedPodDelete"
    assert event_from_label("AssignedPodDelete") == ClusterEvent("AssignedPod", "Delete")
    assert event_from_label("UnschedulableTimeout").resource == "*"
    assert event_from_label("SomethingElse") == ClusterEvent("*", "All", "SomethingElse")


# --- naming changes ---------------------------------------------------------------------


def _changed(base: dict[str, Any], mutate: Any) -> dict[str, Any]:
    new = copy.deepcopy(base)
    mutate(new)
    return new


@pytest.mark.parametrize(
    ("mutate", "actions"),
    [
        pytest.param(lambda n: None, [], id="nothing"),
        pytest.param(lambda n: n["status"].update(images=[{"names": ["x"]}]), [], id="heartbeat"),
        pytest.param(
            lambda n: n["metadata"]["labels"].update(a="b"), ["UpdateNodeLabel"], id="label"
        ),
        pytest.param(
            lambda n: n["status"]["allocatable"].update(cpu="8"),
            ["UpdateNodeAllocatable"],
            id="allocatable",
        ),
        pytest.param(
            lambda n: n["status"]["allocatable"].update(cpu="4000m"), [], id="same quantity"
        ),
        pytest.param(
            lambda n: n["spec"]["taints"].append({"key": "k", "effect": "NoSchedule"}),
            ["UpdateNodeTaint"],
            id="taint",
        ),
        pytest.param(
            lambda n: n["status"].update(conditions=[{"type": "Ready", "status": "False"}]),
            ["UpdateNodeCondition"],
            id="condition",
        ),
        pytest.param(
            lambda n: n["metadata"].update(annotations={"a": "b"}),
            ["UpdateNodeAnnotation"],
            id="annotation",
        ),
        pytest.param(lambda n: n["spec"].update(unschedulable=True), [], id="cordoned"),
        pytest.param(
            lambda n: (
                n["metadata"]["labels"].update(a="b"),
                n["status"]["allocatable"].update(cpu="1"),
            ),
            ["UpdateNodeAllocatable", "UpdateNodeLabel"],
            id="two changes, kube's order",
        ),
    ],
)
def test_node_update_actions(mutate: Any, actions: list[str]) -> None:
    old = node()
    assert node_update_actions(_changed(old, mutate), old) == actions


def test_uncordon_is_a_taint_update() -> None:
    cordoned = node(unschedulable=True)
    assert node_update_actions(node(), cordoned) == ["UpdateNodeTaint"]


@pytest.mark.parametrize(
    ("old", "new", "actions"),
    [
        pytest.param(pod(), pod(labels={"a": "b"}), ["UpdatePodLabel"], id="label"),
        pytest.param(pod(cpu="2"), pod(cpu="1"), ["UpdatePodScaleDown"], id="scale down"),
        pytest.param(pod(cpu="1"), pod(cpu="2"), ["Update"], id="scale up is a plain update"),
        pytest.param(pod(cpu="1"), pod(), ["UpdatePodScaleDown"], id="request removed"),
        pytest.param(
            pod(gates=["g"]), pod(), ["UpdatePodSchedulingGatesEliminated"], id="gates gone"
        ),
        pytest.param(pod(gates=["g", "h"]), pod(gates=["g"]), ["Update"], id="a gate left"),
        pytest.param(
            pod(),
            pod(tolerations=[{"key": "k", "operator": "Exists"}]),
            ["UpdatePodToleration"],
            id="toleration",
        ),
        pytest.param(pod(), pod(nominated="n1"), ["Update"], id="status only"),
    ],
)
def test_pod_update_actions(old: dict[str, Any], new: dict[str, Any], actions: list[str]) -> None:
    assert pod_update_actions(new, old) == actions


# --- plugins' queueing hints ------------------------------------------------------------

NODE_ADD = ClusterEvent("Node", "Add")
NOSCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATE = {"key": "dedicated", "operator": "Exists"}


@pytest.mark.parametrize(
    ("target", "old", "new", "queue"),
    [
        pytest.param(pod(cpu="2"), None, node(cpu="4"), True, id="added node fits"),
        pytest.param(pod(cpu="8"), None, node(cpu="4"), False, id="added node too small"),
        pytest.param(pod(cpu="2"), node(cpu="1"), node(cpu="4"), True, id="grew enough"),
        pytest.param(pod(cpu="8"), node(cpu="1"), node(cpu="4"), False, id="grew, too small"),
        pytest.param(pod(cpu="2"), node(cpu="4"), node(cpu="4", pods="10"), False, id="shrunk"),
        pytest.param(pod(), node(pods="0"), node(pods="1"), True, id="more pods allowed"),
    ],
)
def test_noderesourcesfit_node_hint(
    target: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any], queue: bool
) -> None:
    fn = hint("NodeResourcesFit", ClusterEvent("Node", "UpdateNodeAllocatable"))
    assert fn(pi(target), ni(old), ni(new)) is queue


@pytest.mark.parametrize(
    ("old", "new", "queue"),
    [
        pytest.param(pod("o", node_name="n", cpu="1"), None, True, id="assigned pod deleted"),
        pytest.param(pod("o", cpu="1"), None, False, id="unscheduled pod deleted"),
        pytest.param(pod("o", cpu="1", nominated="n"), None, True, id="nominated pod deleted"),
        pytest.param(None, None, True, id="unknown freed pod"),
        pytest.param(
            pod("o", node_name="n", cpu="2"), pod("o", node_name="n", cpu="1"), True, id="scaled"
        ),
        pytest.param(pod("o", cpu="2"), pod("o", cpu="1"), False, id="unscheduled scaled"),
        pytest.param(pod("p", cpu="2"), pod("p", cpu="1"), True, id="the pod itself scaled"),
    ],
)
def test_noderesourcesfit_pod_hint(
    old: dict[str, Any] | None, new: dict[str, Any] | None, queue: bool
) -> None:
    fn = hint("NodeResourcesFit", ClusterEvent("AssignedPod", "Delete"))
    assert fn(pi(pod("p", cpu="2")), pi(old), pi(new)) is queue


@pytest.mark.parametrize(
    ("old", "new", "queue"),
    [
        pytest.param(None, node(labels={"disk": "ssd"}), True, id="matching node added"),
        pytest.param(None, node(), False, id="other node added"),
        pytest.param(node(), node(labels={"disk": "ssd"}), True, id="came to match"),
        pytest.param(node(labels={"disk": "ssd"}), node(labels={"disk": "ssd", "a": "b"}), False),
    ],
)
def test_nodeaffinity_hint(old: dict[str, Any] | None, new: dict[str, Any], queue: bool) -> None:
    fn = hint("NodeAffinity", NODE_ADD)
    assert fn(pi(pod(node_selector={"disk": "ssd"})), ni(old), ni(new)) is queue


@pytest.mark.parametrize(
    ("tolerations", "old", "new", "queue"),
    [
        ([], None, node(), True),
        ([], None, node(taints=[NOSCHEDULE]), False),
        ([TOLERATE], None, node(taints=[NOSCHEDULE]), True),
        ([], node(taints=[NOSCHEDULE]), node(), True),
        ([], node(), node(taints=[{"key": "x", "effect": "PreferNoSchedule"}]), False),
    ],
)
def test_tainttoleration_node_hint(
    tolerations: list[dict[str, str]],
    old: dict[str, Any] | None,
    new: dict[str, Any],
    queue: bool,
) -> None:
    fn = hint("TaintToleration", ClusterEvent("Node", "UpdateNodeTaint"))
    assert fn(pi(pod(tolerations=tolerations)), ni(old), ni(new)) is queue


def test_toleration_hints_concern_only_the_pod_itself() -> None:
    target = pi(pod("p"))
    mine = pi(
        pod("p", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    )
    other = pi(pod("q", tolerations=[TOLERATE]))
    event = ClusterEvent("UnschedulablePod", "UpdatePodToleration")
    assert hint("TaintToleration", event)(target, target, mine) is True
    assert hint("TaintToleration", event)(target, target, other) is False
    assert hint("NodeUnschedulable", event)(target, target, mine) is True
    assert (
        hint("NodeUnschedulable", event)(target, target, pi(pod("p", tolerations=[TOLERATE])))
        is False
    )


@pytest.mark.parametrize(
    ("old", "new", "queue"),
    [
        (None, node(), True),
        (None, node(unschedulable=True), False),
        (node(unschedulable=True), node(), True),
        (node(), node(labels={"a": "b"}), False),
    ],
)
def test_nodeunschedulable_node_hint(
    old: dict[str, Any] | None, new: dict[str, Any], queue: bool
) -> None:
    fn = hint("NodeUnschedulable", NODE_ADD)
    assert fn(pi(pod()), ni(old), ni(new)) is queue


@pytest.mark.parametrize(
    ("deleted", "queue"),
    [
        (pod("o", node_name="n", host_port=8080), True),
        (pod("o", node_name="n", host_port=9090), False),
        (pod("o", host_port=8080), False),  # was never placed
        (pod("o", node_name="n"), False),
    ],
)
def test_nodeports_hint(deleted: dict[str, Any], queue: bool) -> None:
    fn = hint("NodePorts", ClusterEvent("AssignedPod", "Delete"))
    assert fn(pi(pod(host_port=8080)), pi(deleted), None) is queue


def test_schedulinggates_hint() -> None:
    fn = hint(
        "SchedulingGates", ClusterEvent("UnschedulablePod", "UpdatePodSchedulingGatesEliminated")
    )
    target = pi(pod("p", gates=["g"]))
    assert fn(target, target, pi(pod("p"))) is True
    assert fn(target, pi(pod("q", gates=["g"])), pi(pod("q"))) is False


AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
        ]
    }
}
ANTI_AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
        ]
    }
}


@pytest.mark.parametrize(
    ("affinity", "old", "new", "queue"),
    [
        pytest.param(
            AFFINITY, None, pod("o", node_name="n", labels={"app": "db"}), True, id="match added"
        ),
        pytest.param(
            AFFINITY, None, pod("o", node_name="n", labels={"app": "x"}), False, id="no match"
        ),
        pytest.param(AFFINITY, None, pod("o", labels={"app": "db"}), False, id="unscheduled"),
        pytest.param(
            AFFINITY,
            None,
            pod("o", node_name="n", ns="other", labels={"app": "db"}),
            False,
            id="ns",
        ),
        pytest.param(
            AFFINITY,
            pod("o", node_name="n", labels={"app": "x"}),
            pod("o", node_name="n", labels={"app": "db"}),
            True,
            id="relabelled to match",
        ),
        pytest.param(
            ANTI_AFFINITY,
            pod("o", node_name="n", labels={"app": "web"}),
            None,
            True,
            id="blocker gone",
        ),
        pytest.param(ANTI_AFFINITY, pod("o", node_name="n"), None, False, id="other pod gone"),
        pytest.param(
            ANTI_AFFINITY,
            None,
            pod("o", node_name="n", labels={"app": "web"}),
            False,
            id="anti add",
        ),
    ],
)
def test_interpodaffinity_pod_hint(
    affinity: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any] | None, queue: bool
) -> None:
    fn = hint("InterPodAffinity", ClusterEvent("AssignedPod", "Add"))
    assert fn(pi(pod(affinity=affinity)), pi(old), pi(new)) is queue


def test_interpodaffinity_node_hint_needs_the_topology_key() -> None:
    fn = hint("InterPodAffinity", NODE_ADD)
    target = pi(pod(affinity=AFFINITY))
    assert fn(target, None, ni(node(labels={"zone": "a"}))) is True
    assert fn(target, None, ni(node())) is False
    assert fn(pi(pod()), None, ni(node(labels={"zone": "a"}))) is False  # no terms at all


SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
]


@pytest.mark.parametrize(
    ("old", "new", "queue"),
    [
        pytest.param(None, pod("o", node_name="n", labels={"app": "web"}), True, id="match added"),
        pytest.param(None, pod("o", node_name="n"), False, id="other added"),
        pytest.param(
            pod("o", node_name="n", labels={"app": "web"}), None, True, id="match deleted"
        ),
        pytest.param(None, pod("o", node_name="n", ns="x", labels={"app": "web"}), False, id="ns"),
        pytest.param(
            pod("o", node_name="n"),
            pod("o", node_name="n", labels={"app": "web"}),
            True,
            id="relabelled into the selector",
        ),
        pytest.param(
            pod("o", node_name="n", labels={"app": "web"}),
            pod("o", node_name="n", labels={"app": "web", "v": "2"}),
            False,
            id="relabelled, selector unaffected",
        ),
    ],
)
def test_podtopologyspread_pod_hint(
    old: dict[str, Any] | None, new: dict[str, Any] | None, queue: bool
) -> None:
    fn = hint("PodTopologySpread", ClusterEvent("AssignedPod", "Add"))
    assert fn(pi(pod(labels={"app": "web"}, spread=SPREAD)), pi(old), pi(new)) is queue


@pytest.mark.parametrize(
    ("old", "new", "queue"),
    [
        pytest.param(None, node(labels={"zone": "a"}), True, id="domain node added"),
        pytest.param(None, node(), False, id="node without the key"),
        pytest.param(node(labels={"zone": "a"}), None, True, id="domain node deleted"),
        pytest.param(node(), node(labels={"zone": "a"}), True, id="gained the key"),
        pytest.param(node(labels={"zone": "a"}), node(labels={"zone": "b"}), True, id="moved"),
        pytest.param(
            node(labels={"zone": "a"}), node(labels={"zone": "a", "x": "y"}), False, id="other"
        ),
        pytest.param(
            node(labels={"zone": "a"}),
            node(labels={"zone": "a"}, taints=[NOSCHEDULE]),
            True,
            id="tainted",
        ),
    ],
)
def test_podtopologyspread_node_hint(
    old: dict[str, Any] | None, new: dict[str, Any] | None, queue: bool
) -> None:
    fn = hint("PodTopologySpread", NODE_ADD)
    assert fn(pi(pod(labels={"app": "web"}, spread=SPREAD)), ni(old), ni(new)) is queue
