"""Preemption's dry run by arithmetic (shared/framework/resource_dry_run.py) gives what the
general dry run gives: the same victims, PDB violations and statuses per node, and the
same PostFilter outcome, on generated clusters; and it stands aside (the general path
runs) wherever more than resources could decide."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from shared.api.pdb import PodDisruptionBudget
from shared.config import Profile
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import FitError
from shared.framework.interface import FilterPlugin
from shared.framework.preemption import Budget
from shared.framework.resource_dry_run import ResourceDryRun
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY
from shared.plugins.defaultpreemption import DefaultPreemption
from tests.builders import ZONE, PodBuilder, make_node, make_pod

PRIORITIES = [0, 5, 10, 20]
STARTS = ["", "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", "2024-01-03T00:00:00Z"]
DEDICATED = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
Obj = dict[str, Any]


@dataclass
class Cluster:
    """Plain objects, so that every run builds fresh NodeInfos and PodInfos."""

    nodes: list[Obj]
    pods: list[Obj]  # placed: spec.nodeName set
    nominated: list[tuple[str, Obj]]  # (node, pending pod nominated there)
    pdbs: list[Obj]
    preemptor: Obj
    profile: Obj = field(default_factory=dict)

    def snapshot(self) -> ClusterSnapshot:
        infos: dict[str, NodeInfo] = {}
        for obj in self.nodes:
            info = infos[obj["metadata"]["name"]] = NodeInfo(obj["metadata"]["name"])
            info.set_node(obj)
        for version, obj in enumerate(self.pods, start=1):
            infos[obj["spec"]["nodeName"]].add_pod(PodInfo.of(obj, version))
        return ClusterSnapshot(infos.values())

    def framework(self, snap: ClusterSnapshot, registry: Any = None) -> Framework:
        fw = Framework.from_profile(Profile.model_validate(self.profile), registry or REGISTRY)
        fw.set_snapshot(snap)
        fw.handle.providers.pdbs = [PodDisruptionBudget.model_validate(p) for p in self.pdbs]
        nominated: dict[str, list[PodInfo]] = {}
        for node, obj in self.nominated:
            nominated.setdefault(node, []).append(PodInfo.of(obj))
        fw.handle.providers.nominated = nominated
        return fw

    def cycle(self, registry: Any = None) -> Cycle:
        """A scheduling cycle of the preemptor that got as far as PostFilter."""
        snap = self.snapshot()
        fw = self.framework(snap, registry)
        plugin = fw.post_filters[0]
        assert isinstance(plugin, DefaultPreemption)
        state, pod = CycleState(), PodInfo.of(self.preemptor)
        return Cycle(snap, fw, plugin, state, pod, filter_statuses(fw, state, pod, snap))


@dataclass
class Cycle:
    snap: ClusterSnapshot
    fw: Framework
    plugin: DefaultPreemption
    state: CycleState
    pod: PodInfo
    statuses: dict[str, Status]  # Filter's, as PostFilter gets them

    def plan(self) -> ResourceDryRun | None:
        return ResourceDryRun.plan(self.fw, self.snap, self.state, self.pod, self.statuses)

    def victims(self, node: NodeInfo, budgets: list[Budget]) -> tuple[Any, ...]:
        """select_victims_on_node's outcome, comparable."""
        victims, violations, status = self.plugin.select_victims_on_node(
            self.state, self.pod, node, budgets
        )
        return [v.key for v in victims], violations, status.code, status.reasons, status.plugin

    def preempt(self, statuses: dict[str, Status]) -> tuple[Any, ...]:
        """PostFilter's outcome, comparable."""
        self.plugin.rng = random.Random(7)  # the same sample of nodes for both paths
        result, status = self.plugin.post_filter(self.state, self.pod, dict(statuses))
        chosen = None
        if result is not None:
            victims = [v.key for v in result.victims]
            chosen = result.nominated_node_name, victims, [p.key for p in result.lower_nominated]
        return chosen, status.code, status.reasons, status.plugin

    def both_paths(self, run: Callable[[], Any]) -> tuple[Any, Any]:
        """`run()` by arithmetic and by the general path."""
        self.plugin.resource_dry_run = True
        fast = run()
        self.plugin.resource_dry_run = False
        try:
            return fast, run()
        finally:
            self.plugin.resource_dry_run = True


def _pod(draw: st.DrawFn, name: str, priorities: list[int]) -> PodBuilder:
    b = make_pod(name).priority(draw(st.sampled_from(priorities)))
    b.req(
        cpu=draw(st.sampled_from(["0", "100m", "250m", "500m", "900m", "1", "1500m"])),
        memory=draw(st.sampled_from(["0", "64Mi", "256Mi", "1Gi"])),
    )
    if draw(st.integers(0, 4)) == 0:
        b.req(example_com_gpu=str(draw(st.integers(0, 2))))
    return b


def _node(draw: st.DrawFn, name: str) -> Obj:
    b = make_node(name).capacity(
        cpu=draw(st.sampled_from(["1", "1500m", "2", "4"])),
        memory=draw(st.sampled_from(["1Gi", "2Gi", "4Gi"])),
        pods=draw(st.sampled_from([1, 2, 3, 5, 110])),
    )
    if draw(st.booleans()):
        b.capacity(example_com_gpu=draw(st.integers(0, 3)))
    obj = b.obj()
    # Node-level Filter plugins (which read the node, not its pods) get a say too.
    obj["spec"] = {"unschedulable": draw(st.integers(0, 5)) == 0}
    if draw(st.integers(0, 3)) == 0:
        obj["spec"]["taints"] = [DEDICATED]
    if draw(st.booleans()):
        obj["metadata"]["labels"]["disk"] = "ssd"
    return obj


def _placed(draw: st.DrawFn, name: str, node: str) -> Obj:
    b = _pod(draw, name, PRIORITIES).node(node).label("app", draw(st.sampled_from("ab")))
    if start := draw(st.sampled_from(STARTS)):
        b.start_time(start)
    if draw(st.integers(0, 5)) == 0:
        b.host_port(8080)  # the preemptor wants none: no conflict to consider
    return b.obj()


def _pdb(draw: st.DrawFn, i: int) -> Obj:
    spec: Obj = {"selector": {"matchLabels": {"app": draw(st.sampled_from("ab"))}}}
    kind = draw(st.integers(0, 2))
    if kind == 0:
        spec["minAvailable"] = draw(st.integers(0, 3))
    elif kind == 1:
        spec["maxUnavailable"] = draw(st.sampled_from([0, 1, "50%"]))
    status = {"disruptionsAllowed": draw(st.integers(0, 2))} if kind == 2 else {}
    meta = {"name": f"pdb{i}", "namespace": "default"}
    return {"metadata": meta, "spec": spec, "status": status}


def _preemptor(draw: st.DrawFn) -> Obj:
    obj = _pod(draw, "preemptor", [10, 15, 25]).obj()
    if draw(st.booleans()):
        obj["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if draw(st.integers(0, 3)) == 0:
        obj["spec"]["nodeSelector"] = {"disk": "ssd"}
    return obj


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    names = [f"node{i}" for i in range(draw(st.integers(1, 5)))]
    pods = [
        _placed(draw, f"p{i}-{j}", name)
        for i, name in enumerate(names)
        for j in range(draw(st.integers(0, 6)))
    ]
    nominated = [
        (draw(st.sampled_from(names)), _pod(draw, f"nominated{k}", [5, 10, 20, 30]).obj())
        for k in range(draw(st.integers(0, 3)))
    ]
    pdbs = [_pdb(draw, i) for i in range(draw(st.integers(0, 2)))]
    return Cluster([_node(draw, n) for n in names], pods, nominated, pdbs, _preemptor(draw))


def filter_statuses(
    fw: Framework, state: CycleState, pod: PodInfo, snap: ClusterSnapshot
) -> dict[str, Status]:
    """The cycle's real Filter statuses: schedulePod's when the pod fits nowhere (the
    batch path's), else each node's from the per-node path."""
    try:
        Scheduler(fw, rng=random.Random(0)).schedule_pod(state, pod, snap)
    except FitError as err:
        return err.diagnosis.node_to_status
    statuses = {
        n.name: fw.run_filter_plugins_with_nominated_pods(state, pod, n) for n in snap.nodes
    }
    return {name: s for name, s in statuses.items() if not s.ok}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_dry_run_by_arithmetic_gives_what_the_general_one_gives(cluster: Cluster) -> None:
    cycle = cluster.cycle()
    # These clusters are all the fast path's to take (else this test proves nothing).
    assert cycle.plan() is not None
    budgets = cycle.plugin.evaluator.budgets()

    for node in cycle.snap.nodes:
        fast, general = cycle.both_paths(lambda n=node: cycle.victims(n, budgets))
        assert fast == general, node.name
        event(f"node: {'victims' if fast[0] else fast[2].name}, violations {fast[1]}")
    # With the real statuses (a node Filter stopped at NodeResourcesFit skips the plugins
    # before it), and with statuses that say nothing of which plugin rejected.
    unknown = {n.name: Status(Code.UNSCHEDULABLE) for n in cycle.snap.nodes}
    for statuses in (cycle.statuses, unknown):
        fast, general = cycle.both_paths(lambda s=statuses: cycle.preempt(s))
        assert fast == general


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_batch_filter_counts_nominated_pods_by_arithmetic_as_node_by_node(
    cluster: Cluster,
) -> None:
    """RunFilterPluginsWithNominatedPods in the batch Filter: with the nominated pods'
    amounts added where only resources decide, the verdicts and statuses of running
    the filters node by node with the pods added."""
    cycle = cluster.cycle()
    assert cycle.plan() is not None

    def batch(by_amounts: bool) -> tuple[Any, ...]:
        cycle.fw.nominated_by_amounts = by_amounts
        result = cycle.fw.run_filter_plugins_batch(cycle.state, cycle.pod, cycle.snap.columns)
        assert result is not None
        statuses = {
            row: cycle.fw.filter_status(cycle.state, cycle.pod, cycle.snap.columns.infos[row], k)
            for row, k in enumerate(result.first_rejecter.tolist())
            if k >= 0
        } | result.statuses
        # (a feasible row's status is never read: only rejected rows are reported)
        shown = {row: (s.code, s.reasons, s.plugin) for row, s in statuses.items() if not s.ok}
        return result.feasible.tolist(), shown

    assert batch(True) == batch(False)


# --- where the general path runs ---------------------------------------------------------


HIGH, LOW = 100, 0


def low(name: str, node: str = "node1") -> PodBuilder:
    return make_pod(name).priority(LOW).req(cpu="1").node(node).label("app", "web")


@dataclass
class FallbackCase:
    name: str
    preemptor: Obj
    placed: list[PodBuilder] = field(default_factory=list)
    fast: bool = False  # whether the fast path applies after all


def preemptor() -> PodBuilder:
    return make_pod("p").priority(HIGH).req(cpu="2")


def with_affinity(kind: str, *, required: bool) -> Obj:
    """The preemptor with one podAffinity or podAntiAffinity term to app=web pods."""
    obj = preemptor().obj()
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
    if required:
        terms: Obj = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    else:
        weighted = {"weight": 10, "podAffinityTerm": term}
        terms = {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}
    obj["spec"]["affinity"] = {kind: terms}
    return obj


FALLBACK_CASES = [
    FallbackCase(
        "preemptor with required anti-affinity", preemptor().anti_affinity("app", "web").obj()
    ),
    FallbackCase(
        "preemptor with required pod affinity", with_affinity("podAffinity", required=True)
    ),
    FallbackCase(
        "preemptor with a hard spread constraint", preemptor().spread(1, ZONE, "app", "x").obj()
    ),
    FallbackCase("preemptor with a host port", preemptor().host_port(8080).obj()),
    FallbackCase(
        "a placed pod with required anti-affinity, even to pods the preemptor is not",
        preemptor().obj(),
        [make_pod("guard").priority(HIGH).node("node1").anti_affinity("app", "other")],
    ),
    FallbackCase(
        "preferred anti-affinity only: resources decide",
        with_affinity("podAntiAffinity", required=False),
        fast=True,
    ),
    FallbackCase(
        "soft spreading only: resources decide",
        preemptor().spread(1, ZONE, "app", "x", hard=False).obj(),
        fast=True,
    ),
    FallbackCase("a plain preemptor: resources decide", preemptor().obj(), fast=True),
]


@pytest.mark.parametrize("case", FALLBACK_CASES, ids=lambda c: c.name)
def test_the_fast_path_only_where_resources_alone_decide(case: FallbackCase) -> None:
    placed = [low("a"), low("b", "node2"), *case.placed]
    cluster = Cluster(
        [make_node(n).capacity(cpu="2").zone("z1").obj() for n in ("node1", "node2")],
        [p.obj() for p in placed],
        [],
        [],
        case.preemptor,
    )
    cycle = cluster.cycle()

    assert (cycle.plan() is not None) == case.fast
    fast, general = cycle.both_paths(lambda: cycle.preempt(cycle.statuses))
    assert fast == general


class ReadsPods(FilterPlugin):
    """A Filter plugin the fast path knows nothing of: it may read the node's pods."""

    name = "ReadsPods"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS if len(node.pods) < 2 else Status(Code.UNSCHEDULABLE, ["crowded"])


def test_an_unknown_filter_plugin_takes_the_general_path() -> None:
    cluster = Cluster(
        [make_node("node1").capacity(cpu="2").obj()],
        [low("a").obj(), low("b").obj()],
        [],
        [],
        preemptor().obj(),
    )
    cluster.profile = {"plugins": {"filter": {"enabled": [{"name": ReadsPods.name}]}}}
    registry = {**REGISTRY, ReadsPods.name: lambda args, handle: ReadsPods()}
    assert cluster.cycle(registry).plan() is None


def test_a_nominated_pod_already_on_the_node_takes_the_general_path() -> None:
    # NodeInfo.add_pod of a key already there replaces that pod: not a sum any more.
    placed = low("a").obj()
    nominated = make_pod("a").priority(HIGH).req(cpu="500m").obj()
    cluster = Cluster(
        [make_node("node1").capacity(cpu="2").obj()],
        [placed],
        [("node1", nominated)],
        [],
        preemptor().obj(),
    )
    cycle = cluster.cycle()
    plan = cycle.plan()
    assert plan is not None and plan.node(cycle.snap.nodes[0]) is None


def test_no_room_even_without_the_victims_gives_node_resources_fit_status() -> None:
    cluster = Cluster(
        [make_node("node1").capacity(cpu="2", pods=2).obj()],
        [low("a").obj(), make_pod("keep").priority(HIGH).req(cpu="1").node("node1").obj()],
        [],
        [],
        make_pod("p").priority(HIGH).req(cpu="1500m").obj(),
    )
    cycle = cluster.cycle()
    fast, general = cycle.both_paths(lambda: cycle.victims(cycle.snap.nodes[0], []))
    assert fast == general == ([], 0, Code.UNSCHEDULABLE, ["Insufficient cpu"], "NodeResourcesFit")
