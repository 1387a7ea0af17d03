"""The batch path (Filter/Score over columns) gives the per-node path's answers.

Both paths run on the same generated clusters and pods: per plugin (each mask and
score array against per-node Filter and Score), and end to end through schedulePod
(the chosen node, the counts, the FitError message and per-node reasons), over
sequences of pods that land on the snapshot, with sampling and a rotating start.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.config import Profile, parse_config
from shared.framework.columns import NodeColumns
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import FitError
from shared.framework.interface import BatchFilterPlugin, BatchScorePlugin, NodeScore
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler, SchedulingError
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY

ZONES = ["a", "b", "c"]
TAINTS = [
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "old", "effect": "PreferNoSchedule"},
    {"key": "drain", "value": "x", "effect": "NoExecute"},
]
IMAGES = ["nginx", "redis:7", "registry.k8s.io/pause:3.9", "big/model:1"]
GPU = "example.com/gpu"


class Chooser:
    """The choices a generated object makes: drawn by hypothesis, or by a seeded Random
    for inputs too large for hypothesis to handle well."""

    def __init__(self, draw: st.DrawFn | None = None, rng: random.Random | None = None):
        self._draw = draw
        self._rng = rng

    def integer(self, lo: int, hi: int) -> int:
        if self._draw is not None:
            return self._draw(st.integers(lo, hi))
        assert self._rng is not None
        return self._rng.randint(lo, hi)

    def one(self, options: list[Any]) -> Any:
        return options[self.integer(0, len(options) - 1)]

    def some(self, options: list[Any], max_size: int, min_size: int = 0) -> list[Any]:
        return [self.one(options) for _ in range(self.integer(min_size, max_size))]

    def flag(self) -> bool:
        return self.integer(0, 1) == 1


def node_object(c: Chooser, i: int) -> dict[str, Any]:
    name = f"n{i:03d}"
    labels = {"kubernetes.io/hostname": name}
    if c.flag() or i % 4:
        labels["topology.kubernetes.io/zone"] = c.one(ZONES)
    if c.flag():
        labels["disk"] = c.one(["ssd", "hdd"])
    if c.flag():
        labels["gen"] = c.one(["1", "2", "3", "10", "x"])
    capacity: dict[str, str] = {"cpu": c.one(["1", "2", "4", "500m"])}
    if c.integer(0, 9):  # now and then a node without memory
        capacity["memory"] = c.one(["1Gi", "4Gi", "16Gi"])
    capacity["pods"] = str(c.one([2, 5, 110]))
    if c.flag():
        capacity["ephemeral-storage"] = "10Gi"
    if c.integer(0, 3) == 0:
        capacity[GPU] = str(c.integer(0, 4))
    sizes = [300 * 2**20, 30 * 2**20, 2**30]
    images = [
        {"names": [img if ":" in img else f"{img}:latest"], "sizeBytes": size}
        for img, size in zip(dict.fromkeys(c.some(IMAGES, 3)), sizes, strict=False)
    ]
    taints = list({str(t): t for t in c.some(TAINTS, 2)}.values())
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": c.integer(0, 9) == 0, "taints": taints},
        "status": {"capacity": capacity, "images": images},
    }


TOLERATIONS = [
    {"key": "dedicated", "operator": "Exists"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"operator": "Exists", "effect": "PreferNoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
]
EXPRESSIONS = [
    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]},
    {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["c"]},
    {"key": "disk", "operator": "Exists"},
    {"key": "disk", "operator": "DoesNotExist"},
    {"key": "gen", "operator": "Gt", "values": ["1"]},
    {"key": "gen", "operator": "Lt", "values": ["3"]},
    {"key": "gen", "operator": "In", "values": ["nope"]},
]


def pod_object(c: Chooser, i: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container_object(c)], "priority": c.integer(0, 2)}
    if c.flag():
        spec["tolerations"] = c.some(TOLERATIONS, 2)
    if c.integer(0, 3) == 0:
        spec["nodeSelector"] = {"disk": c.one(["ssd", "hdd"])}
    if c.integer(0, 3) == 0:  # pod-level requests in place of the containers'
        level = {"cpu": c.one(["100m", "1", "3"])}
        if c.flag():
            level["memory"] = c.one(["0", "1Gi"])
        spec["resources"] = {"requests": level}
    affinity = {"nodeAffinity": node_affinity_object(c)}
    for kind in ("podAffinity", "podAntiAffinity"):
        if c.integer(0, 3) == 0:
            affinity[kind] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [pod_term_object(c)]
            }
            if c.flag():
                preferred = {"weight": c.integer(1, 100), "podAffinityTerm": pod_term_object(c)}
                affinity[kind]["preferredDuringSchedulingIgnoredDuringExecution"] = [preferred]
    spec["affinity"] = {kind: rules for kind, rules in affinity.items() if rules}
    if c.integer(0, 2) == 0:
        spec["topologySpreadConstraints"] = [spread_object(c) for _ in range(c.integer(1, 2))]
    labels = {"app": c.one(["web", "db"])}
    meta = {"name": f"p{i}", "namespace": c.one(["default", "default", "other"]), "uid": f"u{i}"}
    return {"metadata": {**meta, "labels": labels}, "spec": spec}


def container_object(c: Chooser) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if c.integer(0, 4):
        requests["cpu"] = c.one(["100m", "300m", "1", "3"])
    if c.integer(0, 4):
        requests["memory"] = c.one(["100Mi", "1Gi", "3Gi"])
    if c.integer(0, 5) == 0:
        requests["ephemeral-storage"] = "1Gi"
    if c.integer(0, 5) == 0:
        requests[GPU] = "1"
    container: dict[str, Any] = {
        "name": "c",
        "image": c.one(IMAGES),
        "resources": {"requests": requests},
    }
    if c.integer(0, 5) == 0:
        container["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return container


def node_affinity_object(c: Chooser) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    if c.integer(0, 2) == 0:
        selector_terms = [term_object(c) for _ in range(c.integer(1, 2))]
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": selector_terms
        }
    if c.integer(0, 2) == 0:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": c.integer(1, 100), "preference": term_object(c)}
            for _ in range(c.integer(1, 3))
        ]
    return affinity


def pod_term_object(c: Chooser) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": {"matchLabels": {"app": c.one(["web", "db"])}},
        "topologyKey": c.one(["topology.kubernetes.io/zone", "kubernetes.io/hostname", "disk"]),
    }
    if c.integer(0, 3) == 0:
        term["namespaces"] = [c.one(["default", "other"])]
    return term


def spread_object(c: Chooser) -> dict[str, Any]:
    constraint: dict[str, Any] = {
        "maxSkew": c.integer(1, 3),
        "topologyKey": c.one(["topology.kubernetes.io/zone", "kubernetes.io/hostname", "disk"]),
        "whenUnsatisfiable": c.one(["DoNotSchedule", "ScheduleAnyway"]),
        "labelSelector": {"matchLabels": {"app": c.one(["web", "db"])}},
    }
    if c.integer(0, 3) == 0:
        constraint["minDomains"] = c.integer(1, 4)
        constraint["whenUnsatisfiable"] = "DoNotSchedule"
    if c.integer(0, 3) == 0:
        constraint["nodeTaintsPolicy"] = "Honor"
    if c.integer(0, 3) == 0:
        constraint["nodeAffinityPolicy"] = "Ignore"
    return constraint


def term_object(c: Chooser) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": c.some(EXPRESSIONS, 2)}
    if c.integer(0, 4) == 0:
        name = f"n{c.integer(0, 9):03d}"
        op = c.one(["In", "NotIn"])
        term["matchFields"] = [{"key": "metadata.name", "operator": op, "values": [name]}]
    return term


@st.composite
def raw_nodes(draw: st.DrawFn, i: int) -> dict[str, Any]:
    return node_object(Chooser(draw), i)


@st.composite
def raw_pods(draw: st.DrawFn, i: int) -> dict[str, Any]:
    return pod_object(Chooser(draw), i)


PROFILES = {
    "default": None,
    "most-allocated": {"scoringStrategy": {"type": "MostAllocated"}},
    "ratio": {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
            "requestedToCapacityRatio": {
                "shape": [{"utilization": 0, "score": 10}, {"utilization": 70, "score": 2}]
            },
        }
    },
    "gpu": {
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": GPU, "weight": 3}],
        }
    },
}


def profile(name: str) -> Profile:
    args = PROFILES[name]
    if args is None:
        return Profile()
    plugin_config: list[dict[str, Any]] = [{"name": "NodeResourcesFit", "args": args}]
    if name == "gpu":
        balanced = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}
        plugin_config.append({"name": "NodeResourcesBalancedAllocation", "args": balanced})
    config = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": plugin_config}],
        }
    )
    return config.profiles[0]


def build(raw_nodes_: list[dict[str, Any]], existing: list[tuple[dict, int]]) -> ClusterSnapshot:
    infos = []
    for raw in raw_nodes_:
        info = NodeInfo(raw["metadata"]["name"])
        info.set_node(raw)
        infos.append(info)
    for n, (raw, at) in enumerate(existing):
        infos[at % len(infos)].add_pod(PodInfo.of(raw, n + 1))
    snapshot = ClusterSnapshot(infos)
    snapshot.fill_image_states()
    return snapshot


def outcome(scheduler: Scheduler, pod: PodInfo, snapshot: ClusterSnapshot) -> tuple[Any, ...]:
    try:
        r = scheduler.schedule_pod(CycleState(), pod, snapshot)
    except FitError as err:
        reasons = {
            n: (s.code, s.plugin, tuple(s.reasons)) for n, s in err.diagnosis.node_to_status.items()
        }
        return ("fit-error", err.message(), reasons, sorted(err.diagnosis.unschedulable_plugins))
    except SchedulingError as err:
        return ("error", str(err))
    snapshot.add_pod(pod, r.suggested_host)
    return ("ok", r.suggested_host, r.evaluated_nodes, r.feasible_nodes)


def run_both(
    nodes: list[dict],
    existing: list[tuple[dict, int]],
    pods: list[dict],
    prof: str,
    pct: int,
    nominated: Sequence[tuple[dict, int]] = (),
) -> None:
    paths = []
    for batch in (True, False):
        fw = Framework.from_profile(profile(prof), REGISTRY)
        for n, (raw, at) in enumerate(nominated):
            name = nodes[at % len(nodes)]["metadata"]["name"]
            fw.handle.nominated.setdefault(name, []).append(PodInfo.of(raw, 500 + n))
        scheduler = Scheduler(
            fw, percentage_of_nodes_to_score=pct, rng=random.Random(7), batch=batch
        )
        snapshot = build(nodes, existing)
        results = []
        for n, raw in enumerate(pods):
            results.append(outcome(scheduler, PodInfo.of(raw, 1000 + n), snapshot))
            results.append(("next", scheduler.next_start_node_index))
        paths.append(results)
    batch_results, per_node_results = paths
    assert batch_results == per_node_results


cluster_inputs = st.integers(1, 30).flatmap(
    lambda n: st.tuples(
        st.tuples(*[raw_nodes(i) for i in range(n)]),
        st.lists(st.tuples(raw_pods(0), st.integers(0, 100)), max_size=12),
        st.lists(st.tuples(raw_pods(99), st.integers(0, 100)), max_size=3),
        st.lists(st.integers(0, 10**6), min_size=1, max_size=8).flatmap(
            lambda ids: st.tuples(*[raw_pods(i) for i in ids])
        ),
    )
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_inputs, st.sampled_from(sorted(PROFILES)))
def test_schedule_pod_batch_equals_per_node(inputs: tuple, prof: str) -> None:
    nodes, existing, nominated, pods = inputs
    run_both(list(nodes), existing, list(pods), prof, 100, nominated)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_inputs, st.sampled_from(sorted(PROFILES)))
def test_each_batch_plugin_equals_its_per_node_form(inputs: tuple, prof: str) -> None:
    nodes, existing, _, pods = inputs
    snapshot = build(list(nodes), existing)
    fw = Framework.from_profile(profile(prof), REGISTRY)
    fw.set_snapshot(snapshot)
    columns = snapshot.columns  # built first, so that PreFilters may count from it
    rows = np.arange(columns.n)
    for n, raw in enumerate(pods):
        pod = PodInfo.of(raw, 1000 + n)
        state = CycleState()
        _, status = fw.run_pre_filter_plugins(state, pod, snapshot.nodes)
        if not status.ok:
            continue
        for plugin in fw.filters:
            if plugin.name in state.skip_filter_plugins or not isinstance(
                plugin, BatchFilterPlugin
            ):
                continue
            mask = plugin.filter_all(state, pod, columns)
            if mask is None:
                continue
            expected = [plugin.filter(state, pod, info).ok for info in snapshot.nodes]
            assert mask.tolist() == expected, plugin.name
            explain = getattr(plugin, "filter_statuses", None)
            rejected = np.flatnonzero(~mask)
            statuses = explain(state, pod, columns, rejected) if explain else None
            if statuses is not None:
                per_node = [plugin.filter(state, pod, snapshot.nodes[r]) for r in rejected]
                assert [(s.code, s.reasons) for s in statuses] == [
                    (s.code, s.reasons) for s in per_node
                ], plugin.name
        assert fw.run_pre_score_plugins(state, pod, snapshot.nodes).code != Code.ERROR
        for plugin in fw.scores:
            if plugin.name in state.skip_score_plugins or not isinstance(plugin, BatchScorePlugin):
                continue
            scores = plugin.score_all(state, pod, columns, rows)
            if scores is None:
                continue
            listed = [NodeScore(i.name, plugin.score(state, pod, i)[0]) for i in snapshot.nodes]
            ext = plugin.score_extensions()
            if ext is not None:
                ext.normalize_score(state, pod, listed)
                scores = ext.normalize_all(state, pod, scores)  # type: ignore[attr-defined]
            assert scores.tolist() == [s.score for s in listed], plugin.name


def test_sampling_and_rotation_match_over_many_nodes() -> None:
    """Above 100 nodes numFeasibleNodesToFind samples: both paths must stop at the same
    node and move the start index alike (inputs too large for hypothesis: seeded)."""
    for seed in range(3):
        c = Chooser(rng=random.Random(seed))
        nodes = [node_object(c, i) for i in range(260)]
        existing = [(pod_object(c, 0), c.integer(0, 259)) for _ in range(50)]
        nominated = [(pod_object(c, 900 + i), c.integer(0, 259)) for i in range(20)]
        pods = [pod_object(c, i) for i in range(30)]
        for pct in (0, 10, 40):
            run_both(nodes, existing, pods, "default", pct, nominated)


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_columns_follow_pods_added_after_they_were_built(data: st.DataObject) -> None:
    nodes = data.draw(st.tuples(*[raw_nodes(i) for i in range(20)]))
    snapshot = build(list(nodes), [])
    columns = snapshot.columns
    for n, raw in enumerate(data.draw(st.lists(raw_pods(1), min_size=1, max_size=5))):
        snapshot.add_pod(PodInfo.of(raw, 5 + n), snapshot.nodes[data.draw(st.integers(0, 19))].name)
    fresh = NodeColumns(snapshot.nodes)
    for name in ("cpu", "memory", "pods", GPU):
        assert columns.requested(name).tolist() == fresh.requested(name).tolist()
    assert columns.num_pods.tolist() == fresh.num_pods.tolist()
    assert columns.nonzero_cpu.tolist() == fresh.nonzero_cpu.tolist()
    assert columns.has_ports.tolist() == fresh.has_ports.tolist()


def assert_same_view(kept: ClusterSnapshot, fresh: ClusterSnapshot) -> None:
    """What plugins read of a snapshot kept up to date equals a freshly built one."""
    assert [n.name for n in kept.nodes] == [n.name for n in fresh.nodes]
    assert all(a is b for a, b in zip(kept.nodes, fresh.nodes, strict=True))
    assert {n.name for n in kept.have_pods_with_affinity} == {
        n.name for n in fresh.have_pods_with_affinity
    }
    assert {n.name for n in kept.have_pods_with_required_anti_affinity} == {
        n.name for n in fresh.have_pods_with_required_anti_affinity
    }
    assert_same_columns(kept.columns, NodeColumns(fresh.nodes))
    for info in kept.nodes:
        assert info.image_states == fresh.by_name[info.name].image_states


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_cache_keeps_its_snapshot_in_step(data: st.DataObject) -> None:
    """The cache's ClusterSnapshot and columns, updated node by node, always equal a
    rebuilt snapshot, whatever the sequence of node and pod changes."""
    from services.cache.cache import Cache

    cache = Cache(lambda: 0.0)
    fw = Framework.from_profile(Profile(), REGISTRY)
    names = [f"n{i:03d}" for i in range(6)]
    cache.cluster()
    for step in range(data.draw(st.integers(1, 25))):
        op = data.draw(st.sampled_from(["node", "node", "pod", "pod", "assume", "remove", "drop"]))
        where = data.draw(st.integers(0, 5))
        if op == "node":
            cache.add_or_update_node(data.draw(raw_nodes(where)))
        elif op == "drop":
            cache.remove_node(names[where])
        elif op in ("pod", "assume"):
            raw = data.draw(raw_pods(data.draw(st.integers(0, 8))))
            pod = PodInfo.of(raw, step + 1)
            if op == "pod":
                cache.add_pod(pod.key, f"u{step}", names[where], pod, step + 1)
            else:
                cache.assume_pod(fw, pod, names[where], f"u{step}", step + 1)
        elif cache.pods:
            cache.remove_pod(data.draw(st.sampled_from(sorted(cache.pods))))
        if data.draw(st.booleans()):  # else more changes come before the next snapshot
            assert_same_view(cache.cluster(), ClusterSnapshot(cache.nodes.values()))
    assert_same_view(cache.cluster(), ClusterSnapshot(cache.nodes.values()))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_replacing_nodes_keeps_the_snapshot_in_step(data: st.DataObject) -> None:
    """The worker's refresh puts new NodeInfo objects in place of old ones."""
    nodes = list(data.draw(st.tuples(*[raw_nodes(i) for i in range(6)])))
    existing = data.draw(st.lists(st.tuples(raw_pods(0), st.integers(0, 5)), max_size=6))
    kept = build(nodes, existing)
    kept.columns  # noqa: B018 - built before the replacements, to be kept in step
    for step in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, 5))
        info = NodeInfo(f"n{i:03d}")
        info.set_node(data.draw(raw_nodes(i)))
        for raw in data.draw(st.lists(raw_pods(step), max_size=3)):
            info.add_pod(PodInfo.of(raw, 100 + step))
        assert kept.replace_node(info)
        fresh = ClusterSnapshot(kept.node_infos)
        fresh.fill_image_states()
        assert_same_view(kept, fresh)


def assert_same_columns(a: NodeColumns, b: NodeColumns) -> None:
    """Every column plugins read, by node name."""
    assert [i.name for i in a.infos] == [i.name for i in b.infos]
    for name in ("cpu", "memory", "pods", GPU):
        assert a.allocatable(name).tolist() == b.allocatable(name).tolist(), name
        assert a.requested(name).tolist() == b.requested(name).tolist(), name
    for column in ("num_pods", "nonzero_cpu", "nonzero_memory", "unschedulable", "has_ports"):
        assert getattr(a, column).tolist() == getattr(b, column).tolist(), column
    assert [a.taint_groups[g] for g in a.taint_group] == [b.taint_groups[g] for g in b.taint_group]
    for key in ("topology.kubernetes.io/zone", "disk", "gen"):
        ca, cb = a.label(key), b.label(key)
        assert [ca.values[c] if c >= 0 else None for c in ca.codes] == [
            cb.values[c] if c >= 0 else None for c in cb.codes
        ], key
    for image in IMAGES:
        assert a.image(image).size.tolist() == b.image(image).size.tolist(), image
        assert a.image(image).present.tolist() == b.image(image).present.tolist(), image
    assert a.pod_counts("labelled", labelled_pods).tolist() == (
        b.pod_counts("labelled", labelled_pods).tolist()
    )


def labelled_pods(info: NodeInfo) -> int:
    return sum(1 for p in info.pods.values() if p.pod.metadata.labels)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_reshaped_columns_equal_columns_built_afresh(data: st.DataObject) -> None:
    """Nodes added, removed, replaced and reordered: reshaping the old columns (rows
    copied, new nodes read) gives what building them over the new nodes gives, lazily
    built columns included."""
    nodes = list(data.draw(st.tuples(*[raw_nodes(i) for i in range(6)])))
    existing = data.draw(st.lists(st.tuples(raw_pods(0), st.integers(0, 5)), max_size=6))
    old = NodeColumns(build(nodes, existing).nodes)
    if data.draw(st.booleans()):  # columns built on first use before the change
        old.label("disk")
        old.image(IMAGES[0])
        old.pod_counts(
            "labelled", lambda info: sum(1 for p in info.pods.values() if p.pod.metadata.labels)
        )
    kept = [old.infos[i] for i in data.draw(st.lists(st.integers(0, 5), unique=True))]
    added = []
    for i in range(data.draw(st.integers(0, 3))):
        info = NodeInfo(f"new{i}")
        info.set_node(data.draw(raw_nodes(10 + i)))
        for raw in data.draw(st.lists(raw_pods(20 + i), max_size=2)):
            info.add_pod(PodInfo.of(raw, 200 + i))
        added.append(info)
    infos = data.draw(st.permutations(kept + added))
    assert_same_columns(old.reshaped(infos), NodeColumns(infos))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_resource_scores_without_masking_equal_the_masked_forms(data: st.DataObject) -> None:
    """The fast forms used when every node has every resource (capacity > 0), requests
    over capacity included."""
    from shared.plugins.noderesources.balanced_allocation import (
        balanced_resource_score,
        balanced_resource_scores,
    )
    from shared.plugins.noderesources.batch import (
        least_requested_scores,
        least_requested_scores_counted,
        most_requested_scores,
        most_requested_scores_counted,
    )

    n = data.draw(st.integers(1, 40))
    caps = [
        np.array(data.draw(st.lists(st.integers(1, 2**40), min_size=n, max_size=n))) for _ in "ab"
    ]
    reqs = [
        np.array(data.draw(st.lists(st.integers(0, 2**41), min_size=n, max_size=n))) for _ in "ab"
    ]
    for req, cap in zip(reqs, caps, strict=True):
        assert (
            least_requested_scores_counted(req, cap).tolist()
            == least_requested_scores(req, cap).tolist()
        )
        assert (
            most_requested_scores_counted(req, cap).tolist()
            == most_requested_scores(req, cap).tolist()
        )
    expected = [
        balanced_resource_score([int(r[i]) for r in reqs], [int(c[i]) for c in caps])
        for i in range(n)
    ]
    assert balanced_resource_scores(reqs, caps).tolist() == expected
