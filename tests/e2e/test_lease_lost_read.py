"""A leader's renewal whose read of the lease bucket was lost with its NATS server (the
server took it and died before answering) asks again on the next connection, within the
renew deadline. It used to wait on the lost answer until the deadline passed, and lost
its lease: what the leader of watcher, queue or cache met when a NATS server of the
cluster it was connected to, or the lease bucket's Raft leader, was killed."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS

from shared.runtime.connections import connect_nats
from shared.runtime.elector import LeaderElector, LeaseClients
from shared.runtime.lease import LeaseConfig, Role
from shared.runtime.leasestore import LeaseStore, ensure_lease_bucket
from shared.tools.servers import Server, restart, start_nats
from tests.e2e.state import eventually

pytestmark = pytest.mark.e2e

# Room for a nats-server to start again on a loaded machine, within the renew deadline;
# a lost read is waited on for longer than that (as the services' 5 s request timeout
# outlasts the tests' 2 s deadline), so only asking again keeps the lease.
CONFIG = LeaseConfig(lease_duration=30.0, renew_deadline=20.0, retry_period=0.5)
REQUEST_TIMEOUT = 60.0


@pytest.fixture
async def dying_nats(tmp_path: Path) -> AsyncIterator[list[Server]]:
    """A nats-server of the test's own, which it kills and starts again (the last of the
    list is the one running)."""
    servers = [start_nats(tmp_path)]
    yield servers
    servers[-1].stop()


async def test_a_renewal_whose_read_was_lost_with_its_server_asks_again(
    dying_nats: list[Server], redis: aioredis.Redis
) -> None:
    server = dying_nats[0]
    nc = await connect_nats([f"nats://127.0.0.1:{server.port}"], "lease-test")
    try:
        js = nc.jetstream(timeout=REQUEST_TIMEOUT)
        await ensure_lease_bucket(js, 1)
        store = await LeaseStore.open(js)
        elector = LeaderElector(LeaseClients(store, redis), "queue", "me", CONFIG)
        await elector.acquire()
        renewals = elector.lease.record.renew_count if elector.lease.record else 0

        server.proc.send_signal(signal.SIGSTOP)  # takes what is sent, answers nothing
        assert await eventually(lambda: _stopped(server.proc.pid), 5), "not frozen"
        sent = nc.stats["out_msgs"]
        renewing = asyncio.create_task(elector.try_once())
        assert await eventually(lambda: _read_sent(nc, sent), 5), "the read was not sent"
        server.proc.kill()  # the read dies with it, unanswered
        server.proc.wait()
        dying_nats.append(await asyncio.to_thread(restart, server))

        await renewing
        assert elector.lease.role is Role.LEADING, elector.lease.lost_because
        record, _ = await store.read("queue")
        assert record is not None and record.holder == "me"
        assert record.renew_count == renewals + 1  # renewed by that very try
    finally:
        await nc.close()


async def _stopped(pid: int) -> bool:
    """Every thread of the process is stopped: before that, one may still answer."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        with contextlib.suppress(OSError):
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
    return bool(states) and all(state in ("T", "t") for state in states)


async def _read_sent(nc: NATS, before: int) -> bool:
    """The try's read is out of the client: published and flushed to the socket."""
    return nc.stats["out_msgs"] > before and nc.pending_data_size == 0
