"""A worker's snapshot fed the cache's node-change messages (services/cache/feed.py,
applied by Snapshot.apply_feed: pods counted from the numbers the delta carries, their
NodeInfos changed in place, the columns rewritten only where counts moved) ends every
write exactly as the nodes read whole from the records the cache stored in Redis
(NodeInfo.from_record, what a refresh decodes) plus the worker's own uncommitted
assumptions, for random pod additions, removals, updates and bindings of pods with host
ports, scalar and ephemeral resources, init containers, overhead and pod
(anti-)affinity, and local assumptions committed (the reply before or after the
feed's message) or forgotten."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.cache.feed import NodeFeed
from shared.framework.columns import NodeColumns
from shared.framework.types import NodeInfo, PodInfo, PodResources
from shared.snapshot import Snapshot
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack, unpack

NODES = ("n0", "n1", "n2")
INCARNATION = 7
SCALAR = "example.com/gpu"
RESOURCES = ("cpu", "memory", "ephemeral-storage", SCALAR)


class _Sink:
    max_payload = 1 << 20

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def publish(self, subject: str, data: bytes) -> None:
        self.sent.append(data)


@st.composite
def pod_specs(draw: st.DrawFn) -> dict[str, Any]:
    """What a pod asks of a node, in every form NodeInfo accounting reads."""
    requests = {"cpu": draw(st.sampled_from(["0", "100m", "250m", "1"]))}
    if draw(st.booleans()):
        requests["memory"] = draw(st.sampled_from(["64Mi", "500Mi", "1Gi"]))
    if draw(st.booleans()):
        requests["ephemeral-storage"] = draw(st.sampled_from(["1Gi", "2Gi"]))
    if draw(st.booleans()):
        requests[SCALAR] = draw(st.sampled_from(["1", "2"]))
    container: dict[str, Any] = {"name": "app", "image": "x", "resources": {"requests": requests}}
    ports = draw(st.lists(st.sampled_from([80, 443, 8080]), max_size=2, unique=True))
    if ports:
        container["ports"] = [
            {"containerPort": p, "hostPort": p, "protocol": draw(st.sampled_from(["TCP", "UDP"]))}
            for p in ports
        ]
    spec: dict[str, Any] = {"containers": [container]}
    if draw(st.booleans()):
        spec["initContainers"] = [
            {
                "name": "init",
                "image": "x",
                "resources": {"requests": {"cpu": draw(st.sampled_from(["500m", "2"]))}},
            }
        ]
    if draw(st.booleans()):
        spec["overhead"] = {"cpu": "50m", "memory": "10Mi"}
    affinity = draw(st.sampled_from([None, "affinity", "anti", "preferred-anti"]))
    term = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}
    if affinity == "affinity":
        spec["affinity"] = {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    elif affinity == "anti":
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    elif affinity == "preferred-anti":
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": term}
                ]
            }
        }
    return spec


# (op, node index, pod index, spec, the commit's ack before its message): at the
# cache, add a new pod or a new content of one, remove one, or re-version one (its
# binding seen); at the worker, assume a pod locally, then the cache commits it, or the
# worker forgets it.
ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "remove", "bind", "assume", "commit", "forget"]),
        st.integers(0, len(NODES) - 1),
        st.integers(0, 5),
        pod_specs(),
        st.booleans(),
    ),
    min_size=1,
    max_size=25,
)


class _Cache:
    """The cache's side: its NodeInfos, the records it stores, the feed it publishes."""

    def __init__(self) -> None:
        self.nodes = {name: NodeInfo(name) for name in NODES}
        for name, info in self.nodes.items():
            info.set_node(make_node(name))
        self.generation = 0
        self.version = 0
        self.feed = NodeFeed()
        self.sink = _Sink()
        self.write(list(NODES))  # the first write after a takeover: published by Redis

    def records(self) -> dict[str, bytes]:
        return {name: pack(info.to_record()) for name, info in self.nodes.items()}

    def write(self, names: list[str]) -> bytes | None:
        self.generation += 1
        for name in names:
            self.nodes[name].generation = self.generation
        records = {name: pack(self.nodes[name].to_record()) for name in names}
        self.feed.stage(self.generation, self.nodes, records, {})
        before = len(self.sink.sent)
        asyncio.run(self.feed.publish(self.sink, INCARNATION))  # type: ignore[arg-type]
        return self.sink.sent[-1] if len(self.sink.sent) > before else None

    def pod(self, name: str, node: str, spec: dict[str, Any]) -> PodInfo:
        self.version += 1
        raw = make_pod(name, node=node, labels={"app": "a"})
        raw["spec"] |= spec
        return PodInfo.of(raw, self.version)

    def change(self, op: str, node: str, pod: int, spec: dict[str, Any]) -> None:
        info = self.nodes[node]
        key = f"default/p{node}-{pod}"
        self.version += 1
        if op == "put":
            info.add_pod(self.pod(f"p{node}-{pod}", node, spec))
        elif op == "remove":
            info.remove_pod(key)
        elif key in info.pods:
            info.add_pod(info.pods[key].with_version(self.version))


def _counts(info: NodeInfo) -> tuple[Any, ...]:
    """Everything a NodeInfo counts, and its pods as plugins read them."""
    return (
        info.generation,
        dict(info.requested),
        info.nonzero_cpu,
        info.nonzero_memory,
        dict(info.used_ports),
        info.affinity_pods,
        info.anti_affinity_pods,
        {key: (p.version, p.slim_bytes) for key, p in info.pods.items()},
    )


def _column_rows(cols: NodeColumns) -> dict[str, list[int]]:
    rows = {
        "num_pods": cols.num_pods.tolist(),
        "nonzero_cpu": cols.nonzero_cpu.tolist(),
        "nonzero_memory": cols.nonzero_memory.tolist(),
        "has_ports": cols.has_ports.astype(np.int64).tolist(),
    }
    for res in RESOURCES:
        rows[res] = cols.requested(res).tolist()
    return rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_fed_snapshot_equals_the_records_read_whole(changes: list[Any]) -> None:
    cache = _Cache()
    snap = Snapshot(aioredis.Redis())  # never connects: only the feed is applied
    snap.incarnation, snap.generation = INCARNATION, cache.generation
    snap._apply(snap._decode_all(list(cache.records().items())))
    for res in RESOURCES:  # columns built now are kept up to date by every change
        snap.cluster().columns.requested(res)
    local: dict[str, tuple[str, PodInfo]] = {}  # assumed here, not committed: key -> node, pod
    for op, node, pod, spec, ack_first in changes:
        name = NODES[node]
        ack = None
        if op == "assume":  # a pod of its own: never one the cache holds already
            assumed = cache.pod(f"a{cache.version}", name, spec)
            local[assumed.key] = (name, assumed)
            snap.assume(assumed, name)
        elif op in ("forget", "commit") and local:
            key = next(iter(local))  # the oldest assumption: its own node, not `name`
            name, assumed = local.pop(key)
            if op == "forget":
                snap.forget(assumed, name)
            else:
                cache.nodes[name].add_pod(assumed)  # the cache assumes the same pod
                ack = key
        elif op not in ("assume", "forget", "commit"):
            cache.change(op, name, pod, spec)
        data = cache.write([name])
        assert data is not None
        if ack and ack_first:  # the commit's reply may come before the feed's message
            snap.committed(ack, cache.generation)
        snap.receive(data)
        assert snap.apply_feed() == 1  # by the feed, not by Redis
        if ack and not ack_first:
            snap.committed(ack, cache.generation)
        fresh = {n: NodeInfo.from_record(unpack(rec)) for n, rec in cache.records().items()}
        for assumed_on, assumed in local.values():  # the worker counts its own too
            fresh[assumed_on].add_pod(assumed)
        for node_name, info in fresh.items():
            assert _counts(snap.nodes[node_name]) == _counts(info)
        for p in snap.nodes[name].pods.values():
            # what was counted from the delta is what parsing the pod gives
            assert p.resources == PodResources.of(p.raw)
            assert p.has_affinity == PodInfo.lazy(p.raw).has_affinity
            assert p.has_required_anti_affinity == PodInfo.lazy(p.raw).has_required_anti_affinity
        columns = snap.cluster().columns
        assert _column_rows(columns) == _column_rows(
            NodeColumns([fresh[n.name] for n in columns.infos])
        )


def test_a_fed_pod_is_counted_without_being_unpacked() -> None:
    """Most pods on a node are only counted: the delta's numbers suffice, and the slim
    form is unpacked when a plugin first reads the pod (its labels, here)."""
    cache = _Cache()
    snap = Snapshot(aioredis.Redis())
    snap.incarnation, snap.generation = INCARNATION, cache.generation
    snap._apply(snap._decode_all(list(cache.records().items())))
    before = snap.cluster().nodes[0]
    cache.change("put", "n0", 1, {})
    snap.receive(cache.write(["n0"]) or b"")
    assert snap.apply_feed() == 1
    info = snap.nodes["n0"]
    assert info is before  # changed in place, not copied
    pod = info.pods["default/pn0-1"]
    assert pod._raw is None and info.nonzero_cpu == 100 and info.num_pods == 1
    assert snap.cluster().columns.nonzero_cpu[0] == 100
    assert pod.pod.metadata.labels == {"app": "a"}  # read: unpacked then
