"""A leader's renewal whose write the lease bucket leaves unanswered reads again within
the same try, and renews. The write used to be waited on until the renew deadline: a
write lost when the bucket's Raft leader stepped down (a frozen server thawing into a
group that had elected another) cost the leader its lease to a standby that met the same
silence, which takes over a lease duration less the renew deadline after the bucket
answers it (one of two ways test_lease_silent_store could lose the watcher's lease, as
it did once in CI; docs/reliability.md, "A silent lease store").

The bucket is a real nats-server's; only the delivery of one write is held back, by a
LeaseStore that keeps the first renewal it is given (a lost write, or one that lands
late)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS

from shared.runtime.connections import connect_nats
from shared.runtime.elector import LeaderElector, LeaseClients
from shared.runtime.lease import LeaseConfig, LeaseRecord, Role
from shared.runtime.leasestore import LeaseStore, ensure_lease_bucket
from shared.tools.servers import Server

pytestmark = pytest.mark.e2e

# kube-scheduler's lease duration and renew deadline, retried often: waiting on the held
# write spends the try's whole budget (the renew deadline) without a renewal.
CONFIG = LeaseConfig(lease_duration=15.0, renew_deadline=10.0, retry_period=0.5)


class HoldingStore(LeaseStore):
    """Holds back the first renewal written through it: never sent (`lands_late`
    False), or sent just before the next write (`lands_late`), which then finds the
    revision it read moved by our own late copy."""

    def __init__(self, store: LeaseStore, *, lands_late: bool) -> None:
        super().__init__(store._kv)
        self.lands_late = lands_late
        self.writes = 0
        self._held: tuple[LeaseRecord, int] | None = None

    async def write(self, name: str, record: LeaseRecord, revision: int) -> int:
        self.writes += 1
        if self.writes == 1:
            self._held = (record, revision)
            await asyncio.Event().wait()  # unanswered: the try gives it up
        if self.lands_late and self._held is not None:
            late, self._held = self._held, None
            await super().write(name, *late)
        return await super().write(name, record, revision)


@pytest.fixture
async def store(nats_server: Server) -> AsyncIterator[LeaseStore]:
    nc: NATS = await connect_nats([f"nats://127.0.0.1:{nats_server.port}"], "lease-test")
    js = nc.jetstream(timeout=10)
    await ensure_lease_bucket(js, 1)
    yield await LeaseStore.open(js)
    await nc.close()


@pytest.mark.parametrize("lands_late", [False, True], ids=["lost", "landing late"])
async def test_a_renewal_whose_write_went_unanswered_reads_again_and_renews(
    store: LeaseStore, redis: aioredis.Redis, lands_late: bool
) -> None:
    elector = LeaderElector(LeaseClients(store, redis), "queue", "me", CONFIG)
    await elector.acquire()
    epoch, renewals = elector.lease.epoch, _renewals(elector)
    holding = HoldingStore(store, lands_late=lands_late)
    elector.clients = LeaseClients(holding, redis)

    await elector.try_once()

    assert elector.lease.role is Role.LEADING, elector.lease.lost_because
    record, _ = await store.read("queue")
    assert record is not None and (record.holder, record.epoch) == ("me", epoch)
    # renewed by that very try: once, or on top of its own copy that landed late
    assert record.renew_count == renewals + (2 if lands_late else 1)
    assert holding.writes == (3 if lands_late else 2)


def _renewals(elector: LeaderElector) -> int:
    record = elector.lease.record
    return record.renew_count if record is not None else 0
