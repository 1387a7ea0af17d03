"""A lane's pops, carrying its last batch's reports to the queue.

A worker reports each batch's outcomes (kube's assumed, unschedulable, error) to the
queue, then pops its next batch: the reports ride on that pop (one request, and one
queue write, where there were two). The queue applies them before it pops and answers
only once they are written; so until a pop is answered, its reports are kept and ride
on the next one too (a report applied twice changes nothing at the queue). Reports too
large for one pop message go first on their own (QUEUE_REPORT), as the binder's do.

With queue shards (shared/sharding.py) each lane pops from one shard, so its reports,
which name only the pods that shard handed out, go back to that shard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS

from shared.messages import Report
from shared.runtime.rpc import chunks_for, request, request_all, request_packed
from shared.sharding import QueueShard, queue_shards
from shared.subjects import QUEUE_POP, QUEUE_REPORT

UNSHARDED_QUEUE = QueueShard()


@dataclass
class Outcomes:
    """A batch's reports to the queue, and the move they ask for (an event label)."""

    reports: list[Report] = field(default_factory=list)
    move: str | None = None


async def report(nc: NATS, outcomes: Outcomes, shard: QueueShard = UNSHARDED_QUEUE) -> None:
    """The reports on their own (QUEUE_REPORT of `shard`), in as many requests as they
    need."""
    if outcomes.reports:
        head = {"move": outcomes.move} if outcomes.move else None
        subject = shard.subject(QUEUE_REPORT)
        await request_all(nc, subject, outcomes.reports, "reports", head, timeout=10)


def lane_shards(lanes: int, shards: int) -> list[QueueShard]:
    """The queue shard each of a worker's lanes pops from: at least `lanes` lanes, and
    one per shard, so that every shard has a long poll in flight from each worker."""
    every = queue_shards(shards)
    return [every[i % shards] for i in range(max(lanes, shards))]


def lane_batch(batch: int, lanes: int, total: int) -> int:
    """A lane's share of a batch sized for `lanes` lanes when `total` run: the worker's
    pods in flight stay as many however many shards it pops from."""
    return max(1, batch * lanes // max(total, 1))


class Pops:
    """Pops with the unreported outcomes riding on them."""

    def __init__(self, nc: NATS, timeout: float, shard: QueueShard = UNSHARDED_QUEUE) -> None:
        self.nc = nc
        self.timeout = timeout
        self.shard = shard  # the queue shard it pops from, and reports to
        self.unreported = Outcomes()

    def carry(self, outcomes: Outcomes) -> None:
        """Reports for the next pop."""
        self.unreported = outcomes

    async def pop(self, limit: int, wait_ms: int) -> Any:
        """The queue's reply to a pop of up to `limit` pods; raises (the reports kept
        for the next pop) when the queue did not answer."""
        head: dict[str, Any] = {
            "max": limit,
            "wait_ms": wait_ms,
            "timeout_ms": int(self.timeout * 1000),
        }
        subject = self.shard.subject(QUEUE_POP)
        outcomes = self.unreported
        if outcomes.reports:
            with_reports = {**head, "move": outcomes.move} if outcomes.move else head
            chunks = chunks_for(self.nc, outcomes.reports, "reports", with_reports)
            if len(chunks) == 1:
                reply = await request_packed(self.nc, subject, chunks[0].data, self.timeout)
                self.unreported = Outcomes()
                return reply
            await report(self.nc, outcomes, self.shard)
            self.unreported = Outcomes()
        return await request(self.nc, subject, head, self.timeout)

    async def report(self) -> None:
        """The unreported outcomes on their own (a stopping lane's)."""
        await report(self.nc, self.unreported, self.shard)
