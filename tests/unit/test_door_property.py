"""The door holds against anything: a realistic Pod or Node with a random JSON value put
anywhere in it is either refused with a BadEvent, or accepted as an object every
internal hop can pack and the watcher can route."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import msgpack
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from shared.api.events import BadEvent, ClusterEvent, decode_cluster_event
from shared.routing import Informer, route
from shared.wire import pack

DATA = Path(__file__).parent / "data"
SERVED = frozenset({"default-scheduler"})
Path_ = tuple[str | int, ...]


@cache
def base(kind: str) -> tuple[dict[str, Any], str]:
    """A realistic object (several KB) and its subject."""
    if kind == "node":
        node = json.loads((DATA / "door_node.json").read_text())
        return node, f"ksched.cluster.nodes.{node['metadata']['name']}"
    pod = json.loads((DATA / "door_pod.json").read_text())
    if kind == "bound pod":
        pod["spec"]["nodeName"] = "ip-10-0-3-17.eu-west-1.compute.internal"
        pod["status"]["phase"] = "Running"
    meta = pod["metadata"]
    return pod, f"ksched.cluster.pods.{meta['namespace']}.{meta['name']}"


@cache
def base_event(kind: str) -> ClusterEvent:
    obj, subject = base(kind)
    return decode_cluster_event(
        subject, json.dumps({"type": "ADDED", "object": obj}).encode(), None, 6
    )


@cache
def paths(kind: str) -> list[Path_]:
    """Every position in the object: the root, each key of each map, each list item."""
    found: list[Path_] = []

    def walk(value: Any, at: Path_) -> None:
        found.append(at)
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*at, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, (*at, i))

    walk(base(kind)[0], ())
    return found


# --- random JSON values -------------------------------------------------------

# hypothesis leaves lone surrogates (category Cs) out of text unless asked for them.
characters = st.one_of(st.characters(), st.characters(categories=["Cs"]))
LIMITS = [2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30]
integers = st.one_of(
    st.integers(min_value=-(10**100), max_value=10**100),
    st.sampled_from(LIMITS + [-n for n in LIMITS] + [-(2**31) - 1, -(2**63) - 1]),
    st.integers(min_value=-3, max_value=300),
)
texts = st.one_of(
    st.text(characters, max_size=24),
    st.sampled_from(
        [
            "",
            "väl",
            "\ud800",
            "a\udfffb",
            "v" * 63,
            "v" * 64,
            "example.com/name",
            "Example.com/x",
            "a/b/c",
            "1e30",
            "9223372036854775807m",
            "9223372036854775808m",
            "8Ei",
            "100m",
            "Infinity",
            "default-scheduler",
            "x" * 5000,
        ]
    ),
)
leaves = st.one_of(st.none(), st.booleans(), integers, st.floats(), texts)
KNOWN_KEYS = [
    "metadata",
    "spec",
    "status",
    "labels",
    "annotations",
    "generation",
    "priority",
    "nodeName",
    "nodeSelector",
    "schedulerName",
    "containers",
    "resources",
    "requests",
    "limits",
    "overhead",
    "cpu",
    "memory",
    "capacity",
    "allocatable",
    "taints",
    "tolerations",
    "affinity",
    "phase",
    "nominatedNodeName",
    "deletionTimestamp",
]
keys = st.one_of(st.text(characters, max_size=12), st.sampled_from(KNOWN_KEYS))
json_values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(keys, inner, max_size=6)),
    max_leaves=40,
)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A copy of a base object with one to three random values put at random positions:
    replacing what is there, or as a new key (or list item) below it."""
    kind = draw(st.sampled_from(["pod", "bound pod", "node"]))
    obj = copy.deepcopy(base(kind)[0])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        at = draw(st.sampled_from(paths(kind)))
        value = draw(json_values)
        parent, target = _locate(obj, at)  # None where an earlier change removed the path
        if isinstance(target, dict) and (not at or draw(st.booleans())):
            target[draw(keys)] = value  # a new key (or an existing one)
        elif isinstance(target, list) and draw(st.booleans()):
            target.append(value)
        elif parent is not None:
            parent[at[-1]] = value
    return kind, obj


def _locate(obj: Any, at: Path_) -> tuple[Any, Any]:
    """The container holding the value at `at`, and that value; (None, None) if gone."""
    parent, target = None, obj
    for step in at:
        if not _holds(target, step):
            return None, None
        parent, target = target, target[step]
    return parent, target


def _holds(container: Any, step: str | int) -> bool:
    if isinstance(container, dict):
        return step in container
    return isinstance(container, list) and isinstance(step, int) and step < len(container)


def encode(event: dict[str, Any], as_msgpack: bool) -> tuple[bytes, dict[str, str] | None]:
    if as_msgpack:
        try:
            return msgpack.packb(event), {"Content-Type": "application/msgpack"}
        except (OverflowError, ValueError, TypeError):
            pass  # not expressible in msgpack (a huge integer, a lone surrogate): JSON then
    return json.dumps(event).encode(), None  # NaN and Infinity as Python's json writes them


# --- the property -------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mutated(),
    st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
    st.booleans(),
)
def test_the_door_refuses_or_admits_only_what_every_hop_can_carry(
    case: tuple[str, dict[str, Any]], etype: str, as_msgpack: bool
) -> None:
    kind, obj = case
    subject = base(kind)[1]
    data, headers = encode({"type": etype, "object": obj}, as_msgpack)
    try:
        ev = decode_cluster_event(subject, data, headers, 7)
    except BadEvent as err:
        reason = str(err)
        event(f"refused: {reason.split(':', 1)[0][:40]}")
        reason.encode()  # the reason is sent back: it must be UTF-8, on one line
        assert reason and "\n" not in reason and "\r" not in reason
        return
    event(f"admitted {kind}")
    pack(ev.raw)
    # Routed alone (as after a restart), and as an update of the original object.
    for seen in (None, Informer()):
        if seen is not None:
            route(base_event(kind), SERVED, seen)
        to_queue, to_cache = route(ev, SERVED, seen)
        for item in [*to_queue, *to_cache]:
            pack(item)


def test_the_base_objects_are_valid_and_several_kilobytes() -> None:
    for kind in ("pod", "bound pod", "node"):
        ev = base_event(kind)
        assert ev.raw == base(kind)[0]
        assert len(json.dumps(ev.raw)) > (1500 if kind == "node" else 4000)
        assert route(ev, SERVED)[0 if kind != "bound pod" else 1]
