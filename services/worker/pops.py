"""A lane's pops, carrying its last batch's reports to the queue.

A worker reports each batch's outcomes (kube's assumed, unschedulable, error) to the
queue, then pops its next batch: the reports ride on that pop (one request, and one
queue write, where there were two). The queue applies them before it pops and answers
only once they are written; so until a pop is answered, its reports are kept and ride
on the next one too (a report applied twice changes nothing at the queue). Reports too
large for one pop message go first on their own (QUEUE_REPORT), as the binder's do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS

from shared.messages import Report
from shared.runtime.rpc import chunks_for, request, request_all, request_packed
from shared.subjects import QUEUE_POP, QUEUE_REPORT


@dataclass
class Outcomes:
    """A batch's reports to the queue, and the move they ask for (an event label)."""

    reports: list[Report] = field(default_factory=list)
    move: str | None = None


async def report(nc: NATS, outcomes: Outcomes) -> None:
    """The reports on their own (QUEUE_REPORT), in as many requests as they need."""
    if outcomes.reports:
        head = {"move": outcomes.move} if outcomes.move else None
        await request_all(nc, QUEUE_REPORT, outcomes.reports, "reports", head, timeout=10)


class Pops:
    """Pops with the unreported outcomes riding on them."""

    def __init__(self, nc: NATS, timeout: float) -> None:
        self.nc = nc
        self.timeout = timeout
        self.unreported = Outcomes()

    def carry(self, outcomes: Outcomes) -> None:
        """Reports for the next pop."""
        self.unreported = outcomes

    async def pop(self, limit: int, wait_ms: int) -> Any:
        """The queue's reply to a pop of up to `limit` pods; raises (the reports kept
        for the next pop) when the queue did not answer."""
        head: dict[str, Any] = {"max": limit, "wait_ms": wait_ms}
        outcomes = self.unreported
        if outcomes.reports:
            with_reports = {**head, "move": outcomes.move} if outcomes.move else head
            chunks = chunks_for(self.nc, outcomes.reports, "reports", with_reports)
            if len(chunks) == 1:
                reply = await request_packed(self.nc, QUEUE_POP, chunks[0].data, self.timeout)
                self.unreported = Outcomes()
                return reply
            await report(self.nc, outcomes)
            self.unreported = Outcomes()
        return await request(self.nc, QUEUE_POP, head, self.timeout)
