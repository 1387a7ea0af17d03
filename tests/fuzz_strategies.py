"""Hypothesis strategies for hostile input: watch events and internal messages that are
malformed, truncated, oversized, wrong-typed or adversarial (absurd quantities, 10k
labels, deep nesting, invalid names, unknown types)."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import msgpack
from hypothesis import strategies as st

from shared.subjects import MSGPACK_CONTENT_TYPE
from shared.tools.synthetic import make_node, make_pod

ABSURD_QUANTITIES = [
    "1e999999",
    "99999999999999999999999999999999Ei",
    "9223372036854775808",
    "-1",
    "-0.5Gi",
    "NaN",
    "Infinity",
    "1.5.5",
    "0x10",
    "\uff11\uff10\uff10m",  # fullwidth digits
    "1e-99999m",
    "",
    " 1 ",
    "100mi",
    "1E",
    "e3",
]
BAD_NAMES = ["", "UPPER", "under_score", "-lead", "trail-", "a" * 300, "dots..double", "ü", "a b"]


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"n": [value]}
    return value


junk_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(ABSURD_QUANTITIES + BAD_NAMES),
)
junk = st.recursive(
    junk_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
adversarial = st.one_of(
    junk,
    st.sampled_from(ABSURD_QUANTITIES),
    st.sampled_from(BAD_NAMES),
    st.just({f"k{i}": f"v{i}" for i in range(10_000)}),  # 10k labels
    st.just([{"name": f"c{i}"} for i in range(2_000)]),  # 2k containers
    st.just(deep(100)),  # past the decoder's nesting cap
    st.just(deep(40)),
    st.just("x" * 200_000),
)

# Where a mutation lands: (path, …) into a Pod or a Node as the workload builds them.
POD_PATHS = [
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "labels"),
    ("metadata", "uid"),
    ("metadata", "creationTimestamp"),
    ("metadata", "deletionTimestamp"),
    ("spec",),
    ("spec", "containers"),
    ("spec", "containers", 0, "resources", "requests", "cpu"),
    ("spec", "containers", 0, "resources", "requests", "memory"),
    ("spec", "containers", 0, "resources", "limits"),
    ("spec", "containers", 0, "ports"),
    ("spec", "initContainers"),
    ("spec", "overhead"),
    ("spec", "priority"),
    ("spec", "nodeSelector"),
    ("spec", "affinity"),
    ("spec", "tolerations"),
    ("spec", "topologySpreadConstraints"),
    ("spec", "schedulingGates"),
    ("spec", "nodeName"),
    ("spec", "preemptionPolicy"),
    ("status",),
    ("status", "nominatedNodeName"),
]
NODE_PATHS = [
    ("metadata", "name"),
    ("metadata", "labels"),
    ("spec",),
    ("spec", "taints"),
    ("spec", "unschedulable"),
    ("status", "capacity"),
    ("status", "capacity", "cpu"),
    ("status", "capacity", "pods"),
    ("status", "allocatable"),
    ("status", "images"),
]


def put(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A copy of `obj` with `value` at `path`, creating what is missing on the way."""
    out = copy.deepcopy(obj)
    cur: Any = out
    for step in path[:-1]:
        try:
            cur = cur[step]
        except (KeyError, IndexError, TypeError):
            return out  # the path is gone (an earlier mutation replaced a parent)
    with contextlib.suppress(IndexError, TypeError):
        cur[path[-1]] = value
    return out


# Placeholders for the name and namespace, replaced by unique ones of the same length
# at publish time (in JSON or msgpack bytes alike), so that no two messages share a subject.
NAME = "fuzzname000000"
NAMESPACE = "fuzzns00000000"


PDB_PATHS = [
    ("metadata", "name"),
    ("spec",),
    ("spec", "minAvailable"),
    ("spec", "maxUnavailable"),
    ("spec", "selector"),
    ("spec", "selector", "matchLabels"),
]
PODGROUP_PATHS = [("metadata", "name"), ("spec",), ("spec", "minMember"), ("metadata", "labels")]


def base_object(kind: str) -> dict[str, Any]:
    meta = {"name": NAME, "namespace": NAMESPACE}
    if kind == "pod":
        return make_pod(NAME, namespace=NAMESPACE)
    if kind == "node":
        return make_node(NAME)
    if kind == "pdb":
        spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": "fuzz"}}}
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta,
            "spec": spec,
        }
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {"minMember": 2},
    }


PATHS = {"pod": POD_PATHS, "node": NODE_PATHS, "pdb": PDB_PATHS, "podgroup": PODGROUP_PATHS}


@st.composite
def mutated_object(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    base = base_object(kind)
    paths = PATHS[kind]
    for _ in range(draw(st.integers(0, 3))):
        base = put(base, draw(st.sampled_from(paths)), draw(adversarial))
    meta = base.get("metadata")
    if isinstance(meta, dict) and draw(st.booleans()):
        meta.pop("name", None)  # filled from the subject
    return base


@st.composite
def watch_event(draw: st.DrawFn, kind: str) -> tuple[bytes, dict[str, str]]:
    """(payload, headers): an event whose object is mutated, or whose envelope or bytes are."""
    etype = draw(st.sampled_from(["ADDED", "MODIFIED", "DELETED"]) | junk_leaf)
    event: Any = {"type": etype, "object": draw(mutated_object(kind))}
    shape = draw(st.sampled_from(["json", "msgpack", "truncated", "envelope", "bytes"]))
    if shape == "envelope":
        event = draw(st.one_of(junk, st.just({"type": "ADDED"}), st.just([event])))
    if shape == "msgpack":
        return msgpack.packb(event, use_bin_type=True), {"Content-Type": MSGPACK_CONTENT_TYPE}
    data = json.dumps(event).encode()
    if shape == "truncated":
        return data[: draw(st.integers(0, max(len(data) - 1, 0)))], {}
    if shape == "bytes":
        raw = draw(st.binary(max_size=200))
        headers = draw(st.sampled_from([{}, {"Content-Type": MSGPACK_CONTENT_TYPE}]))
        return raw, headers
    return data, {}


# Internal request bodies: the right keys with wrong values, wrong shapes, and bytes.
INTERNAL_KEYS = [
    "events",
    "op",
    "key",
    "uid",
    "pod",
    "seq",
    "max",
    "wait_ms",
    "reports",
    "cycle",
    "outcome",
    "assume",
    "node",
    "profile",
    "finish",
    "forget",
    "forget_attempts",
    "signals",
    "query",
    "move",
    "epoch",
]


@st.composite
def internal_body(draw: st.DrawFn) -> Any:
    record = st.dictionaries(st.sampled_from(INTERNAL_KEYS), adversarial, max_size=6)
    return draw(
        st.one_of(
            junk,
            record,
            st.fixed_dictionaries({"events": st.lists(record, max_size=5)}),
            st.fixed_dictionaries({"reports": st.lists(record, max_size=5)}),
            st.fixed_dictionaries({"assume": st.lists(record, max_size=5)}),
            st.fixed_dictionaries(
                {"max": adversarial, "wait_ms": st.integers(-(2**40), 2**40) | junk_leaf}
            ),
        )
    )


# Internal messages of the right shape with hostile values: past the first key lookups,
# into the handlers (and, for queue and cache events, into their state).
plausible_key = st.sampled_from(["default/p", "ns/x", "", "no-slash"]) | junk_leaf
plausible_int = st.integers(-(2**63), 2**63 - 1) | junk_leaf
hostile_pod = st.one_of(junk, st.just(make_pod("hostile")), mutated_object("pod"))
queue_event = st.fixed_dictionaries(
    {
        "op": st.sampled_from(["upsert", "delete", "assigned", "move"]) | junk_leaf,
        "key": plausible_key,
        "uid": junk_leaf,
        "pod": hostile_pod,
        "seq": plausible_int,
    },
    optional={"resource": junk_leaf, "action": junk_leaf, "event": junk_leaf, "old": junk},
)
cache_event = st.fixed_dictionaries(
    {
        "op": st.sampled_from(
            ["node_upsert", "node_delete", "pod_upsert", "pod_delete", "podgroup_upsert"]
        )
        | junk_leaf,
        "name": plausible_key,
        "node": st.one_of(junk, st.just(make_node("hostile")), mutated_object("node")),
        "pod": hostile_pod,
        "node_name": junk_leaf,
        "seq": plausible_int,
    }
)
report = st.fixed_dictionaries(
    {
        "key": plausible_key,
        "cycle": plausible_int,
        "outcome": st.sampled_from(["assumed", "unschedulable", "error"]) | junk_leaf,
    },
    optional={"message": junk, "plugins": junk, "seq": plausible_int, "nominated_node": junk},
)
assumption = st.fixed_dictionaries(
    {
        "key": plausible_key,
        "uid": junk_leaf,
        "profile": st.just("default-scheduler") | junk_leaf,
        "pod": hostile_pod,
        "node": st.just("hostile") | junk_leaf,
        "seq": plausible_int,
    },
    optional={"generation": junk, "cycle": plausible_int},
)
nomination = st.fixed_dictionaries(
    {
        "key": plausible_key,
        "profile": st.just("default-scheduler") | junk_leaf,
        "pod": hostile_pod,
        "node": st.just("hostile") | junk_leaf,
        "seq": plausible_int,
        "victims": st.lists(plausible_key, max_size=3) | junk_leaf,
    },
)
SHAPED = {
    "ksched.internal.queue.events": st.fixed_dictionaries(
        {"events": st.lists(queue_event, max_size=4)}
    ),
    "ksched.internal.queue.report": st.fixed_dictionaries(
        {"reports": st.lists(report, max_size=4)}, optional={"move": junk}
    ),
    "ksched.internal.queue.pop": st.fixed_dictionaries(
        {"max": plausible_int, "wait_ms": st.integers(-(2**40), 500) | junk_leaf}
    ),
    "ksched.internal.queue.nominated": st.fixed_dictionaries({}, optional={"node": junk}),
    "ksched.internal.cache.events": st.fixed_dictionaries(
        {"events": st.lists(cache_event, max_size=4)}
    ),
    "ksched.internal.cache.assume": st.fixed_dictionaries(
        {"assume": st.lists(assumption, max_size=3)}
    ),
    "ksched.internal.cache.nominate": st.fixed_dictionaries({"reserve": nomination})
    | st.fixed_dictionaries({"release": st.lists(junk_leaf, max_size=3)}),
    "ksched.internal.cache.binding": st.fixed_dictionaries(
        {},
        optional={
            "finish": st.lists(st.lists(junk_leaf, max_size=3), max_size=3),
            "forget": st.lists(st.lists(junk_leaf, max_size=3), max_size=3),
            "forget_attempts": st.lists(st.lists(junk_leaf, max_size=3), max_size=3),
        },
    ),
    "ksched.internal.cache.permit": st.fixed_dictionaries(
        {}, optional={"signals": st.lists(junk, max_size=3), "query": junk}
    ),
}


@st.composite
def internal_request(draw: st.DrawFn, subjects: list[str]) -> tuple[str, Any]:
    subject = draw(st.sampled_from(subjects))
    body = draw(st.one_of(SHAPED[subject], internal_body()))
    return subject, body
