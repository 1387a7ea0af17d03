"""A worker lane's pops carry its last batch's reports until the queue answered one
(services/worker/pops.py), over a real nats-server; the test plays the queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout

from services.worker.pops import Outcomes, Pops
from shared.messages import report
from shared.subjects import QUEUE_POP, QUEUE_REPORT
from shared.tools.servers import Server
from shared.wire import pack, unpack


@pytest.fixture
async def nc(nats_server: Server) -> AsyncIterator[NATS]:
    client = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    yield client
    await client.close()


class FakeQueue:
    """Answers pops (but drops the first `drop`) and reports; records every body."""

    def __init__(self, drop: int = 0) -> None:
        self.drop = drop
        self.pops: list[dict[str, Any]] = []
        self.reports: list[dict[str, Any]] = []

    async def start(self, nc: NATS) -> None:
        await nc.subscribe(QUEUE_POP, cb=self.on_pop)
        await nc.subscribe(QUEUE_REPORT, cb=self.on_report)

    async def on_pop(self, msg: Msg) -> None:
        self.pops.append(unpack(msg.data))
        if self.drop:
            self.drop -= 1  # its reply is lost
            return
        await msg.respond(pack({"pods": [], "nominated_version": 0}))

    async def on_report(self, msg: Msg) -> None:
        self.reports.append(unpack(msg.data))
        await msg.respond(pack({"accepted": len(self.reports[-1]["reports"])}))


async def test_reports_ride_on_pops_until_one_is_answered(nc: NATS) -> None:
    queue = FakeQueue(drop=1)
    await queue.start(nc)
    pops = Pops(nc, timeout=0.5)
    reports = [report("default/a", 7, "assumed"), report("default/b", 8, "unschedulable", "no")]
    pops.carry(Outcomes(reports, "AssignedPodDelete"))

    with pytest.raises(NatsTimeout):
        await pops.pop(10, 0)  # the reply is lost: the reports stay
    assert (await pops.pop(10, 0))["pods"] == []
    await pops.pop(10, 0)

    carried = [(p.get("reports"), p.get("move")) for p in queue.pops]
    assert carried == [(reports, "AssignedPodDelete")] * 2 + [(None, None)]
    assert all((p["max"], p["wait_ms"]) == (10, 0) for p in queue.pops)
    assert queue.reports == []  # no request of their own


async def test_reports_too_large_for_a_pop_go_on_their_own_first(nc: NATS) -> None:
    queue = FakeQueue()
    await queue.start(nc)
    pops = Pops(nc, timeout=2)
    message = "x" * (nc.max_payload // 4)
    reports = [report(f"default/p{i}", i, "error", message) for i in range(6)]
    pops.carry(Outcomes(reports))

    await pops.pop(10, 0)
    await asyncio.sleep(0)
    assert [r for body in queue.reports for r in body["reports"]] == reports
    assert len(queue.reports) > 1  # as many requests as the server's max payload needs
    assert "reports" not in queue.pops[0]
    await pops.pop(10, 0)
    assert len(queue.reports) > 1 and "reports" not in queue.pops[1]  # sent once
