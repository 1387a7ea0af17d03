"""schedulePod with the default profile: Filter, Score, selectHost, the FitError message."""

from __future__ import annotations

import random

import pytest

from shared.config import Profile, parse_config
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import FitError
from shared.framework.runtime import Framework, PluginScores, select_host
from shared.framework.schedule_one import Scheduler
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY
from shared.tools.synthetic import make_node, make_pod


def node(
    name: str, cpu: str = "2", memory: str = "4Gi", pods: int = 110, **labels: str
) -> NodeInfo:
    raw = make_node(name, cpu=cpu, memory=memory, pods=pods)
    raw["metadata"]["labels"].update(labels)
    info = NodeInfo(name)
    info.set_node(raw)
    return info


def schedule(pod: dict, nodes: list[NodeInfo], profile: Profile | None = None) -> str:
    scheduler = Scheduler(
        Framework.from_profile(profile or Profile(), REGISTRY), rng=random.Random(1)
    )
    return scheduler.schedule_pod(
        CycleState(), PodInfo.of(pod), ClusterSnapshot(nodes)
    ).suggested_host


def test_least_allocated_prefers_the_emptier_node() -> None:
    busy, idle = node("busy"), node("idle")
    busy.add_pod(PodInfo.of(make_pod("x", cpu="1500m", memory="1Gi")))
    assert schedule(make_pod("p"), [busy, idle]) == "idle"


def test_message_is_kube_schedulers_histogram_sorted_as_strings() -> None:
    small = node("small", cpu="1", memory="64Mi")
    full = node("full", pods=1)
    full.add_pod(PodInfo.of(make_pod("x", cpu="10m", memory="1Mi")))
    fine_but_cpu = node("c", cpu="1")
    with pytest.raises(FitError) as info:
        schedule(make_pod("p", cpu="1500m", memory="128Mi"), [small, full, fine_but_cpu])
    assert info.value.message() == (
        "0/3 nodes are available: 1 Insufficient memory, 1 Too many pods, 2 Insufficient cpu."
    )


def test_message_mixes_reasons_of_several_plugins() -> None:
    tainted = node("tainted")
    tainted.raw_node["spec"] = {
        "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    }  # type: ignore[index]
    tainted.set_node(tainted.raw_node)
    small = node("small", cpu="100m")
    with pytest.raises(FitError) as info:
        schedule(make_pod("p", cpu="500m"), [tainted, small])
    assert info.value.message() == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s)."
    )


def test_no_nodes() -> None:
    with pytest.raises(FitError) as info:
        schedule(make_pod("p"), [])
    assert info.value.message() == "no nodes available to schedule pods"


def test_node_selector_restricts_nodes() -> None:
    pod = make_pod("p")
    pod["spec"]["nodeSelector"] = {"disk": "ssd"}
    assert schedule(pod, [node("a"), node("b", disk="ssd"), node("c")]) == "b"


def test_config_weight_changes_the_choice() -> None:
    """Most-allocated packing (as a pluginConfig) flips the choice LeastAllocated makes."""
    busy, idle = node("busy"), node("idle")
    busy.add_pod(PodInfo.of(make_pod("x", cpu="1500m", memory="1Gi")))
    packing = parse_config(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {
                                "scoringStrategy": {
                                    "type": "MostAllocated",
                                    "resources": [
                                        {"name": "cpu", "weight": 1},
                                        {"name": "memory", "weight": 1},
                                    ],
                                }
                            },
                        }
                    ],
                    "plugins": {
                        "score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}
                    },
                }
            ]
        }
    ).profiles[0]
    assert schedule(make_pod("p"), [busy, idle]) == "idle"
    assert schedule(make_pod("p"), [busy, idle], packing) == "busy"


def test_select_host_breaks_ties_uniformly() -> None:
    rng = random.Random(3)
    scores = [PluginScores(f"n{i}", {}, s) for i, s in enumerate([5, 9, 9, 1])]
    picks = [select_host(scores, rng) for _ in range(2000)]
    assert set(picks) == {"n1", "n2"}
    assert 800 < picks.count("n1") < 1200


@pytest.mark.parametrize("batch", [True, False])
def test_nominated_pods_of_equal_or_higher_priority_hold_their_room(batch: bool) -> None:
    """RunFilterPluginsWithNominatedPods: a nominated pod of equal or higher priority
    counts on its node; a lower one, or the pod itself, does not."""

    def place(pod: dict, nominated: list[dict]) -> str:
        nodes = [node("a", cpu="2"), node("b", cpu="1")]
        fw = Framework.from_profile(Profile(), REGISTRY)
        fw.handle.nominated["a"] = [PodInfo.of(p) for p in nominated]
        scheduler = Scheduler(fw, rng=random.Random(1), batch=batch)
        return scheduler.schedule_pod(
            CycleState(), PodInfo.of(pod), ClusterSnapshot(nodes)
        ).suggested_host

    big = make_pod("big", cpu="1500m", memory="1Gi", priority=5)
    wanting = make_pod("p", cpu="1", memory="1Gi", priority=5)
    assert place(wanting, []) == "a"  # the emptier node, without nominations
    assert place(wanting, [big]) == "b"  # a's room is promised to `big`
    low = make_pod("low", cpu="1500m", memory="1Gi", priority=1)
    assert place(wanting, [low]) == "a"  # lower priority: does not hold room against p
    itself = make_pod("p", cpu="1500m", memory="1Gi", priority=5)
    assert place(wanting, [itself]) == "a"  # a pod's own nomination is not a rival


@pytest.mark.parametrize("batch", [True, False])
def test_nominated_pods_make_a_full_cluster_fail_with_the_usual_message(batch: bool) -> None:
    nodes = [node("a", cpu="1")]
    fw = Framework.from_profile(Profile(), REGISTRY)
    fw.handle.nominated["a"] = [PodInfo.of(make_pod("big", cpu="800m", priority=9))]
    scheduler = Scheduler(fw, rng=random.Random(1), batch=batch)
    with pytest.raises(FitError) as err:
        scheduler.schedule_pod(
            CycleState(), PodInfo.of(make_pod("p", cpu="500m")), ClusterSnapshot(nodes)
        )
    assert err.value.message() == "0/1 nodes are available: 1 Insufficient cpu."
