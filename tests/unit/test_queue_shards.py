"""Queue shards (shared/sharding.py QueueShard, docs/scale.md §4): each shard's names,
which pods it owns (the watcher shard of the same number's), and how watcher, workers
and binders route to the shards."""

from __future__ import annotations

from typing import Any

import nats
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.aio.msg import Msg
from nats.micro import add_service

from services.queue.inspect import merge_pending, pending_summary
from services.watcher.outbound import Outbound
from services.worker.pops import lane_batch, lane_shards
from shared import keys
from shared.api.events import ClusterEvent, decode_cluster_event
from shared.framework.events import EVENT_NODE_ADD
from shared.messages import report
from shared.podgroups import POD_GROUP_LABEL
from shared.routing import Informer, move, route
from shared.runtime.settings import Settings
from shared.runtime.watermark import Marker, Watermark, lost_at_takeover, only_lanes
from shared.sharding import (
    QueueShard,
    WatcherShard,
    by_pod_owner,
    pod_gang,
    pod_key_owner,
    queue_owner,
    queue_shards,
)
from shared.subjects import (
    QUEUE_EVENTS,
    QUEUE_NOMINATED,
    QUEUE_PENDING,
    QUEUE_POP,
    QUEUE_REPORT,
    QUEUE_SERVICE_NAME,
    QUEUE_STATS,
)
from shared.tools.cli.live import Instance, queue_pending
from shared.tools.cli.top import queue_counts, stats_subjects
from shared.tools.servers import Server
from shared.tools.synthetic import make_pod, make_workload_pod
from shared.wire import dump_json, unpack

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
NAME = st.lists(LABEL, min_size=1, max_size=3).map(".".join)  # dotted names too
SERVED = frozenset({"default-scheduler"})


def test_one_queue_is_named_as_before_sharding() -> None:
    one = Settings.from_env("queue", {}).queue_shard
    assert (one.lane, one.watcher_lane, one.sharded) == ("queue", "watcher", False)
    assert [one.subject(s) for s in (QUEUE_EVENTS, QUEUE_POP, QUEUE_REPORT, QUEUE_NOMINATED)] == [
        QUEUE_EVENTS,
        QUEUE_POP,
        QUEUE_REPORT,
        QUEUE_NOMINATED,
    ]
    assert (keys.queue_pods_key(one.lane), keys.queue_meta_key(one.lane)) == (
        keys.QUEUE_PODS,
        keys.QUEUE_META,
    )
    assert keys.QUEUE_PODS == "ksched:queue:pods" and keys.QUEUE_META == "ksched:queue:meta"


def test_a_queue_shard_has_its_own_lease_keys_subjects_and_lane() -> None:
    shard = Settings.from_env("queue", {"KSCHED_SHARDS": "3", "KSCHED_SHARD": "2"}).queue_shard
    assert (shard.lane, shard.watcher_lane) == ("queue.2", "watcher.2")
    assert shard.subject(QUEUE_POP) == "ksched.internal.queue.2.pop"
    assert shard.subject(QUEUE_EVENTS) == "ksched.internal.queue.2.events"
    assert shard.subject(QUEUE_PENDING) == "ksched.internal.queue.2.pending"
    assert keys.queue_pods_key(shard.lane) == "ksched:queue.2:pods"
    assert keys.state_key(shard.lane) == "ksched:queue.2:state"
    assert keys.lease_epoch_key(shard.lane) == "ksched:lease:queue.2:epoch"
    subjects = {q.subject(QUEUE_POP) for q in queue_shards(3)}
    assert len(subjects) == 3  # no shard answers another's pops


@pytest.mark.parametrize("shard", [-1, 3])
def test_a_queue_shard_out_of_range_is_refused(shard: int) -> None:
    with pytest.raises(ValueError, match="shard must be 0 to 2"):
        QueueShard(3, shard)


@given(st.integers(1, 5), LABEL, NAME)
def test_a_pod_s_queue_shard_is_the_watcher_shard_that_handles_it(
    shards: int, namespace: str, name: str
) -> None:
    key, subject = f"{namespace}/{name}", f"ksched.cluster.pods.{namespace}.{name}"
    owning = [s for s in range(shards) if QueueShard(shards, s).owns(key)]
    handling = [s for s in range(shards) if WatcherShard(shards, s).handles(subject)]
    assert owning == handling == [pod_key_owner(shards, key)]


def pod_keys_of(shard: int, shards: int, n: int) -> list[str]:
    keys_ = (f"ns-{i % 3}/web.v{i}.p-{i}" for i in range(1000))
    return [k for k in keys_ if pod_key_owner(shards, k) == shard][:n]


def test_the_watcher_sends_a_pod_to_its_shard_and_a_move_to_every_shard() -> None:
    a, b = pod_keys_of(0, 3, 1)[0], pod_keys_of(2, 3, 1)[0]
    out = Outbound(1 << 20, queue_shards=3)
    out.add(0, [{"op": "upsert", "key": a, "pod": {}}], [])
    out.add(1, [move(EVENT_NODE_ADD)], [])
    out.add(2, [{"op": "delete", "key": b}], [])

    def sent(shard: int, through: int | None) -> tuple[list[str], int | None, list[int]]:
        """What shard `shard` gets: its events (a pod's key, or "move"), the through
        its last message names, and the watch event each item came from."""
        bodies = [unpack(c.data) for c in out.queue_chunks({"epoch": 1}, through, shard)]
        events = [e.get("key", e["op"]) for body in bodies for e in body["events"]]
        return events, bodies[-1].get("through"), out.queue_for(shard)[1]

    assert sent(0, 42) == ([a, "move"], 42, [0, 1])
    assert sent(1, None) == (["move"], None, [1])  # another lane's: no through
    assert sent(2, None) == (["move", b], None, [1, 2])


def test_a_shard_with_nothing_of_a_batch_hears_only_its_own_through() -> None:
    out = Outbound(1 << 20, queue_shards=2)
    assert out.queue_chunks({"epoch": 1}, None, 1) == []  # another lane's: nothing at all
    (chunk,) = out.queue_chunks({"epoch": 1}, 7, 0)
    assert unpack(chunk.data) == {"epoch": 1, "through": 7, "events": []}


def test_unsharded_the_watcher_sends_everything_to_the_one_queue() -> None:
    out = Outbound(1 << 20)
    out.add(0, [{"op": "upsert", "key": "default/a", "pod": {}}, move(EVENT_NODE_ADD)], [])
    assert out.queue_for(0) == (out.queue, [0, 0])


@pytest.mark.parametrize(
    ("lanes", "shards", "popping"),
    [(2, 1, [0, 0]), (2, 2, [0, 1]), (2, 3, [0, 1, 2]), (2, 4, [0, 1, 2, 3])],
)
def test_a_worker_pops_from_every_shard(lanes: int, shards: int, popping: list[int]) -> None:
    assert [q.shard for q in lane_shards(lanes, shards)] == popping


def test_a_worker_s_pods_in_flight_are_split_over_its_lanes() -> None:
    assert lane_batch(64, 2, 2) == 64  # one shard: as before
    assert lane_batch(64, 2, 3) == 42
    assert lane_batch(64, 2, 4) == 32
    assert lane_batch(1, 2, 4) == 1  # never nothing


def test_reports_go_to_each_pod_s_shard_in_order() -> None:
    keys_ = pod_keys_of(0, 2, 2) + pod_keys_of(1, 2, 2)
    reports = [report(k, i, "assumed") for i, k in enumerate(keys_)]
    split = by_pod_owner(2, reports, lambda r: r["key"])
    assert {s: [r["cycle"] for r in rs] for s, rs in split.items()} == {0: [0, 1], 1: [2, 3]}


def test_a_queue_shard_s_takeover_judges_its_own_watcher_lane_only() -> None:
    marker = Marker(incarnation=5, applied=0, lanes={"watcher.0": 10})
    acked = {"watcher.0": 10, "watcher.1": 50}  # shard 1's pods went to queue shard 1
    assert lost_at_takeover(marker, acked) is not None
    assert lost_at_takeover(marker, only_lanes(acked, {"watcher.0"})) is None
    assert lost_at_takeover(marker, only_lanes({"watcher.0": 11}, {"watcher.0"})) is not None
    assert only_lanes(acked, None) == acked


def test_a_queue_shard_s_state_kept_under_another_shard_count_is_rebuilt() -> None:
    """The marker names the layout (the shard count's record) the state was written
    under: a queue started with another count finds its pods dealt differently."""
    marker = Marker(incarnation=5, applied=10, layout=7)
    acked = {"watcher.0": 10}
    assert lost_at_takeover(marker, acked, layout=7) is None
    assert lost_at_takeover(marker, acked, layout=9) is not None
    assert lost_at_takeover(Marker(incarnation=5, applied=10), acked, layout=7) is not None
    assert lost_at_takeover(marker, acked) is None  # unsharded state: none checked


class HashWrites:
    """The marker's writes a batch would make (its hset calls), one mapping each."""

    def __init__(self) -> None:
        self.writes: list[dict[str, int]] = []

    def hset(self, key: str, mapping: dict[str, int]) -> None:
        self.writes.append(dict(mapping))


def test_the_marker_carries_its_layout_in_whole_writes() -> None:
    mark = Watermark("queue.0")
    mark.start(5, 10)
    mark.layout = 7
    batch = HashWrites()
    mark.write(batch, whole=True)  # type: ignore[arg-type]
    assert Marker.of(batch.writes[-1]).layout == 7
    mark.write(batch)  # type: ignore[arg-type]  # a change: the layout stays as written
    assert "layout" not in batch.writes[-1]


def queue_instance(stats: str | None) -> Instance:
    endpoints = {"stats": stats} if stats else {}
    return Instance("queue", stats or "standby", "v", "h", "1", endpoints=endpoints)


def test_top_asks_every_queue_shard_leader_for_its_counts() -> None:
    one = [queue_instance(QUEUE_STATS), queue_instance(None)]
    assert stats_subjects(one) == [QUEUE_STATS]
    sharded = [queue_instance(QueueShard(2, s).subject(QUEUE_STATS)) for s in (1, 0)]
    assert stats_subjects([*sharded, queue_instance(None)]) == [
        "ksched.internal.queue.0.stats",
        "ksched.internal.queue.1.stats",
    ]
    assert stats_subjects([queue_instance(None)]) == [QUEUE_STATS]  # standby only: ask
    assert stats_subjects([]) == []


async def test_top_sums_the_shards_counts(nats_server: Server) -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    try:
        for s, active in ((0, 3), (1, 4)):

            async def answer(msg: Msg, active: int = active) -> None:
                await msg.respond(dump_json({"counts": {"active": active, "backoff": 1}}))

            await nc.subscribe(QueueShard(2, s).subject(QUEUE_STATS), cb=answer)
        subjects = [QueueShard(2, s).subject(QUEUE_STATS) for s in range(2)]
        assert await queue_counts(nc, subjects) == {"active": 7, "backoff": 2}
        assert await queue_counts(nc, ["ksched.internal.queue.9.stats"]) == {}  # none answers
    finally:
        await nc.close()


def pending_of(keys_: list[str], counts: dict[str, int]) -> dict[str, Any]:
    """A queue shard's `pending` reply holding these pods (services/queue/inspect.py)."""
    return {
        "pods": [{"key": k, "queue": "active"} for k in keys_],
        "total": len(keys_),
        "counts": counts,
        "summary": pending_summary(counts),
    }


def test_the_shards_pending_pods_merge_into_one_listing() -> None:
    zero = pending_of(["a/1", "a/2"], {"active": 2, "gated": 1})
    one = pending_of(["b/1"], {"active": 1, "unschedulable": 3})
    merged = merge_pending([zero, one], {})
    assert [p["key"] for p in merged["pods"]] == ["a/1", "a/2", "b/1"]
    assert merged["total"] == 3
    assert merged["counts"] == {"active": 3, "gated": 1, "unschedulable": 3}
    assert merged["summary"] == "activeQ:3; backoffQ:0; unschedulablePods:4"
    assert [p["key"] for p in merge_pending([zero, one], {"limit": 2})["pods"]] == ["a/1", "a/2"]
    assert merge_pending([zero], {}) == zero  # one queue: its own reply


async def test_the_pending_listing_asks_every_queue_shard_leader(nats_server: Server) -> None:
    """`queue_pending` finds each shard leader's `pending` endpoint by discovery and
    merges their answers; a standby (no endpoint) is not asked."""
    nc = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    try:
        for s in (0, 1):

            async def pending(req: Any, s: int = s) -> None:
                await req.respond(dump_json(pending_of([f"ns/p{s}"], {"active": 1})))

            svc = await add_service(nc, name=QUEUE_SERVICE_NAME, version="0.0.1")
            subject = QueueShard(2, s).subject(QUEUE_PENDING)
            await svc.add_endpoint(name="pending", subject=subject, handler=pending)
        await add_service(nc, name=QUEUE_SERVICE_NAME, version="0.0.1")  # a standby
        listing = await queue_pending(nc)
        assert sorted(p["key"] for p in listing["pods"]) == ["ns/p0", "ns/p1"]
        assert (listing["total"], listing["counts"]) == (2, {"active": 2})
    finally:
        await nc.close()


# --- a gang's pods: all in its gang's queue shard ------------------------------------


def names_in_shards(shards: int, prefix: str = "w") -> list[str]:
    """A pod name in namespace default for each queue shard by partition, in order."""
    return [
        next(
            f"{prefix}-{i}"
            for i in range(1000)
            if pod_key_owner(shards, f"default/{prefix}-{i}") == s
        )
        for s in range(shards)
    ]


def gang_pods(shards: int) -> list[dict[str, Any]]:
    """One pod of each kind of gang per partition's shard: Workload, v1alpha2 PodGroup
    (schedulingGroup) and scheduler-plugins PodGroup (label)."""
    names = names_in_shards(shards)
    workload = [make_workload_pod(n, "job", "workers") for n in names]
    grouped = [make_pod(f"{n}.g") for n in names]
    for pod in grouped:
        pod["spec"]["schedulingGroup"] = {"podGroupName": "grp"}
    labelled = [make_pod(f"{n}.l", labels={POD_GROUP_LABEL: "train"}) for n in names]
    return workload + grouped + labelled


@pytest.mark.parametrize("shards", [2, 3])
def test_every_pod_of_a_gang_goes_to_its_gang_s_queue_shard(shards: int) -> None:
    pods = gang_pods(shards)
    out = Outbound(1 << 20, queue_shards=shards)
    items = []
    for i, pod in enumerate(pods):
        queue, _ = route(routing_event(pod, seq=i + 1), SERVED)
        items += queue
        out.add(i, queue, [])
    gangs = {e["gang"] for e in items}
    assert gangs == {"default/job/workers", "default/PodGroup:grp", "default/train"}
    for gang in gangs:
        owner = queue_owner(shards, "", gang)
        members = [e["key"] for e in items if e["gang"] == gang]
        assert len({pod_key_owner(shards, k) for k in members}) == shards  # partitions differ
        for s in range(shards):  # the gang's shard gets every member; the others, none
            got = {unpack(b)["key"] for b in out.queue_for(s)[0]} & set(members)
            assert got == (set(members) if s == owner else set())
            assert {QueueShard(shards, s).owns(k, gang) for k in members} == {s == owner}


def test_a_gang_pod_s_delete_and_binding_go_to_its_gang_s_shard() -> None:
    pod = gang_pods(2)[1]
    (delete,) = route(routing_event(pod, "DELETED"), SERVED)[0]
    assert delete == {
        "op": "delete",
        "key": f"default/{name_of(pod)}",
        "gang": "default/job/workers",
    }
    pod["spec"]["nodeName"] = "n1"
    assigned, *_ = route(routing_event(pod), SERVED)[0]
    assert (assigned["op"], assigned["gang"]) == ("assigned", "default/job/workers")
    solo = make_pod(names_in_shards(2)[1])
    assert "gang" not in route(routing_event(solo), SERVED)[0][0]  # no gang: no field


def test_reports_of_a_gang_s_pods_go_to_its_gang_s_shard() -> None:
    pods = {f"default/{name_of(p)}": p for p in gang_pods(2)[:2]}  # the Workload's members
    reports = [report(k, i, "error") for i, k in enumerate(pods)]
    split = by_pod_owner(2, reports, lambda r: r["key"], lambda r: pod_gang(pods[r["key"]]))
    assert list(split) == [queue_owner(2, "", "default/job/workers")]
    assert [r["cycle"] for r in next(iter(split.values()))] == [0, 1]


def routing_event(obj: dict[str, Any], etype: str = "ADDED", seq: int = 7) -> ClusterEvent:
    meta = obj["metadata"]
    subject = f"ksched.cluster.pods.{meta['namespace']}.{meta['name']}"
    return decode_cluster_event(subject, dump_json({"type": etype, "object": obj}), None, seq)


def name_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def coscheduled(name: str, group: str = "") -> dict[str, Any]:
    return make_pod(name, labels={POD_GROUP_LABEL: group} if group else None)


def queue_items(seen: Informer, pod: dict[str, Any], etype: str = "MODIFIED") -> list[str]:
    """The pod's queue items as '<op>@<queue shard>'."""
    queue, _ = route(routing_event(pod, etype), SERVED, seen)
    n = seen.queue_shards
    return [f"{e['op']}@{queue_owner(n, e['key'], e.get('gang', ''))}" for e in queue]


def test_a_pod_whose_pod_group_label_changes_leaves_the_shard_that_held_it() -> None:
    """Coscheduling's label is mutable: a pending pod that joins, changes or leaves a
    gang is deleted at the queue shard that held it, upserted at its new one."""
    name = names_in_shards(2)[0]  # its partition's shard: 0
    train = next(g for g in (f"g{i}" for i in range(100)) if queue_owner(2, "", f"default/{g}"))
    seen = Informer(queue_shards=2)
    assert queue_items(seen, coscheduled(name), "ADDED") == ["upsert@0"]
    assert queue_items(seen, coscheduled(name, train)) == ["delete@0", "upsert@1"]
    assert queue_items(seen, coscheduled(name, train)) == ["upsert@1"]  # no change: no delete
    assert queue_items(seen, coscheduled(name)) == ["delete@1", "upsert@0"]
    assert queue_items(seen, coscheduled(name)) == ["upsert@0"]
    assert seen.pending_gangs == {}


def test_one_queue_hears_no_deletes_when_a_pod_group_label_changes() -> None:
    seen = Informer()
    assert queue_items(seen, coscheduled("p"), "ADDED") == ["upsert@0"]
    assert queue_items(seen, coscheduled("p", "train")) == ["upsert@0"]
    assert seen.pending_gangs == {}  # nothing remembered either
