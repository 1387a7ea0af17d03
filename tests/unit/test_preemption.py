"""DefaultPreemption and its evaluator, table-driven (kube's default_preemption_test as
the model): PostFilter outcomes and messages, victim selection, PDBs, the node choice,
candidate sampling, and the FailedScheduling message with its preemption part."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from shared.api.pdb import PodDisruptionBudget
from shared.config import ConfigError, Profile
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import FitError
from shared.framework.interface import PostFilterResult
from shared.framework.preemption import (
    AllowedDisruptions,
    Budget,
    Candidate,
    Victims,
    pick_one_node_for_preemption,
)
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code, Status
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY
from shared.plugins.defaultpreemption import (
    DefaultPreemption,
    DefaultPreemptionArgs,
    filter_pods_with_pdb_violation,
    parse_args,
)
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod

LOW, MID, HIGH, VERY_HIGH = 0, 100, 1000, 10000
ONE_POD = {"pods": 1}
SMALL_NODE = {"cpu": "200m", "memory": "400"}


def pod(name: str, priority: int = LOW, node: str = "") -> PodBuilder:
    b = make_pod(name).priority(priority).req(cpu="100m", memory="100")
    return b.node(node) if node else b


def nodes(*names: str, **capacity: Any) -> list[NodeBuilder]:
    return [make_node(n).capacity(**capacity) for n in names]


def snapshot(node_list: list[NodeBuilder], pods: list[PodBuilder]) -> ClusterSnapshot:
    infos = {}
    for b in node_list:
        info = b.info()
        infos[info.name] = info
    for version, p in enumerate(pods, start=1):
        info = p.info(version)
        infos[info.pod.spec.node_name].add_pod(info)
    return ClusterSnapshot(infos.values())


def pdb(name: str, key: str, value: str, **spec: Any) -> PodDisruptionBudget:
    status = {}
    if "allowed" in spec:
        status["disruptionsAllowed"] = spec.pop("allowed")
    return PodDisruptionBudget.model_validate(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {key: value}}, **spec},
            "status": status,
        }
    )


def setup(
    snap: ClusterSnapshot,
    pdbs: list[PodDisruptionBudget] | None = None,
    args: dict[str, Any] | None = None,
) -> tuple[Scheduler, DefaultPreemption]:
    profile = Profile.model_validate(
        {"pluginConfig": [{"name": "DefaultPreemption", "args": args}]} if args else {}
    )
    fw = Framework.from_profile(profile, REGISTRY)
    fw.set_snapshot(snap)
    fw.handle.providers.pdbs = list(pdbs or [])
    plugin = fw.post_filters[0]
    assert isinstance(plugin, DefaultPreemption)
    plugin.rng = random.Random(0)
    return Scheduler(fw, rng=random.Random(1)), plugin


def schedule_and_preempt(
    preemptor: PodBuilder, snap: ClusterSnapshot, **kw: Any
) -> tuple[PostFilterResult | None, FitError]:
    """The worker's path: schedulePod fails with a FitError, PostFilter runs on it."""
    scheduler, _ = setup(snap, **kw)
    state, info = CycleState(), preemptor.info()
    with pytest.raises(FitError) as caught:
        scheduler.schedule_pod(state, info, snap)
    return scheduler.run_post_filter(state, info, caught.value), caught.value


# --- PostFilter, as kube's TestPostFilter -------------------------------------------


@dataclass
class PostFilterCase:
    name: str
    preemptor: PodBuilder
    pods: list[PodBuilder]
    nodes: list[NodeBuilder]
    statuses: dict[str, Code]  # the Filter statuses PostFilter gets
    want_node: str | None  # None: no result (nomination unchanged)
    want_message: str = ""
    want_victims: list[str] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)


U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE

POST_FILTER_CASES = [
    PostFilterCase(
        "pod with higher priority can be made schedulable",
        pod("p", HIGH),
        [pod("p1", LOW, "node1")],
        nodes("node1", **ONE_POD),
        {"node1": U},
        "node1",
        want_victims=["p1"],
    ),
    PostFilterCase(
        "pod with tied priority is still unschedulable",
        pod("p", LOW),
        [pod("p1", LOW, "node1")],
        nodes("node1", **ONE_POD),
        {"node1": U},
        "",
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
    ),
    PostFilterCase(
        "preemption respects the Filter statuses",
        pod("p", HIGH),
        [pod("p1", LOW, "node1")],
        nodes("node1", **ONE_POD),
        {"node1": UU},
        "",
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    ),
    PostFilterCase(
        "a node absent from the statuses counts as unresolvable",
        pod("p", HIGH),
        [pod("p1", LOW, "node1")],
        nodes("node1", **ONE_POD),
        {},
        "",
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    ),
    PostFilterCase(
        "pod can be made schedulable on one node",
        pod("p", MID),
        [pod("p1", HIGH, "node1"), pod("p2", LOW, "node2")],
        nodes("node1", "node2", **ONE_POD),
        {"node1": U, "node2": U},
        "node2",
        want_victims=["p2"],
    ),
    PostFilterCase(
        "pod can be made schedulable on minHighestPriority node",
        pod("p", VERY_HIGH),
        [
            pod("p1", HIGH, "node1").label("pdb", "non-violating"),
            pod("p2", LOW, "node1").label("pdb", "violating"),
            pod("p3", MID, "node2").label("pdb", "violating"),
        ],
        nodes("node1", "node2", pods=1),
        {"node1": U, "node2": U},
        "node2",
        want_victims=["p3"],
        pdbs=[
            pdb("violating-pdb", "pdb", "violating", minAvailable="100%"),
            pdb("non-violating-pdb", "pdb", "non-violating", minAvailable=0, allowed=2**31 - 1),
        ],
    ),
    PostFilterCase(
        "no candidate: not enough cpu even without the lower-priority pods",
        pod("p", HIGH).req(cpu="300m", memory="300"),
        [pod("p1", LOW, "node1"), pod("p2", LOW, "node2")],
        nodes("node1", "node2", **SMALL_NODE),
        {"node1": U, "node2": U},
        "",
        "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
    ),
    PostFilterCase(
        "no candidate, mixed reasons: no lower-priority pod, not enough cpu",
        pod("p", HIGH).req(cpu="300m", memory="300"),
        [pod("p1", HIGH, "node1"), pod("p2", LOW, "node2"), pod("p3", HIGH, "node3")],
        [*nodes("node1", **ONE_POD), *nodes("node2", **SMALL_NODE), *nodes("node3", **ONE_POD)],
        {"node1": U, "node2": U, "node3": U},
        "",
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, "
        "2 No preemption victims found for incoming pod.",
    ),
    PostFilterCase(
        "no candidate, mixed reasons: 2 unresolvable nodes, 2 without enough cpu",
        pod("p", HIGH).req(cpu="300m", memory="300"),
        [pod("p1", LOW, "node1"), pod("p2", LOW, "node2")],
        nodes("node1", "node2", "node3", "node4", **SMALL_NODE),
        {"node1": U, "node2": U, "node4": UU},
        "",
        "preemption: 0/4 nodes are available: 2 Insufficient cpu, "
        "2 Preemption is not helpful for scheduling.",
    ),
    PostFilterCase(
        "preemptionPolicy Never: not eligible, the nomination stays",
        pod("p", HIGH).preempt_never(),
        [pod("p1", LOW, "node1")],
        nodes("node1", **ONE_POD),
        {"node1": U},
        None,
        "preemption: not eligible due to preemptionPolicy=Never.",
    ),
]


DRY_RUNS = pytest.mark.parametrize("by_arithmetic", [True, False], ids=["fast", "general"])


@DRY_RUNS
@pytest.mark.parametrize("case", POST_FILTER_CASES, ids=lambda c: c.name)
def test_post_filter(case: PostFilterCase, by_arithmetic: bool) -> None:
    snap = snapshot(case.nodes, case.pods)
    scheduler, plugin = setup(snap, case.pdbs)
    plugin.resource_dry_run = by_arithmetic
    state, info = CycleState(), case.preemptor.info()
    scheduler.fw.run_pre_filter_plugins(state, info, snap.nodes)
    statuses = {n: Status(code) for n, code in case.statuses.items()}

    result, status = scheduler.fw.run_post_filter_plugins(state, info, statuses)

    assert status.message() == case.want_message
    assert status.code == (Code.SUCCESS if case.want_victims else Code.UNSCHEDULABLE)
    if case.want_node is None:
        assert result is None
    else:
        assert result is not None
        assert result.nominated_node_name == case.want_node
        assert [v.pod.metadata.name for v in result.victims] == case.want_victims


# --- victims on one node ------------------------------------------------------------


@dataclass
class VictimsCase:
    name: str
    preemptor: PodBuilder
    pods: list[PodBuilder]  # all on node1
    capacity: dict[str, Any]
    want_victims: list[str]
    want_violations: int = 0
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)


CPU_500M = {"cpu": "500m", "memory": "4Gi"}

VICTIMS_CASES = [
    VictimsCase(
        "the lowest priority pod goes, higher ones are reprieved first",
        pod("p", HIGH).req(cpu="200m"),
        [
            p.req(cpu="150m")
            for p in (pod("a", MID, "node1"), pod("b", LOW, "node1"), pod("c", 50, "node1"))
        ],
        {"cpu": "500m", "memory": "4Gi"},
        ["b"],
    ),
    VictimsCase(
        "as many as needed, most important first in the result",
        pod("p", HIGH).req(cpu="400m"),
        [
            p.req(cpu="150m")
            for p in (pod("a", MID, "node1"), pod("b", LOW, "node1"), pod("c", 50, "node1"))
        ],
        {"cpu": "500m", "memory": "4Gi"},
        ["a", "c", "b"],
    ),
    VictimsCase(
        "pods of equal or higher priority are never victims",
        pod("p", MID).req(cpu="300m"),
        [pod("a", MID, "node1"), pod("b", HIGH, "node1"), pod("c", LOW, "node1")],
        CPU_500M,
        ["c"],
    ),
    VictimsCase(
        "equal priority: the pod that started later goes",
        pod("p", HIGH).req(cpu="200m"),
        [
            pod("early", LOW, "node1").start_time("2024-01-01T00:00:00Z"),
            pod("late", LOW, "node1").start_time("2024-01-02T00:00:00Z"),
        ],
        {"cpu": "300m", "memory": "4Gi"},
        ["late"],
    ),
    VictimsCase(
        "a PDB-covered pod is reprieved before others (it would violate its budget)",
        pod("p", HIGH).req(cpu="200m"),
        [pod("guarded", LOW, "node1").label("app", "db"), pod("free", MID, "node1")],
        {"cpu": "300m", "memory": "4Gi"},
        ["free"],
        pdbs=[pdb("db", "app", "db", minAvailable=1)],
    ),
    VictimsCase(
        "a violating victim is counted when nothing else makes room",
        pod("p", HIGH).req(cpu="300m"),
        [pod("guarded", LOW, "node1").label("app", "db"), pod("free", MID, "node1")],
        {"cpu": "300m", "memory": "4Gi"},
        ["free", "guarded"],
        want_violations=1,
        pdbs=[pdb("db", "app", "db", allowed=0)],
    ),
    VictimsCase(
        "a budget with room left does not protect",
        pod("p", HIGH).req(cpu="200m"),
        [pod("guarded", LOW, "node1").label("app", "db"), pod("free", MID, "node1")],
        {"cpu": "300m", "memory": "4Gi"},
        ["guarded"],
        pdbs=[pdb("db", "app", "db", allowed=1)],
    ),
]


@DRY_RUNS
@pytest.mark.parametrize("case", VICTIMS_CASES, ids=lambda c: c.name)
def test_select_victims_on_node(case: VictimsCase, by_arithmetic: bool) -> None:
    snap = snapshot(nodes("node1", **case.capacity), case.pods)
    scheduler, plugin = setup(snap, case.pdbs)
    plugin.resource_dry_run = by_arithmetic
    state, info = CycleState(), case.preemptor.info()
    scheduler.fw.run_pre_filter_plugins(state, info, snap.nodes)
    victims, violations, status = plugin.select_victims_on_node(
        state, info, snap.nodes[0], plugin.evaluator.budgets()
    )

    assert status.ok, status
    assert [v.pod.metadata.name for v in victims] == case.want_victims
    assert violations == case.want_violations
    assert set(snap.nodes[0].pods) == {f"default/{p.obj()['metadata']['name']}" for p in case.pods}


def test_pdb_violation_split_keeps_order_and_spends_the_budget() -> None:
    infos = [make_pod(n).label("app", "db").info() for n in ("a", "b", "c")]
    budget = Budget(pdb("db", "app", "db"), allowed=1)
    violating, non_violating = filter_pods_with_pdb_violation(infos, [budget])
    assert [p.pod.metadata.name for p in non_violating] == ["a"]
    assert [p.pod.metadata.name for p in violating] == ["b", "c"]


def test_derived_budgets_are_counted_again_only_when_pods_or_budgets_change() -> None:
    snap = snapshot(
        nodes("node1"), [pod(f"db{i}", LOW, "node1").label("app", "db") for i in (1, 2)]
    )
    pdbs = [pdb("db", "app", "db", minAvailable=1)]
    allowed = AllowedDisruptions()
    first = allowed.of(snap, pdbs)
    assert first == [1]
    assert allowed.of(snap, pdbs) is first  # nothing changed: not counted again

    snap.add_pod(pod("db3", LOW, "node1").label("app", "db").info(), "node1")
    assert allowed.of(snap, pdbs) == [2]
    pdbs[:] = [pdb("db", "app", "db", maxUnavailable=0)]
    assert allowed.of(snap, pdbs) == [0]
    assert allowed.of(snapshot(nodes("node1"), []), pdbs) == [0]


@pytest.mark.parametrize(
    ("spec", "placed", "want"),
    [
        ({"minAvailable": 2}, 3, 1),
        ({"minAvailable": "50%"}, 3, 1),  # ceil(1.5) = 2 must stay
        ({"maxUnavailable": 1}, 3, 1),
        ({"maxUnavailable": "50%"}, 3, 2),
        ({}, 3, 2),  # policy/v1: minAvailable 1 by default
        ({"minAvailable": 5}, 3, 0),
    ],
)
def test_disruptions_allowed_without_status(spec: dict[str, Any], placed: int, want: int) -> None:
    budget = pdb("db", "app", "db", **spec)
    pods = [make_pod(f"p{i}").label("app", "db").info().pod for i in range(placed)]
    assert budget.disruptions_allowed([*pods, make_pod("other").info().pod]) == want


# --- choosing the node: pickOneNodeForPreemption ------------------------------------


def victim(name: str, priority: int, start: str = "") -> PodInfo:
    b = make_pod(name).priority(priority)
    return (b.start_time(start) if start else b).info()


@pytest.mark.parametrize(
    ("name", "candidates", "want"),
    [
        (
            "fewest PDB violations",
            [
                Candidate("n1", Victims([victim("a", LOW)], 1)),
                Candidate("n2", Victims([victim("b", HIGH), victim("c", HIGH)], 0)),
            ],
            "n2",
        ),
        (
            "lowest highest-priority victim",
            [
                Candidate("n1", Victims([victim("a", MID)])),
                Candidate("n2", Victims([victim("b", LOW), victim("c", LOW)])),
            ],
            "n2",
        ),
        (
            "smallest sum of priorities (negative priorities shifted first)",
            [
                Candidate("n1", Victims([victim("a", -100), victim("b", -100)])),
                Candidate("n2", Victims([victim("c", -100)])),
            ],
            "n2",
        ),
        (
            "fewest victims",
            [
                Candidate("n1", Victims([victim("a", LOW), victim("b", LOW)])),
                Candidate("n2", Victims([victim("c", LOW), victim("d", LOW), victim("e", LOW)])),
                Candidate("n3", Victims([victim("f", LOW)])),
            ],
            "n3",
        ),
        (
            "latest start time of the highest-priority victims",
            [
                Candidate("n1", Victims([victim("a", LOW, "2024-01-01T00:00:00Z")])),
                Candidate("n2", Victims([victim("b", LOW, "2024-01-03T00:00:00Z")])),
                Candidate("n3", Victims([victim("c", LOW, "2024-01-02T00:00:00Z")])),
            ],
            "n2",
        ),
        (
            "all tied: the first",
            [
                Candidate("n1", Victims([victim("a", LOW)])),
                Candidate("n2", Victims([victim("b", LOW)])),
            ],
            "n1",
        ),
    ],
)
def test_pick_one_node_for_preemption(name: str, candidates: list[Candidate], want: str) -> None:
    assert pick_one_node_for_preemption(candidates) == want


# --- sampling -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pct", "absolute", "num_nodes", "want"),
    [(10, 100, 10, 10), (10, 100, 1000, 100), (20, 100, 1000, 200), (0, 5, 50, 5), (50, 0, 7, 3)],
)
def test_calculate_num_candidates(pct: int, absolute: int, num_nodes: int, want: int) -> None:
    plugin = DefaultPreemption(DefaultPreemptionArgs(pct, absolute), handle=None)  # type: ignore[arg-type]
    assert plugin.calculate_num_candidates(num_nodes) == want


def test_dry_run_stops_at_num_candidates_from_the_offset() -> None:
    names = [f"node{i}" for i in range(6)]
    pods = [pod(f"p{i}", LOW, n) for i, n in enumerate(names)]
    snap = snapshot(nodes(*names, **ONE_POD), pods)
    scheduler, plugin = setup(snap)
    state, info = CycleState(), pod("p", HIGH).info()
    scheduler.fw.run_pre_filter_plugins(state, info, snap.nodes)
    candidates, statuses, errors = plugin.evaluator.dry_run_preemption(
        state, info, snap.nodes, [], offset=4, num_candidates=3
    )
    assert [c.name for c in candidates] == ["node4", "node5", "node0"]
    assert statuses == {} and errors == []


def test_args_defaults_and_validation() -> None:
    assert parse_args({}) == DefaultPreemptionArgs(10, 100)
    assert parse_args({"minCandidateNodesAbsolute": 5}) == DefaultPreemptionArgs(10, 5)
    for bad in (
        {"minCandidateNodesPercentage": 101},
        {"minCandidateNodesAbsolute": -1},
        {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
        {"minCandidateNodesPercentage": "10"},
        {"unknown": 1},
    ):
        with pytest.raises(ConfigError):
            parse_args(bad)


def test_plugin_config_args_reach_the_plugin() -> None:
    _, plugin = setup(snapshot([], []), args={"minCandidateNodesAbsolute": 3})
    assert plugin.args == DefaultPreemptionArgs(10, 3)


# --- through schedulePod: the message and the nomination ------------------------------


def test_full_cluster_preemptor_gets_a_node_and_the_minimum_victims() -> None:
    snap = snapshot(
        nodes("node1", "node2", cpu="1", memory="4Gi"),
        [pod(f"a{i}", LOW, "node1").req(cpu="250m") for i in range(4)]
        + [pod(f"b{i}", LOW, "node2").req(cpu="500m") for i in range(2)],
    )
    result, err = schedule_and_preempt(pod("p", HIGH).req(cpu="500m"), snap)
    assert result is not None
    # Both nodes need 500m freed: one victim on node2 beats two on node1.
    assert result.nominated_node_name == "node2"
    assert len(result.victims) == 1
    assert err.message() == "0/2 nodes are available: 2 Insufficient cpu."


def test_failed_preemption_extends_the_failed_scheduling_message() -> None:
    snap = snapshot(
        nodes("node1", "node2", "node3", cpu="1", memory="4Gi"),
        [pod(f"x{i}", LOW, f"node{i + 1}").req(cpu="1") for i in range(3)],
    )
    result, err = schedule_and_preempt(pod("p", LOW).req(cpu="500m"), snap)
    assert result is not None and result.nominated_node_name == ""
    assert err.message() == (
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
        "3 No preemption victims found for incoming pod."
    )


def test_nominated_pods_of_higher_priority_keep_their_room() -> None:
    # node1 has room for one more pod, reserved for a nominated HIGH pod: a MID pod
    # neither takes it nor preempts there without counting the nominated pod.
    snap = snapshot(nodes("node1", cpu="1", memory="4Gi"), [pod("a", LOW, "node1").req(cpu="500m")])
    scheduler, _ = setup(snap)
    reserved = pod("r", HIGH).req(cpu="500m").nominated("node1").info()
    scheduler.fw.handle.providers.nominated = {"node1": [reserved]}
    state, info = CycleState(), pod("m", MID).req(cpu="500m").info()
    with pytest.raises(FitError) as caught:
        scheduler.schedule_pod(state, info, snap)
    result = scheduler.run_post_filter(state, info, caught.value)
    assert result is not None and result.nominated_node_name == "node1"
    assert [v.pod.metadata.name for v in result.victims] == ["a"]


def test_a_preemptor_fits_its_nominated_node_first() -> None:
    snap = snapshot(nodes("node1", "node2", cpu="1", memory="4Gi"), [])
    scheduler, _ = setup(snap)
    info = pod("p", HIGH).nominated("node2").info()
    assert scheduler.schedule_pod(CycleState(), info, snap).suggested_host == "node2"


def test_lower_priority_nominations_on_the_chosen_node_are_to_be_cleared() -> None:
    snap = snapshot(nodes("node1", **ONE_POD), [pod("a", LOW, "node1")])
    scheduler, _ = setup(snap)
    lower = pod("l", LOW).nominated("node1").info()
    scheduler.fw.handle.providers.nominated = {"node1": [lower]}
    result, _ = schedule_and_preempt_with(scheduler, pod("p", HIGH), snap)
    assert result is not None and result.nominated_node_name == "node1"
    assert [p.pod.metadata.name for p in result.lower_nominated] == ["l"]


def test_waits_while_victims_of_its_earlier_preemption_are_terminating() -> None:
    snap = snapshot(nodes("node1", **ONE_POD), [pod("a", LOW, "node1")])
    scheduler, _ = setup(snap)
    scheduler.fw.handle.providers.terminating = {"default/a": "node1"}
    result, err = schedule_and_preempt_with(scheduler, pod("p", HIGH).nominated("node1"), snap)
    assert result is None  # keeps its nomination
    assert err.diagnosis.post_filter_msg == (
        "preemption: not eligible due to a terminating pod on the nominated node."
    )


def schedule_and_preempt_with(
    scheduler: Scheduler, preemptor: PodBuilder, snap: ClusterSnapshot
) -> tuple[PostFilterResult | None, FitError]:
    state, info = CycleState(), preemptor.info()
    with pytest.raises(FitError) as caught:
        scheduler.schedule_pod(state, info, snap)
    return scheduler.run_post_filter(state, info, caught.value), caught.value


def test_interpod_anti_affinity_is_right_in_the_dry_run() -> None:
    # The preemptor has anti-affinity to app=web: the dry run's RemovePod must update
    # InterPodAffinity's state, so that evicting the web pod is seen to make room.
    snap = snapshot(
        nodes("node1", "node2", cpu="4", memory="4Gi"),
        [pod("web", LOW, "node1").label("app", "web"), pod("busy", HIGH, "node2").req(cpu="4")],
    )
    result, _ = schedule_and_preempt(pod("p", MID).anti_affinity("app", "web"), snap)
    assert result is not None and result.nominated_node_name == "node1"
    assert [v.pod.metadata.name for v in result.victims] == ["web"]
