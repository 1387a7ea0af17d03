"""Moves sent to the queue shards from outside the watcher's event stream: room freed
where no watch event tells of it (an assumption forgotten, fenced or expired), for
which kube moves the unschedulable pods with AssignedPodDelete."""

from __future__ import annotations

import logging

from nats.aio.client import Client as NATS

from shared.framework.events import event_label
from shared.framework.interface import ClusterEvent
from shared.runtime.rpc import request
from shared.sharding import QueueShard, queue_shards
from shared.subjects import QUEUE_REPORT

log = logging.getLogger("ksched.moves")


async def move_at_queue_shards(
    nc: NATS, shards: int, event: ClusterEvent, skip: QueueShard | None = None
) -> None:
    """Each queue shard but `skip` asked once: a shard failing over meanwhile is not
    waited for (its pods that miss this move still leave unschedulable within the
    leftover flush, UNSCHEDULABLE_FLUSH_SECONDS)."""
    body = {"reports": [], "move": event_label(event)}
    for shard in queue_shards(shards):
        if shard != skip:
            try:
                await request(nc, shard.subject(QUEUE_REPORT), body)
            except Exception as err:
                log.warning("move not sent to %s: %s", shard.lane, err)
