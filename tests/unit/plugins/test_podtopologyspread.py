"""PodTopologySpread behaviour the vectors leave out: args, Service defaults, AddPod/RemovePod."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.config import ConfigError
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.interface import ClusterEvent, NodeScore
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.podtopologyspread.filtering import CriticalPaths
from shared.plugins.podtopologyspread.plugin import PodTopologySpread, new
from shared.tools.synthetic import make_node, make_pod
from tests.builders import cluster_objects

ZONE = "topology.kubernetes.io/zone"
WEB = {"app": "web"}


def node(name: str, zone: str) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node(make_node(name, zone=zone))
    return info


def web_pod(name: str, namespace: str = "default") -> PodInfo:
    return PodInfo.of(make_pod(name, labels=WEB, namespace=namespace))


def spread_pod(name: str, max_skew: int = 1) -> PodInfo:
    pod = make_pod(name, labels=WEB)
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": max_skew,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": WEB},
        }
    ]
    return PodInfo.of(pod)


def constraint(**overrides: Any) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", **overrides}


def service(namespace: str, selector: dict[str, str] | None) -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    return {"kind": "Service", "metadata": {"name": "svc", "namespace": namespace}, "spec": spec}


@pytest.mark.parametrize(
    ("args", "field", "message"),
    [
        ({"defaultingType": "Sometimes"}, "defaultingType", "Unsupported value"),
        ({"defaultConstraints": [constraint()]}, "defaultingType", "defaultConstraints are not"),
        (
            {"defaultingType": "List", "defaultConstraints": [constraint(maxSkew=0)]},
            "defaultConstraints[0].maxSkew",
            "not in valid range (0, inf)",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [constraint(topologyKey="")]},
            "defaultConstraints[0].topologyKey",
            "can not be empty",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [constraint(topologyKey="a b")]},
            "defaultConstraints[0].topologyKey",
            "Invalid value",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [constraint(whenUnsatisfiable="X")]},
            "defaultConstraints[0].whenUnsatisfiable",
            "Unsupported value",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [constraint(labelSelector={})]},
            "defaultConstraints[0].labelSelector",
            "must not define a selector",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [constraint(), constraint(maxSkew=2)],
            },
            "defaultConstraints[1]",
            "Duplicate value",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [constraint(bogus=1)]},
            "defaultConstraints[0].bogus",
            "unknown field",
        ),
        ({"extra": 1}, "extra", "unknown field"),
    ],
)
def test_bad_args_name_the_field(args: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(
        ConfigError, match=r"args\." + re.escape(field) + ": .*" + re.escape(message)
    ):
        new(args, Handle())


@pytest.mark.parametrize(
    ("args", "system", "keys"),
    [
        ({}, True, ["kubernetes.io/hostname", ZONE]),
        ({"defaultingType": "System"}, True, ["kubernetes.io/hostname", ZONE]),
        ({"defaultingType": "List"}, False, []),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    constraint(),
                    constraint(whenUnsatisfiable="ScheduleAnyway"),
                ],
            },
            False,
            [ZONE, ZONE],
        ),
    ],
)
def test_defaulting(args: dict[str, Any], system: bool, keys: list[str]) -> None:
    plugin = new(args, Handle())
    assert isinstance(plugin, PodTopologySpread)
    assert plugin.system_defaulted is system
    assert [c.topology_key for c in plugin.defaults] == keys


def test_critical_paths_keep_the_global_minimum() -> None:
    paths = CriticalPaths()
    for value, num in {"a": 3, "b": 1, "c": 2}.items():
        paths.update(value, num)
    assert (paths.values, paths.nums) == (["b", "c"], [1, 2])
    paths.update("b", 4)  # the minimum domain grows past the second one
    assert (paths.values[0], paths.nums[0]) == ("c", 2)
    paths.update("a", 0)
    assert (paths.values[0], paths.nums[0]) == ("a", 0)


def test_skew_blocks_the_crowded_zone_and_add_remove_pod_update_counts() -> None:
    a, b = node("a", "zone-a"), node("b", "zone-b")
    a.add_pod(web_pod("x"))
    snapshot = ClusterSnapshot([a, b])
    plugin = new({}, Handle(snapshot=snapshot))
    pod = spread_pod("p")
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, snapshot.nodes)
    assert status.ok
    assert plugin.filter(state, pod, a).code == Code.UNSCHEDULABLE
    assert plugin.filter(state, pod, b).ok
    # a web pod in another namespace does not count
    plugin.add_pod(state, pod, web_pod("other", namespace="other"), b)
    assert plugin.filter(state, pod, a).code == Code.UNSCHEDULABLE
    # a nominated web pod on b evens the zones: a becomes possible
    plugin.add_pod(state, pod, web_pod("y"), b)
    assert plugin.filter(state, pod, a).ok
    # a victim removed from a makes a the emptier zone; b is now the crowded one
    plugin.remove_pod(state, pod, web_pod("x"), a)
    assert plugin.filter(state, pod, b).code == Code.UNSCHEDULABLE


def test_filter_rejects_node_without_topology_key_as_unresolvable() -> None:
    a = node("a", "zone-a")
    bare = NodeInfo("bare")
    bare.set_node({"metadata": {"name": "bare", "labels": {}}})
    snapshot = ClusterSnapshot([a, bare])
    plugin = new({}, Handle(snapshot=snapshot))
    pod = spread_pod("p")
    state = CycleState()
    plugin.pre_filter(state, pod, snapshot.nodes)
    status = plugin.filter(state, pod, bare)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == [
        "node(s) didn't match pod topology spread constraints (missing required label)"
    ]


def _normalized(plugin: PodTopologySpread, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
    state = CycleState()
    assert plugin.pre_score(state, pod, nodes).ok
    scores = [NodeScore(n.name, plugin.score(state, pod, n)[0]) for n in nodes]
    assert plugin.normalize_score(state, pod, scores).ok
    return [s.score for s in scores]


def test_system_defaults_use_the_selector_of_services_selecting_the_pod() -> None:
    a, b = node("a", "zone-a"), node("b", "zone-b")
    for i in range(3):
        a.add_pod(web_pod(f"x{i}"))
    objects = cluster_objects(service("default", WEB))
    snapshot = ClusterSnapshot([a, b], objects)
    plugin = new({}, Handle(snapshot=snapshot))
    score_a, score_b = _normalized(plugin, web_pod("p"), snapshot.nodes)
    assert score_b > score_a  # the emptier zone and host score higher
    lone = PodInfo.of(make_pod("q", labels={"app": "other"}))
    assert plugin.pre_score(CycleState(), lone, snapshot.nodes).code == Code.SKIP


@pytest.mark.parametrize(
    "services",
    [
        [],
        [service("other", WEB)],  # another namespace
        [service("default", None)],  # a nil selector selects nothing
        [service("default", {})],  # an empty selector selects the pod but adds no label
    ],
)
def test_no_default_constraints_without_a_service_selector(services: list[dict[str, Any]]) -> None:
    snapshot = ClusterSnapshot([node("a", "zone-a")], cluster_objects(*services))
    plugin = new({}, Handle(snapshot=snapshot))
    assert plugin.pre_score(CycleState(), web_pod("p"), snapshot.nodes).code == Code.SKIP
    _, status = plugin.pre_filter(CycleState(), web_pod("p"), snapshot.nodes)
    assert status.code == Code.SKIP


def test_list_defaulting_applies_do_not_schedule_defaults_with_the_service_selector() -> None:
    a, b = node("a", "zone-a"), node("b", "zone-b")
    a.add_pod(web_pod("x"))
    snapshot = ClusterSnapshot([a, b], cluster_objects(service("default", WEB)))
    plugin = new(
        {"defaultingType": "List", "defaultConstraints": [constraint()]}, Handle(snapshot=snapshot)
    )
    pod = web_pod("p")
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, snapshot.nodes)
    assert status.ok
    assert plugin.filter(state, pod, a).code == Code.UNSCHEDULABLE
    assert plugin.filter(state, pod, b).ok


def test_match_label_keys_conflicting_with_the_selector_match_nothing() -> None:
    a, b = node("a", "zone-a"), node("b", "zone-b")
    a.add_pod(web_pod("x"))
    a.add_pod(web_pod("y"))
    for name in ("u", "v"):
        b.add_pod(PodInfo.of(make_pod(name, labels={"app": "api"})))
    raw = make_pod("p", labels={"app": "api"})
    raw["spec"]["topologySpreadConstraints"] = [
        constraint(labelSelector={"matchLabels": WEB}, matchLabelKeys=["app"])
    ]
    pod = PodInfo.of(raw)
    snapshot = ClusterSnapshot([a, b])
    plugin = new({}, Handle(snapshot=snapshot))
    state = CycleState()
    plugin.pre_filter(state, pod, snapshot.nodes)
    # app=web AND app=api: no pod counts (ignoring matchLabelKeys would reject a,
    # letting app=api replace the selector would reject b)
    assert plugin.filter(state, pod, a).ok
    assert plugin.filter(state, pod, b).ok


def test_score_without_pre_score_state_is_an_error() -> None:
    plugin = new({}, Handle(ClusterSnapshot([node("a", "zone-a")])))
    _, status = plugin.score(CycleState(), web_pod("p"), node("a", "zone-a"))
    assert status.code == Code.ERROR


def test_events_include_node_taint_and_pod_toleration_updates() -> None:
    events = {e.event for e in new({}, Handle()).events_to_register()}
    assert ClusterEvent("Node", "UpdateNodeTaint") in events
    assert ClusterEvent("Pod", "UpdatePodToleration") in events
    assert ClusterEvent("Node", "Delete") in events
