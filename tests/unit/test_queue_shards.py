"""Queue shards (shared/sharding.py QueueShard, docs/scale.md §4): each shard's names,
which pods it owns (the watcher shard of the same number's), and how watcher, workers
and binders route to the shards."""

from __future__ import annotations

import nats
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.aio.msg import Msg

from services.watcher.outbound import Outbound
from services.worker.pops import lane_batch, lane_shards
from shared import keys
from shared.framework.events import EVENT_NODE_ADD
from shared.messages import report
from shared.routing import move
from shared.runtime.settings import Settings
from shared.runtime.watermark import Marker, lost_at_takeover, only_lanes
from shared.sharding import QueueShard, WatcherShard, by_pod_owner, pod_key_owner, queue_shards
from shared.subjects import (
    QUEUE_EVENTS,
    QUEUE_NOMINATED,
    QUEUE_PENDING,
    QUEUE_POP,
    QUEUE_REPORT,
    QUEUE_STATS,
)
from shared.tools.cli.live import Instance
from shared.tools.cli.top import queue_counts, stats_subjects
from shared.tools.servers import Server
from shared.wire import dump_json, unpack

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
NAME = st.lists(LABEL, min_size=1, max_size=3).map(".".join)  # dotted names too


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
