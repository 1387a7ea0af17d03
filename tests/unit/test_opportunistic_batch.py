"""Opportunistic batching (KEP-5598): pods of one signature start from the previous
pod's results, and decide exactly as full cycles do.

Parity is defined as upstream's batch tests compare runs, made exact: the same cluster,
the same pods in the same order, the same profile and percentageOfNodesToScore, and an
RNG seeded alike; then every pod gets the same node (or the same FitError), the same
evaluated/feasible counts, and the rotating start index moves alike, whether the
scheduler reuses results or not. Ties are broken by the same draw of the same RNG, so
random tie-breaking is part of what is compared, not excluded from it.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.config import Profile
from shared.framework.opportunistic_batch import HINT_USED, NODES_CHANGED, OpportunisticBatch
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY
from tests.builders import ZONE, make_node, make_pod
from tests.unit.test_batch_paths import (
    PROFILES,
    Chooser,
    build,
    node_object,
    outcome,
    pod_object,
    profile,
    raw_nodes,
    raw_pods,
)


def copies(template: dict[str, Any], n: int, app: str | None = None) -> dict[str, Any]:
    """Another pod of the template (a ReplicaSet's next replica): own name and uid, and
    other labels if `app` is given (they sign alike unless pods with terms exist)."""
    raw = copy.deepcopy(template)
    raw["metadata"]["name"] = raw["metadata"]["uid"] = f"{raw['metadata']['name']}-r{n}"
    if app is not None:
        raw["metadata"]["labels"] = {"app": app}
    return raw


def run(
    nodes: list[dict],
    existing: list[tuple[dict, int]],
    steps: list[tuple[str, Any]],
    prof: Profile,
    pct: int,
    batching: bool,
) -> tuple[list[tuple[Any, ...]], OpportunisticBatch | None]:
    """Schedule the steps' pods in order on one snapshot (each placed where it went);
    a ("forget", i) step takes the i-th placed pod off its node again, as a refused
    assumption does in the worker, between two pods of a run."""
    fw = Framework.from_profile(prof, REGISTRY)
    ob = OpportunisticBatch(fw, max_age=math.inf) if batching else None
    scheduler = Scheduler(
        fw, percentage_of_nodes_to_score=pct, rng=random.Random(7), opportunistic=ob
    )
    snapshot = build(nodes, existing)
    results: list[tuple[Any, ...]] = []
    placed: list[tuple[PodInfo, str]] = []
    for n, (kind, value) in enumerate(steps):
        if kind == "forget":
            if placed:
                pod, node = placed.pop(value % len(placed))
                forget(snapshot, pod, node)
            continue
        template, app = value if isinstance(value, tuple) else (value, None)
        pod = PodInfo.of(copies(template, n, app), 1000 + n)
        result = outcome(scheduler, pod, snapshot)
        if result[0] == "ok":
            placed.append((pod, result[1]))
        results.append((*result, scheduler.next_start_node_index))
    return results, ob


def forget(snapshot: ClusterSnapshot, pod: PodInfo, node: str) -> None:
    info = snapshot.get(node)
    assert info is not None and info.remove_pod(pod.key)
    snapshot.node_changed(node)


def assert_same(nodes: list[dict], existing: list, steps: list, prof: Profile, pct: int) -> int:
    batched, ob = run(nodes, existing, steps, prof, pct, batching=True)
    unbatched, _ = run(nodes, existing, steps, prof, pct, batching=False)
    assert batched == unbatched
    assert ob is not None
    return ob.attempts[HINT_USED]


@st.composite
def runs(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Runs of identical pods from a few templates, now and then a pod taken off."""
    templates = draw(st.lists(raw_pods(0), min_size=1, max_size=3))
    steps: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 5))):
        template = draw(st.sampled_from(templates))
        for _ in range(draw(st.integers(1, 8))):
            app = draw(st.sampled_from([None, None, "web", "db"]))
            steps.append(("pod", (template, app)))
        if draw(st.integers(0, 3)) == 0:
            steps.append(("forget", draw(st.integers(0, 50))))
    return steps


cluster = st.integers(1, 30).flatmap(
    lambda n: st.tuples(
        st.tuples(*[raw_nodes(i) for i in range(n)]),
        st.lists(st.tuples(raw_pods(0), st.integers(0, 100)), max_size=10),
    )
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster, runs(), st.sampled_from(sorted(PROFILES)))
def test_batched_and_unbatched_runs_decide_alike(inputs: tuple, steps: list, prof: str) -> None:
    nodes, existing = inputs
    assert_same(list(nodes), existing, steps, profile(prof), 100)


def test_sampled_runs_decide_alike_over_many_nodes() -> None:
    """Above 100 nodes the search samples from a rotating start: the reused results must
    give the same sample, scores and tie draws (too large for hypothesis: seeded)."""
    reused = 0
    for seed in range(3):
        c = Chooser(rng=random.Random(seed))
        nodes = [node_object(c, i) for i in range(260)]
        existing = [(pod_object(c, 0), c.integer(0, 259)) for _ in range(40)]
        templates = [pod_object(c, i) for i in range(4)]
        steps: list[tuple[str, Any]] = []
        for _ in range(8):
            steps += [("pod", c.one(templates))] * c.integer(1, 12)
            if c.flag():
                steps.append(("forget", c.integer(0, 99)))
        for pct in (0, 10, 40, 100):
            reused += assert_same(nodes, existing, steps, Profile(), pct)
    assert reused > 0


def test_one_pod_per_node_run_is_batched_and_spread_like_full_cycles() -> None:
    """upstream's "three pod batch": identical pods that fill a node each; all but the
    first reuse the results, and they land where full cycles put them."""
    nodes = [make_node(f"n{i}").capacity(cpu="1", memory="1Gi", pods=1).obj() for i in range(5)]
    pod = make_pod("p").req(cpu="100m").obj()
    steps = [("pod", pod)] * 5
    batched, ob = run(nodes, [], steps, Profile(), 100, batching=True)
    unbatched, _ = run(nodes, [], steps, Profile(), 100, batching=False)
    assert batched == unbatched
    assert sorted(r[1] for r in batched) == [f"n{i}" for i in range(5)]
    assert ob is not None and ob.attempts[HINT_USED] == 4


def test_a_pod_with_terms_leaving_a_node_starts_the_results_over() -> None:
    """An existing pod's anti-affinity keeps web pods out of its whole zone; once it is
    gone, the other node of that zone fits again, though only its own node changed: the
    kept results must be dropped, not brought up to date for that node."""
    nodes = [
        make_node("n1").zone("a").capacity(cpu="4", memory="8Gi", pods=10).obj(),
        make_node("n2").zone("a").capacity(cpu="8", memory="16Gi", pods=10).obj(),
        make_node("n3").zone("b").capacity(cpu="4", memory="8Gi", pods=2).obj(),
    ]
    # another pod with terms, on n3, which match no web pod: the signatures stay alike
    other = make_pod("other").label("app", "x").anti_affinity("app", "none", ZONE).obj()
    guard = make_pod("guard").label("app", "guard").anti_affinity("app", "web", ZONE).obj()
    web = make_pod("web").label("app", "web").req(cpu="1").obj()
    chosen = {}
    flushes = {}
    for batching in (True, False):
        fw = Framework.from_profile(Profile(), REGISTRY)
        ob = OpportunisticBatch(fw, max_age=math.inf) if batching else None
        scheduler = Scheduler(fw, rng=random.Random(7), opportunistic=ob)
        snapshot = build(nodes, [(guard, 0), (other, 2)])
        first = outcome(scheduler, PodInfo.of(copies(web, 1), 1), snapshot)
        forget(snapshot, PodInfo.of(guard, 1), "n1")
        second = outcome(scheduler, PodInfo.of(copies(web, 2), 2), snapshot)
        chosen[batching] = (first[1], second[1])
        flushes[batching] = dict(ob.flushes) if ob is not None else {}
    assert chosen[True] == chosen[False] == ("n3", "n2")
    assert flushes[True] == {NODES_CHANGED: 1}
