"""A new leader's reads at takeover (Runtime.takeover_js, runtime/askagain.py) sent
while a stream elects its leader are answered once it has one, within the same try: a
JetStream request sent before the election is never answered, and a takeover used to
wait its whole timeout on it (3 s, twice, after a host was killed)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from shared.runtime.askagain import AskingAgain
from shared.runtime.connections import ensure_streams
from shared.runtime.retry import retry_forever
from shared.subjects import CLUSTER_PREFIX, CLUSTER_STREAM
from shared.tools.natscluster import NatsCluster, start_nats_cluster

pytestmark = pytest.mark.e2e

# Far beyond an election (4-9 s in nats-server): a read that is not answered within it
# never will be. It bounds the read, it times nothing.
READ_TIMEOUT = 40.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    started = start_nats_cluster(tmp_path)
    yield started
    started.stop()


@pytest.mark.timeout(180)
async def test_a_read_sent_while_the_stream_elects_is_answered_once_it_has_a_leader(
    cluster: NatsCluster,
) -> None:
    nc = await nats.connect(servers=cluster.urls, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream(timeout=10)
        # as a service does (runtime/service.py): a request that a group still settling
        # leaves unanswered is asked again (one CI run timed out here once, as
        # test_watcher_floor.py did)
        await retry_forever("ensure streams", lambda: ensure_streams(js, replicas=3))
        await js.publish(f"{CLUSTER_PREFIX}.pods.default.p0", b"{}")
        led = (await js.stream_info(CLUSTER_STREAM)).cluster
        assert led is not None and led.leader
        victim = cluster.index(led.leader)
        survivor = next(i for i in range(3) if i != victim)
        # a new leader's connection, to a server that stays: nothing to reconnect
        leader_nc = await nats.connect(servers=[cluster.urls[survivor]])
        try:
            takeover = AskingAgain(leader_nc, timeout=READ_TIMEOUT, again=0.5)
            await asyncio.to_thread(cluster.kill, victim)
            info = await takeover.stream_info(CLUSTER_STREAM)  # sent before the election
            assert info.state.messages == 1
            assert info.cluster is not None
            assert info.cluster.leader != cluster.members[victim].name
        finally:
            await leader_nc.close()
    finally:
        await nc.close()
