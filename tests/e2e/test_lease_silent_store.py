"""The lease bucket's Raft leader frozen (SIGSTOP: it takes requests and answers none)
for longer than the renew deadline, while pods are scheduled on a 3-server cluster.
Nobody can be handed a new term while the bucket does not answer, so the leaders of
watcher, queue and cache keep their leases (runtime/lease.py, a silent store): no
epoch moves, and still every pod is bound once, no node overcommitted, and the cache's
commits agree with the bindings. Before, every leader lost its lease at the renew
deadline and was restarted."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from shared.runtime.connections import connect_nats, connect_redis
from shared.runtime.elector import LeaderElector, LeaseClients
from shared.runtime.lease import LEADER_ELECTED, LeaseConfig, Role
from shared.runtime.leasestore import LeaseStore, ensure_lease_bucket
from shared.tools.devstack import LocalStack
from shared.tools.servers import Server, start_nats
from shared.tools.synthetic import make_pod
from tests.conftest import SHORT_ELECTION
from tests.e2e.kills import publish_until_bound
from tests.e2e.state import eventually
from tests.e2e.test_nats_cluster import (
    NODES,
    PODS,
    all_bound_once,
    cluster_of,
    cnc,
    lease_bucket_leader,
)

pytestmark = pytest.mark.e2e

__all__ = ["cnc"]  # the fixture, shared with test_nats_cluster.py

# Frozen past the renew deadline (every leader's renewals go unanswered past it), yet
# shorter than the bucket's other servers wait before they elect another leader: 4-9 s
# (nats-server's election timeout) from the last heartbeat (one a second), so never
# within 3 s. Frozen for longer, they may elect one before the thaw, and the bucket
# answers those not connected to the frozen server: a leader that is (a lone
# connection, one in three) is cut off from a store that answers its standby, which
# may take over (docs/reliability.md, "A silent lease store"). Not this test's case.
FROZEN_SECONDS = 1.25 * float(SHORT_ELECTION["KSCHED_LEADER_ELECT_RENEW_DEADLINE"])


async def epochs(store: LeaseStore) -> dict[str, tuple[str, int]]:
    """Each leader-elected service's holder and epoch."""
    held = {}
    for name in sorted(LEADER_ELECTED):
        record, _ = await store.read(name)
        assert record is not None and record.holder, name
        held[name] = (record.holder, record.epoch)
    return held


@pytest.mark.timeout(300)
async def test_leaders_keep_their_leases_while_the_lease_store_is_silent(
    cluster_stack: LocalStack, cnc: NATS
) -> None:
    pods = [make_pod(f"p-{i:03d}", cpu="125m", memory="256Mi") for i in range(PODS)]
    tracker, publishing = await publish_until_bound(cnc, NODES, pods, PODS // 4)
    store = await LeaseStore.open(cnc.jetstream(timeout=10))
    before = await epochs(store)

    victim = cluster_of(cluster_stack).servers[await lease_bucket_leader(cluster_stack, cnc)]
    victim.proc.send_signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(FROZEN_SECONDS)  # the freeze itself, not a measurement
    finally:
        victim.proc.send_signal(signal.SIGCONT)
    await asyncio.wait_for(publishing, 120)
    await all_bound_once(cluster_stack, tracker, pods)
    assert await epochs(store) == before, "a leader lost its lease while the store was silent"


async def test_a_leaders_renewals_keep_its_lease_through_a_frozen_store(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    """The elector's own cadence (tries, their budgets, the waits between them) against
    a frozen nats-server, its only one, for three renew deadlines: the leader is still
    leading when it thaws, and renews with the same epoch. Counted from each try's
    start, a try that lasted until its deadline and the retry period after it left the
    next try starting at the deadline: the lease was lost."""
    config = LeaseConfig.from_env(SHORT_ELECTION)
    server = start_nats(tmp_path)
    nc = await connect_nats([f"nats://127.0.0.1:{server.port}"], "lease-test")
    try:
        store = await LeaseStore.open(await _bucket(nc))
        elector = LeaderElector(LeaseClients(store, redis), "queue", "me", config)
        await elector.acquire()
        epoch = elector.lease.epoch
        holding = asyncio.create_task(elector.hold())

        server.proc.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(3 * config.renew_deadline)  # the freeze, not a measurement
        finally:
            server.proc.send_signal(signal.SIGCONT)
        assert elector.lease.role is Role.LEADING, elector.lease.lost_because
        renewals = elector.lease.record.renew_count if elector.lease.record else 0

        async def renewed() -> bool:
            record = elector.lease.record
            return record is not None and record.renew_count > renewals

        assert await eventually(renewed, 30), elector.lease.lost_because
        assert (elector.lease.role, elector.lease.epoch) == (Role.LEADING, epoch)
        holding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holding
    finally:
        await nc.close()
        server.stop()


async def test_a_silent_redis_holds_no_renewal(tmp_path: Path, redis_server: Server) -> None:
    """Redis frozen (SIGSTOP: a primary whose host is cut off) while the lease store
    answers: the leader's renewals land and count as renewals. Each try used to wait on
    the epoch's raise in Redis until its budget ran out and count as unanswered by the
    store (chaos-hosts: the queue and cache leaders on the majority, their lease
    thread's Redis the cut-off primary, failed every try for the cut)."""
    config = LeaseConfig.from_env(SHORT_ELECTION)
    server = start_nats(tmp_path)
    nc = await connect_nats([f"nats://127.0.0.1:{server.port}"], "lease-test")
    redis = connect_redis(f"redis://127.0.0.1:{redis_server.port}")
    try:
        store = await LeaseStore.open(await _bucket(nc))
        elector = LeaderElector(LeaseClients(store, redis), "queue", "me", config)
        await elector.acquire()
        holding = asyncio.create_task(elector.hold())
        redis_server.proc.send_signal(signal.SIGSTOP)
        try:

            async def renewed_thrice() -> bool:
                record = elector.lease.record
                return record is not None and record.renew_count >= 3

            assert await eventually(renewed_thrice, 30), elector.lease.lost_because
        finally:
            redis_server.proc.send_signal(signal.SIGCONT)
        assert elector.lease.role is Role.LEADING, elector.lease.lost_because
        assert elector.lease.silent_at == 0.0, "a renewal that landed counted as unanswered"
        holding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holding
    finally:
        await redis.aclose()
        await nc.close()
        server.stop()


async def _bucket(nc: NATS) -> JetStreamContext:
    js = nc.jetstream(timeout=10)
    await ensure_lease_bucket(js, 1)
    return js
