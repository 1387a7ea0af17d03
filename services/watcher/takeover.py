"""A new watcher leader takes the cluster stream over from its predecessor.

Each leader consumes through its own durable consumer, `watcher-<epoch>` (a shard's:
`watcher-<s>-<epoch>`, shared/sharding.py), started just past the predecessor's ack
floor; the predecessor's consumers are deleted. A shard takes over from its own
predecessors only: the other shards' consumers are theirs.
So the batch a killed leader had fetched but not acked is delivered again at
once (not after ack_wait, and not acked away by the successor's ack-all), and a
deposed leader that has not noticed yet can neither fetch nor ack any more: its
consumer is gone (the watcher's half of fencing; queue and cache also refuse
its epoch).

A leader whose consumer skipped deliveries (lost with a NATS server, see
runtime/consume.py Deliveries) rewinds it: the same consumer, created again just
past the last message the leader handled.
"""

from __future__ import annotations

import contextlib
import logging

from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from shared.runtime.watermark import acked_through, watcher_consumers
from shared.sharding import UNSHARDED, WatcherShard, consumer_lane
from shared.subjects import CLUSTER_PREFIX, CLUSTER_STREAM

log = logging.getLogger("ksched.watcher")


def consumer_config(name: str, after: int, filters: list[str] | None = None) -> ConsumerConfig:
    """A leader's consumer, from just past `after`, taking `filters` of the cluster
    stream (WatcherShard.filter_subjects; one filter goes as nats-server < 2.10 knows)."""
    start = (
        {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": after + 1}
        if after
        else {"deliver_policy": DeliverPolicy.ALL}
    )
    filters = filters or [f"{CLUSTER_PREFIX}.>"]
    subjects = {"filter_subject": filters[0]} if len(filters) == 1 else {"filter_subjects": filters}
    return ConsumerConfig(
        durable_name=name,
        **subjects,
        ack_policy=AckPolicy.ALL,
        ack_wait=60,
        max_ack_pending=20_000,
        **start,
    )


async def take_over(
    js: JetStreamContext,
    epoch: int,
    shard: WatcherShard = UNSHARDED,
    filters: list[str] | None = None,
) -> str:
    """Create this leader's consumer (taking `filters` of the stream) and delete its
    shard's predecessors'; returns its name."""
    name = shard.consumer_name(epoch)
    infos = [c for c in await watcher_consumers(js) if consumer_lane(c.name) == shard.lane]
    previous = [c for c in infos if c.name != name]
    after = acked_through(previous)
    if not any(c.name == name for c in infos):
        await js.add_consumer(CLUSTER_STREAM, consumer_config(name, after, filters))
    for old in previous:
        with contextlib.suppress(Exception):  # already gone: deleted by a racing leader
            await js.delete_consumer(CLUSTER_STREAM, old.name)
    log.info("consuming the cluster stream as %s from sequence %d", name, after + 1)
    return name


async def rewind_point(js: JetStreamContext, name: str, handled: int) -> int | None:
    """Where this leader's consumer starts again: just past `handled`, or past its ack
    floor if further; None when the consumer is gone: a successor deleted it, so this
    leader is deposed and must not bring it back."""
    try:
        info = await js.consumer_info(CLUSTER_STREAM, name)
    except NotFoundError:
        return None
    return max(handled, info.ack_floor.stream_seq if info.ack_floor else 0)


async def rewind(
    js: JetStreamContext, name: str, after: int, filters: list[str] | None = None
) -> None:
    """Create this leader's consumer again, delivering from just past `after`; safe to
    retry (a consumer already deleted, or already created again, is made once more)."""
    with contextlib.suppress(NotFoundError):
        await js.delete_consumer(CLUSTER_STREAM, name)
    await js.add_consumer(CLUSTER_STREAM, consumer_config(name, after, filters))
    log.warning("deliveries lost with a server: %s starts again from sequence %d", name, after + 1)
