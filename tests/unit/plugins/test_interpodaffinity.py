"""InterPodAffinity: args, PreFilterExtensions (AddPod/RemovePod), and behaviour the
conformance vectors do not cover (Skip conditions, matchLabelKeys, namespaceSelector
unrolling, ignorePreferredTermsOfExistingPods, NormalizeScore)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from shared.config import ConfigError
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.interface import ClusterEvent, ClusterObjects, NodeScore
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.interpodaffinity import filtering
from shared.plugins.interpodaffinity import plugin as ipa
from shared.plugins.interpodaffinity.index import ExistingAntiAffinityIndex
from shared.plugins.interpodaffinity.terms import pod_terms
from shared.tools.synthetic import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(name: str, zone: str) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node({"metadata": {"name": name, "labels": {HOST: name, ZONE: zone}}})
    return info


def term(key: str = HOST, **extra: Any) -> dict[str, Any]:
    return {"topologyKey": key, **extra}


def selects(app: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}}


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    node_name: str = "",
    namespace: str = "default",
    affinity: dict[str, Any] | None = None,
) -> PodInfo:
    spec: dict[str, Any] = {"nodeName": node_name}
    if affinity is not None:
        spec["affinity"] = affinity
    meta = {"name": name, "namespace": namespace, "labels": labels or {}}
    return PodInfo.of({"metadata": meta, "spec": spec})


def required(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def preferred(kind: str, weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "podAffinityTerm": t}
            ]
        }
    }


def plugin(
    nodes: list[NodeInfo],
    existing: Sequence[PodInfo] = (),
    namespaces: dict[str, dict[str, str]] | None = None,
    args: dict[str, Any] | None = None,
) -> ipa.InterPodAffinity:
    by_name = {n.name: n for n in nodes}
    for p in existing:
        by_name[p.pod.spec.node_name].add_pod(p)
    objects = ClusterObjects(namespace_labels=namespaces or {})
    return ipa.new(args or {}, Handle(ClusterSnapshot(nodes, objects)))


def filter_codes(pl: ipa.InterPodAffinity, state: CycleState, p: PodInfo) -> dict[str, Code]:
    return {n.name: pl.filter(state, p, n).code for n in pl.handle.snapshot.nodes}


# --- args -----------------------------------------------------------------------


def test_args_defaults() -> None:
    args = ipa.parse_args({})
    assert args.hard_pod_affinity_weight == 1
    assert args.ignore_preferred_terms_of_existing_pods is False
    assert ipa.parse_args({"hardPodAffinityWeight": None}).hard_pod_affinity_weight == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight: Invalid value: -1"),
        ({"hardPodAffinityWeight": 101}, "not in valid range [0, 100]"),
        ({"hardPodAffinityWeight": "5"}, "hardPodAffinityWeight: must be an integer"),
        ({"hardPodAffinityWeight": True}, "hardPodAffinityWeight: must be an integer"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "must be a boolean"),
        ({"hardPodAffinityWeights": 1}, "args.hardPodAffinityWeights: unknown field"),
    ],
)
def test_args_rejected(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="pluginConfig\\[InterPodAffinity\\]") as err:
        ipa.parse_args(args)
    assert message in str(err.value)


@pytest.mark.parametrize("weight", [0, 100])
def test_args_weight_bounds_accepted(weight: int) -> None:
    assert ipa.parse_args({"hardPodAffinityWeight": weight}).hard_pod_affinity_weight == weight


def test_events_to_register() -> None:
    events = {e.event for e in plugin([]).events_to_register()}
    assert events == {
        ClusterEvent("AssignedPod", "Add"),
        ClusterEvent("AssignedPod", "UpdatePodLabel"),
        ClusterEvent("AssignedPod", "Delete"),
        ClusterEvent("Node", "Add"),
        ClusterEvent("Node", "UpdateNodeLabel"),
    }


# --- PreFilter Skip -------------------------------------------------------------


@pytest.mark.parametrize(
    ("incoming_affinity", "existing_affinity", "code"),
    [
        (None, None, Code.SKIP),
        # Preferred terms alone do not concern Filter.
        (preferred("podAffinity", 5, {**selects("web"), **term()}), None, Code.SKIP),
        # An existing pod's anti-affinity that does not select the pod leaves nothing to check.
        (None, required("podAntiAffinity", {**selects("db"), **term()}), Code.SKIP),
        (None, required("podAntiAffinity", {**selects("web"), **term()}), Code.SUCCESS),
        # A required term needs checking even when no pod matches it.
        (required("podAffinity", {**selects("db"), **term()}), None, Code.SUCCESS),
    ],
)
def test_pre_filter_skip(
    incoming_affinity: dict[str, Any] | None, existing_affinity: dict[str, Any] | None, code: Code
) -> None:
    other = pod("other", {"app": "x"}, node_name="n1", affinity=existing_affinity)
    pl = plugin([node("n1", "z1")], [other])
    _, status = pl.pre_filter(
        CycleState(), pod("p", {"app": "web"}, affinity=incoming_affinity), []
    )
    assert status.code == code


# --- AddPod / RemovePod -----------------------------------------------------------


def test_add_remove_pod_updates_incoming_anti_affinity() -> None:
    pl = plugin([node("n1", "z1"), node("n2", "z1")])
    incoming = pod("p", affinity=required("podAntiAffinity", {**selects("web"), **term()}))
    state = CycleState()
    pl.pre_filter(state, incoming, [])
    web = pod("web", {"app": "web"}, node_name="n1")
    n1 = pl.handle.snapshot.get("n1")
    assert n1 is not None

    assert pl.add_pod(state, incoming, web, n1).ok
    assert filter_codes(pl, state, incoming) == {"n1": Code.UNSCHEDULABLE, "n2": Code.SUCCESS}
    assert pl.filter(state, incoming, n1).reasons == [
        filtering.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
    ]

    assert pl.remove_pod(state, incoming, web, n1).ok
    assert filter_codes(pl, state, incoming) == {"n1": Code.SUCCESS, "n2": Code.SUCCESS}


def test_add_pod_updates_existing_anti_affinity_and_clone_is_independent() -> None:
    pl = plugin([node("n1", "z1"), node("n2", "z2")])
    incoming = pod(
        "p", {"app": "web"}, affinity=required("podAffinity", {**selects("web"), **term(ZONE)})
    )
    state = CycleState()
    pl.pre_filter(state, incoming, [])
    snapshot_before = state.clone()
    guard = pod(
        "guard",
        node_name="n2",
        affinity=required("podAntiAffinity", {**selects("web"), **term(ZONE)}),
    )
    n2 = pl.handle.snapshot.get("n2")
    assert n2 is not None
    assert pl.add_pod(state, incoming, guard, n2).ok

    # The pod selects itself and no pod matches yet: the first of its group may go anywhere
    # but where the new pod's anti-affinity forbids it.
    assert filter_codes(pl, state, incoming) == {"n1": Code.SUCCESS, "n2": Code.UNSCHEDULABLE}
    assert pl.filter(state, incoming, n2).reasons == [
        filtering.ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
    ]
    assert filter_codes(pl, snapshot_before, incoming) == {"n1": Code.SUCCESS, "n2": Code.SUCCESS}


def test_add_pod_updates_incoming_affinity() -> None:
    pl = plugin([node("n1", "z1"), node("n2", "z2")])
    incoming = pod("p", affinity=required("podAffinity", {**selects("db"), **term(ZONE)}))
    state = CycleState()
    pl.pre_filter(state, incoming, [])
    unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert filter_codes(pl, state, incoming) == {"n1": unresolvable, "n2": unresolvable}

    n1 = pl.handle.snapshot.get("n1")
    assert n1 is not None
    db = pod("db", {"app": "db"}, node_name="n1")
    assert pl.add_pod(state, incoming, db, n1).ok
    assert filter_codes(pl, state, incoming) == {"n1": Code.SUCCESS, "n2": unresolvable}
    assert pl.filter(state, incoming, pl.handle.snapshot.nodes[1]).reasons == [
        filtering.ERR_REASON_AFFINITY_RULES_NOT_MATCH
    ]


def test_add_pod_without_pre_filter_state_is_an_error() -> None:
    pl = plugin([node("n1", "z1")])
    n1 = pl.handle.snapshot.nodes[0]
    status = pl.add_pod(CycleState(), pod("p"), pod("q", node_name="n1"), n1)
    assert status.code == Code.ERROR


def test_filter_without_pre_filter_recomputes() -> None:
    existing = pod("web", {"app": "web"}, node_name="n1")
    pl = plugin([node("n1", "z1"), node("n2", "z2")], [existing])
    incoming = pod("p", affinity=required("podAntiAffinity", {**selects("web"), **term(ZONE)}))
    assert filter_codes(pl, CycleState(), incoming) == {
        "n1": Code.UNSCHEDULABLE,
        "n2": Code.SUCCESS,
    }


# --- terms -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("anti_term", "n1_code"),
    [
        # matchLabelKeys: only web pods of the pod's own version count.
        ({**selects("web"), **term(), "matchLabelKeys": ["version"]}, Code.SUCCESS),
        # mismatchLabelKeys: only web pods of another version count.
        ({**selects("web"), **term(), "mismatchLabelKeys": ["version"]}, Code.UNSCHEDULABLE),
        # A nil labelSelector selects nothing, whatever the keys.
        ({**term(), "matchLabelKeys": ["version"]}, Code.SUCCESS),
        # An empty labelSelector selects every pod.
        ({"labelSelector": {}, **term()}, Code.UNSCHEDULABLE),
    ],
)
def test_match_label_keys(anti_term: dict[str, Any], n1_code: Code) -> None:
    existing = pod("web-v1", {"app": "web", "version": "v1"}, node_name="n1")
    pl = plugin([node("n1", "z1")], [existing])
    incoming = pod(
        "p", {"app": "web", "version": "v2"}, affinity=required("podAntiAffinity", anti_term)
    )
    state = CycleState()
    pl.pre_filter(state, incoming, [])
    assert filter_codes(pl, state, incoming) == {"n1": n1_code}


@pytest.mark.parametrize(
    ("ns_term", "n1_code"),
    [
        # Only namespaces that exist are unrolled from a non-empty selector.
        ({"namespaceSelector": {"matchLabels": {"team": "a"}}}, Code.SUCCESS),
        ({"namespaceSelector": {"matchLabels": {"team": "b"}}}, Code.UNSCHEDULABLE),
        ({"namespaceSelector": {}}, Code.UNSCHEDULABLE),  # all namespaces
        ({"namespaces": ["team-b"]}, Code.UNSCHEDULABLE),
        ({}, Code.SUCCESS),  # the pod's own namespace only
    ],
)
def test_namespace_selector(ns_term: dict[str, Any], n1_code: Code) -> None:
    existing = pod("web", {"app": "web"}, node_name="n1", namespace="team-b")
    pl = plugin([node("n1", "z1")], [existing], {"team-a": {"team": "a"}, "team-b": {"team": "b"}})
    anti = required("podAntiAffinity", {**selects("web"), **term(), **ns_term})
    incoming = pod("p", namespace="team-a", affinity=anti)
    state = CycleState()
    pl.pre_filter(state, incoming, [])
    assert filter_codes(pl, state, incoming) == {"n1": n1_code}


# --- scoring -----------------------------------------------------------------------


def scores(pl: ipa.InterPodAffinity, p: PodInfo) -> tuple[Code, dict[str, int]]:
    state = CycleState()
    nodes = pl.handle.snapshot.nodes
    status = pl.pre_score(state, p, nodes)
    if status.code == Code.SKIP:
        return status.code, {}
    result = [NodeScore(n.name, pl.score(state, p, n)[0]) for n in nodes]
    assert pl.normalize_score(state, p, result).ok
    return status.code, {s.name: s.score for s in result}


@pytest.mark.parametrize(
    ("args", "incoming_affinity", "want"),
    [
        ({}, None, (Code.SUCCESS, {"n1": 100, "n2": 0})),
        ({"ignorePreferredTermsOfExistingPods": True}, None, (Code.SKIP, {})),
        # With preferences of its own, the pod still honours existing pods' terms.
        (
            {"ignorePreferredTermsOfExistingPods": True},
            preferred("podAntiAffinity", 2, {**selects("none"), **term()}),
            (Code.SUCCESS, {"n1": 100, "n2": 0}),
        ),
    ],
)
def test_ignore_preferred_terms_of_existing_pods(
    args: dict[str, Any], incoming_affinity: dict[str, Any] | None, want: tuple[Code, Any]
) -> None:
    existing = pod(
        "e", node_name="n1", affinity=preferred("podAffinity", 7, {**selects("web"), **term()})
    )
    pl = plugin([node("n1", "z1"), node("n2", "z2")], [existing], args=args)
    assert scores(pl, pod("p", {"app": "web"}, affinity=incoming_affinity)) == want


@pytest.mark.parametrize(
    ("weight", "want"),
    [(0, (Code.SKIP, {})), (1, (Code.SUCCESS, {"n1": 100, "n2": 100, "n3": 0}))],
)
def test_hard_pod_affinity_weight(weight: int, want: tuple[Code, Any]) -> None:
    existing = pod(
        "e", node_name="n1", affinity=required("podAffinity", {**selects("web"), **term(ZONE)})
    )
    nodes = [node("n1", "z1"), node("n2", "z1"), node("n3", "z2")]
    pl = plugin(nodes, [existing], args={"hardPodAffinityWeight": weight})
    assert scores(pl, pod("p", {"app": "web"})) == want


def test_normalize_score_negative_and_equal() -> None:
    existing = [
        pod("a", {"app": "web"}, node_name="n1"),
        pod("b", {"app": "web"}, node_name="n1"),
        pod("c", {"app": "web"}, node_name="n2"),
    ]
    pl = plugin([node("n1", "z1"), node("n2", "z2"), node("n3", "z3")], existing)
    anti = preferred("podAntiAffinity", 3, {**selects("web"), **term()})
    # Raw scores -6, -3, 0: min-max, truncated like Go's int64(float64).
    assert scores(pl, pod("p", affinity=anti)) == (Code.SUCCESS, {"n1": 0, "n2": 50, "n3": 100})
    # A term whose topology key no node has leaves nothing to score.
    absent = preferred("podAffinity", 3, {**selects("web"), **term("rack")})
    assert scores(pl, pod("p", affinity=absent)) == (Code.SKIP, {})
    # Matches that cancel out still leave a topology score: every node gets 0.
    both = {
        **preferred("podAffinity", 3, {**selects("web"), **term(ZONE)}),
        **preferred("podAntiAffinity", 3, {**selects("web"), **term(ZONE)}),
    }
    assert scores(pl, pod("p", affinity=both)) == (Code.SUCCESS, {"n1": 0, "n2": 0, "n3": 0})


# --- the index of existing pods' anti-affinity, kept from the change log ---------------


def _anti_pod(name: str, color: str, topology: str, namespace: str = "default") -> PodInfo:
    raw = make_pod(name, namespace=namespace, labels={"color": color})
    raw["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": topology}
            ]
        },
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 5,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"color": "blue"}},
                        "topologyKey": topology,
                    },
                }
            ]
        }
        if color == "blue"
        else None,
    }
    return PodInfo.of(raw)


def _walked(snapshot: ClusterSnapshot, pod: PodInfo) -> dict:
    """existing_anti_affinity_counts the way it was counted before the index: every pod
    with required anti-affinity, walked."""
    counts: dict = {}
    for node in snapshot.node_infos:
        if node.raw_node is None:
            continue
        for existing in node.pods.values():
            for term in pod_terms(existing).required_anti_affinity:
                if term.matches(pod.pod, {}) and term.topology_key in node.labels:
                    pair = (term.topology_key, node.labels[term.topology_key])
                    counts[pair] = counts.get(pair, 0) + 1
    return counts


def test_anti_affinity_index_follows_every_change_of_the_snapshot() -> None:
    rng = random.Random(5)
    infos = []
    for i in range(12):
        info = NodeInfo(f"n{i}")
        info.set_node(make_node(f"n{i}", zone=("a", "b", "c")[i % 3]))
        infos.append(info)
    snapshot = ClusterSnapshot(infos)
    index = ExistingAntiAffinityIndex()
    placed: dict[str, str] = {}
    for step in range(300):
        name = f"p{rng.randrange(40)}"
        if name in placed and rng.random() < 0.4:
            node = snapshot.get(placed.pop(name))
            assert node is not None
            node.remove_pod(f"default/{name}")
            snapshot.node_changed(node.name)
        elif name not in placed:
            color = rng.choice(["green", "blue", "red"])
            topology = rng.choice([HOST, ZONE])
            node_name = f"n{rng.randrange(12)}"
            snapshot.add_pod(_anti_pod(name, color, topology), node_name)
            placed[name] = node_name
        if step % 7 == 0:
            index.sync(snapshot)
            for color in ("green", "blue", "red"):
                probe = PodInfo.of(make_pod("probe", labels={"color": color}))
                counts: dict = {}
                index.add_to(counts, probe.pod, {})
                assert counts == _walked(snapshot, probe), (step, color)
            walked_scoring = {
                n.name
                for n in snapshot.node_infos
                if any(pod_terms(p).preferred_affinity for p in n.pods.values())
            }
            assert set(index.scoring_nodes) == walked_scoring


def test_anti_affinity_index_starts_over_on_another_snapshot() -> None:
    info = NodeInfo("n1")
    info.set_node(make_node("n1"))
    first = ClusterSnapshot([info])
    first.add_pod(_anti_pod("a", "green", HOST), "n1")
    index = ExistingAntiAffinityIndex()
    index.sync(first)
    other = NodeInfo("n2")
    other.set_node(make_node("n2"))
    second = ClusterSnapshot([other])
    index.sync(second)
    probe = PodInfo.of(make_pod("probe", labels={"color": "green"}))
    counts: dict = {}
    index.add_to(counts, probe.pod, {})
    assert counts == {}
