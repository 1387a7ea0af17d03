"""PodTopologySpread behaviour the vectors leave out: args, Service defaults, AddPod."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.cli.workload import make_node, make_pod
from shared.config import ConfigError
from shared.framework.cycle_state import CycleState
from shared.framework.interface import ClusterObjects
from shared.framework.snapshot import ClusterSnapshot, Handle
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.podtopologyspread import new


def node(name: str, zone: str) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node(make_node(name, zone=zone))
    return info


def spread_pod(name: str, max_skew: int = 1) -> dict[str, Any]:
    pod = make_pod(name, labels={"app": "web"})
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": max_skew,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    return pod


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"defaultingType": "Sometimes"}, "defaultingType"),
        (
            {
                "defaultingType": "System",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            "defaultConstraints",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            "defaultConstraints[0]",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {},
                    }
                ],
            },
            "defaultConstraints[0].labelSelector",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                ],
            },
            "defaultConstraints[1]",
        ),
        ({"extra": 1}, "extra"),
    ],
)
def test_bad_args_name_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=r"args\." + re.escape(field)):
        new(args, Handle())


def test_skew_blocks_the_crowded_zone_and_add_pod_updates_counts() -> None:
    a, b = node("a", "zone-a"), node("b", "zone-b")
    a.add_pod(PodInfo.of(make_pod("x", labels={"app": "web"})))
    snapshot = ClusterSnapshot([a, b])
    plugin = new({}, Handle(snapshot))
    pod = PodInfo.of(spread_pod("p"))
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, snapshot.nodes)
    assert status.ok
    assert plugin.filter(state, pod, a).code == Code.UNSCHEDULABLE
    assert plugin.filter(state, pod, b).ok
    # a nominated web pod on b evens the zones: a becomes possible
    plugin.add_pod(state, pod, PodInfo.of(make_pod("y", labels={"app": "web"})), b)
    assert plugin.filter(state, pod, a).ok


def test_system_defaults_use_the_selector_of_services_selecting_the_pod() -> None:
    a, b = node("a", "zone-a"), node("b", "zone-b")
    for i in range(3):
        a.add_pod(PodInfo.of(make_pod(f"x{i}", labels={"app": "web"})))
    service = {
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web"}},
    }
    snapshot = ClusterSnapshot([a, b], ClusterObjects(services=[service]))
    plugin = new({}, Handle(snapshot))
    pod = PodInfo.of(make_pod("p", labels={"app": "web"}))
    state = CycleState()
    assert plugin.pre_score(state, pod, snapshot.nodes).ok  # not skipped: a Service selects it
    from shared.framework.interface import NodeScore

    scores = [NodeScore(n.name, plugin.score(state, pod, n)[0]) for n in snapshot.nodes]
    plugin.normalize_score(state, pod, scores)
    assert scores[1].score > scores[0].score  # the emptier zone scores higher
    lone = PodInfo.of(make_pod("q", labels={"app": "other"}))
    assert plugin.pre_score(CycleState(), lone, snapshot.nodes).code == Code.SKIP
