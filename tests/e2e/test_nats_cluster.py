"""ksched on a 3-server NATS cluster with R3 streams: a server killed (kill -9) while
pods are scheduled (the one most services use, the cluster stream's leader, the lease
bucket's leader) loses no pod, binds none twice and overcommits no node; the server
comes back and rejoins; the CLI works with the first server of its list down; a
delivery of the cluster stream lost on its way to the watcher is not acked away; a
write no stream took is sent again."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.js.errors import NoStreamResponseError

from shared.api.models import key_of
from shared.runtime.connections import ensure_streams
from shared.runtime.leasestore import LEASE_STREAM
from shared.runtime.publish import Conflict, write_pod
from shared.runtime.watermark import is_watcher_consumer as is_watcher
from shared.subjects import BIND_STREAM, BINDER_CONSUMER, CLUSTER_STREAM, STREAMS
from shared.tools.cli.live import connect
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack
from shared.tools.invariants import audit
from shared.tools.natscluster import NatsCluster
from shared.tools.observe import settle
from shared.tools.servers import Server
from shared.tools.synthetic import make_node, make_pod
from tests.e2e.kills import publish_until_bound
from tests.e2e.state import eventually
from tests.e2e.test_cli_e2e import ksched

pytestmark = pytest.mark.e2e

NODES = [make_node(f"n{i}", cpu="4", memory="32Gi") for i in range(16)]  # 64 cpus
PODS = 480  # 125m each: 60 cpus, so an overcommit would show
SERVICE_CLIENT = "ksched-"  # services name their NATS connections ksched-<service>
Chooser = Callable[[LocalStack, NATS], Awaitable[int]]  # which server to kill


@pytest.fixture
async def cnc(cluster_stack: LocalStack) -> AsyncIterator[NATS]:
    """The test's own connection: every server, reconnecting as long as it takes."""
    client = await nats.connect(
        servers=cluster_stack.nats_urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2
    )
    yield client
    await client.close()


def cluster_of(stack: LocalStack) -> NatsCluster:
    assert stack.nats_cluster is not None
    return stack.nats_cluster


async def services_server(stack: LocalStack, nc: NATS) -> int:
    """The server the most services are connected to."""
    cluster = cluster_of(stack)
    names = await asyncio.gather(
        *(asyncio.to_thread(cluster.client_names, i) for i in range(len(cluster.servers)))
    )
    counts = [sum(n.startswith(SERVICE_CLIENT) for n in server) for server in names]
    assert max(counts) > 0, counts
    return counts.index(max(counts))


async def stream_leader(stack: LocalStack, nc: NATS, stream: str) -> int:
    """The server that leads `stream`'s Raft group."""
    info = await nc.jetstream().stream_info(stream)
    assert info.cluster is not None and info.cluster.leader
    return cluster_of(stack).index(info.cluster.leader)


async def cluster_stream_leader(stack: LocalStack, nc: NATS) -> int:
    """The server that leads KSCHED_CLUSTER's Raft group."""
    return await stream_leader(stack, nc, CLUSTER_STREAM)


async def lease_bucket_leader(stack: LocalStack, nc: NATS) -> int:
    """The server that leads the lease bucket's Raft group: the bucket has no leader for
    nats-server's election timeout (4-9 s), longer than the renew deadline."""
    return await stream_leader(stack, nc, LEASE_STREAM)


async def schedule_through_a_kill(
    stack: LocalStack, nc: NATS, choose: Chooser
) -> tuple[PodTracker, int]:
    """Publish the pods while one server is killed part way (the one `choose` returns);
    every pod ends bound once, and the cache's commits agree. Returns the victim."""
    pods = [make_pod(f"p-{i:03d}", cpu="125m", memory="256Mi") for i in range(PODS)]
    tracker, publishing = await publish_until_bound(nc, NODES, pods, PODS // 4)
    victim = await choose(stack, nc)
    await asyncio.to_thread(cluster_of(stack).kill, victim)
    await asyncio.wait_for(publishing, 120)  # publish_new retries through the failover
    await all_bound_once(stack, tracker, pods)
    return tracker, victim


async def all_bound_once(stack: LocalStack, tracker: PodTracker, pods: list[Any]) -> None:
    """Every pod ends bound once, no node overcommitted, and the cache's commits agree.
    They all fit: one turned away while a failover held room (an attempt cut off, not
    yet fenced) gets another look once that room is freed."""
    keys = [key_of(p) for p in pods]
    everyone = await tracker.wait_until(lambda t: all(k in t.bound() for k in keys), timeout=120)
    bound = tracker.bound()
    assert everyone, f"{len(bound)} of {len(pods)} bound"
    redis = aioredis.from_url(stack.redis_url)
    try:
        commits = await settle(tracker, redis, keys, timeout=60)
    finally:
        await redis.aclose()
    raw = {key_of(p): p for p in pods}
    assert all(v.bind_count == 1 for v in tracker.pods.values()), "a pod was bound twice"
    assert {k: c.node for k, c in commits.items()} == bound
    report = audit(NODES, raw, bound)
    assert report.ok, report.lines()[:10]


async def rejoins(stack: LocalStack, nc: NATS, tracker: PodTracker, victim: int) -> None:
    """The killed server starts again, catches up as a replica of every stream, and
    pods still get scheduled."""
    cluster = cluster_of(stack)
    await asyncio.to_thread(cluster.restart, victim)
    name = cluster.members[victim].name
    js = nc.jetstream(timeout=5)

    async def current_everywhere() -> bool:
        for spec in STREAMS:
            try:
                info = await js.stream_info(spec.name)
            except Exception:  # the stream electing its leader after the restart
                return False
            assert info.cluster is not None
            peers = {p.name: p.current for p in info.cluster.replicas or []}
            if info.cluster.leader != name and not peers.get(name):
                return False
        return True

    assert await eventually(current_everywhere, 30), f"{name} is not a current replica"
    more = [make_pod(f"after-{i}", cpu="10m", memory="16Mi") for i in range(20)]
    await publish_all(js, more)
    keys = [key_of(p) for p in more]
    assert await tracker.wait_until(lambda t: all(k in t.bound() for k in keys), timeout=60)
    assert all(v.bind_count == 1 for v in tracker.pods.values())


@pytest.mark.timeout(300)
async def test_streams_and_durables_have_three_replicas(cnc: NATS) -> None:
    js = cnc.jetstream()
    for spec in STREAMS:
        info = await js.stream_info(spec.name)
        assert info.config.num_replicas == 3, spec.name
    binder = await js.consumer_info(BIND_STREAM, BINDER_CONSUMER)
    assert binder.cluster is not None
    assert len(binder.cluster.replicas or []) == 2  # and the leader: three copies


@pytest.mark.timeout(300)
@pytest.mark.parametrize("choose", [services_server, cluster_stream_leader, lease_bucket_leader])
async def test_a_killed_server_loses_no_pod_and_rejoins(
    cluster_stack: LocalStack, cnc: NATS, choose: Chooser
) -> None:
    tracker, victim = await schedule_through_a_kill(cluster_stack, cnc, choose)
    if choose is not services_server:  # another server took over
        assert await eventually(lambda: led_by_another(cluster_stack, cnc, choose, victim), 30)
    await rejoins(cluster_stack, cnc, tracker, victim)


async def led_by_another(stack: LocalStack, nc: NATS, choose: Chooser, victim: int) -> bool:
    """Whether a server other than `victim` leads now. The pods may all be bound while
    the killed server's stream still elects its leader (4-9 s: the services' leases are
    kept through a silent lease bucket), and a stream info asked meanwhile is never
    answered: asked again, not failed."""
    try:
        return await choose(stack, nc) != victim
    except TimeoutError:  # nats: timeout
        return False


@pytest.mark.timeout(300)
async def test_cli_works_with_the_first_server_down(cluster_stack: LocalStack, cnc: NATS) -> None:
    """The first server of the CLI's list is down, and it led JetStream's meta group: a
    request sent before the others elect another is refused with 503 "JetStream system
    temporarily unavailable", and the CLI asks again rather than failing."""
    await publish_all(cnc.jetstream(), [make_node("solo", cpu="4"), make_pod("web-0")])
    tracker = PodTracker()
    await tracker.start(cnc)
    assert await tracker.wait_until(lambda t: "default/web-0" in t.bound(), timeout=30)
    cluster = cluster_of(cluster_stack)
    victim = await asyncio.to_thread(cluster.meta_leader)
    await asyncio.to_thread(cluster.kill, victim)
    urls = cluster.urls
    url = ",".join([urls[victim], *(u for i, u in enumerate(urls) if i != victim)])
    # nats-py tries the servers in a random order: reaching the live ones every time
    # means the dead one never ends the attempt
    for _ in range(10):
        conn = await connect(url)
        await conn.close()
    code, out, err = await ksched(url, "get", "pods")
    assert code == 0, err
    assert "web-0" in out and "Scheduled" in out


@pytest.mark.timeout(120)
async def test_a_delivery_the_watcher_never_got_is_delivered_again(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    """What a consumer leader lost with its server leaves behind, made on purpose: a
    pull request of another client takes one delivery of the watcher's consumer. The
    watcher sees its delivery sequence jump and starts the consumer again past what it
    handled, rather than acking the lost delivery away with the next ack-all."""
    js = nc.jetstream()
    await publish_all(js, [make_node("solo", cpu="8")])
    await publish_all(js, [make_pod("before")])
    assert await tracker.wait_until(lambda t: "default/before" in t.bound(), timeout=30)
    watcher = next(c.name for c in await js.consumers_info(CLUSTER_STREAM) if is_watcher(c))
    thief = await nc.subscribe(nc.new_inbox())
    # queued behind the watcher's open request, which it renews every second
    await nc.publish(
        f"$JS.API.CONSUMER.MSG.NEXT.{CLUSTER_STREAM}.{watcher}",
        json.dumps({"batch": 1, "expires": 60_000_000_000}).encode(),
        reply=thief.subject,
    )
    stolen = ""
    for i in range(20):  # until the thief's request is first in line
        await asyncio.sleep(0.5)
        await publish_all(js, [make_pod(f"maybe-{i}")])
        with contextlib.suppress(TimeoutError):
            msg = await thief.next_msg(timeout=0.5)
            stolen = json.loads(msg.data)["object"]["metadata"]["name"]
            break
    assert stolen, "no delivery was taken"
    await publish_all(js, [make_pod("after")])
    keys = [f"default/maybe-{j}" for j in range(i + 1)] + ["default/after"]
    assert await tracker.wait_until(lambda t: all(k in t.bound() for k in keys), timeout=30), (
        f"{stolen} never scheduled"
    )


async def test_a_write_no_stream_took_is_sent_again_under_its_precondition(
    nats_server: Server,
) -> None:
    """What a binder sees while a stream elects its leader: no responder. The write is
    sent again, unchanged, until a stream takes it; without patience it fails at once.
    A first copy that did land makes the next one a Conflict, never a second binding."""
    nc = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    try:
        js = nc.jetstream(timeout=2)
        with pytest.raises(NoStreamResponseError):
            await write_pod(js, make_pod("p"), 0)
        writing = asyncio.create_task(write_pod(js, make_pod("p"), 0, patience=60))
        await asyncio.sleep(0.5)  # a few refused tries before the stream exists
        assert not writing.done()
        await ensure_streams(js)
        assert await writing == 1
        with pytest.raises(Conflict):
            await write_pod(js, make_pod("p"), 0, patience=60)
    finally:
        await nc.close()
