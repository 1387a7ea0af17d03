"""The lease bucket's Raft leader frozen (SIGSTOP: it takes requests and answers none)
for longer than the renew deadline, while pods are scheduled on a 3-server cluster.
Nobody can be handed a new term while the bucket does not answer, so the leaders of
watcher, queue and cache keep their leases (runtime/lease.py, a silent store): no
epoch moves, and still every pod is bound once, no node overcommitted, and the cache's
commits agree with the bindings. Before, every leader lost its lease at the renew
deadline and was restarted."""

from __future__ import annotations

import asyncio
import signal

import pytest
from nats.aio.client import Client as NATS

from shared.runtime.lease import LEADER_ELECTED
from shared.runtime.leasestore import LeaseStore
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import make_pod
from tests.conftest import SHORT_ELECTION
from tests.e2e.kills import publish_until_bound
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

# Frozen for twice the renew deadline: every leader's renewals go unanswered past it.
FROZEN_SECONDS = 2 * float(SHORT_ELECTION["KSCHED_LEADER_ELECT_RENEW_DEADLINE"])


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
