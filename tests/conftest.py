"""Test harness: real nats-server and redis-server on free ports, services as processes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from shared.runtime.connections import ensure_streams
from shared.runtime.leasestore import LeaseStore, ensure_lease_bucket
from shared.tools.client import PodTracker
from shared.tools.devstack import LocalStack, running
from shared.tools.servers import Server, start_nats, start_redis

# A standby takes over about 3 s after its leader died (kube's defaults: 15 s).
SHORT_ELECTION = {
    "KSCHED_LEADER_ELECT_LEASE_DURATION": "3",
    "KSCHED_LEADER_ELECT_RENEW_DEADLINE": "2",
    "KSCHED_LEADER_ELECT_RETRY_PERIOD": "0.5",
}


def skip_without(reason: str) -> pytest.MarkDecorator:
    """Skip a test whose tool is missing here (`reason`: which, "" when present) —
    except where the tools are required (KSCHED_REQUIRE_TOOLS, set by .ci/run, which
    installs them): there the module fails to collect, saying why."""
    if reason and os.environ.get("KSCHED_REQUIRE_TOOLS"):
        pytest.fail(f"required here (KSCHED_REQUIRE_TOOLS): {reason}", pytrace=False)
    return pytest.mark.skipif(bool(reason), reason=reason)


def make_test_stack(workdir: Path, *, config: str | None = None, binders: int = 2) -> LocalStack:
    """Two workers, `binders` binders, short leases (in-flight pods, and the leader
    election of watcher, queue and cache) so that the kill tests recover quickly, and
    `config` as KSCHED_CONFIG; KSCHED_TEST_WATCHER_SHARDS=N runs N watcher and queue
    shards (shared/sharding.py; tests that set `shards` themselves keep theirs)."""
    env = {"KSCHED_QUEUE_LEASE_SECONDS": "3", "KSCHED_LOG_LEVEL": "debug", **SHORT_ELECTION}
    if config is not None:
        path = workdir.parent / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(config)
        env["KSCHED_CONFIG"] = str(path)
    stack = LocalStack(workdir, workers=2, binders=binders, env=env)
    stack.shards = shards_under_test()
    return stack


def shards_under_test() -> int:
    """The watcher and queue shards the e2e stacks run (KSCHED_TEST_WATCHER_SHARDS)."""
    return int(os.environ.get("KSCHED_TEST_WATCHER_SHARDS", "1"))


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The whole ksched: both servers and the five services, fresh for each test."""
    with running(make_test_stack(tmp_path / "stack")) as st:
        yield st


@pytest.fixture
def cluster_stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The whole ksched on a 3-server NATS cluster (loopback, routes), its streams in 3
    replicas and every server fsyncing each write, as compose.ha.yaml runs it: with a
    standby for watcher, queue and cache, as compose runs two replicas of each. When a
    killed server led the lease bucket, the bucket has no Raft leader for nats-server's
    election timeout (4-9 s), past the short renew deadline (2 s): the leaders lose
    their leases and exit, and their standbys take over once the bucket answers again.
    Alone, they left watcher, queue and cache to nobody (docs/reliability.md)."""
    stack = make_test_stack(tmp_path / "stack")
    stack.nats_servers = stack.stream_replicas = 3
    stack.standbys = 1
    stack.sync_always = True
    with running(stack) as st:
        yield st


@pytest.fixture
async def nc(stack: LocalStack) -> AsyncIterator[NATS]:
    client = await nats.connect(stack.nats_url)
    yield client
    await client.close()


@pytest.fixture
async def tracker(nc: NATS) -> PodTracker:
    t = PodTracker()
    await t.start(nc)
    return t


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[Server]:
    """A nats-server (JetStream) alone, without the services."""
    server = start_nats(tmp_path)
    yield server
    server.stop()


@pytest.fixture
async def js(nats_server: Server) -> AsyncIterator[JetStreamContext]:
    """JetStream on that nats-server, with ksched's streams."""
    nc = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    stream = nc.jetstream()
    await ensure_streams(stream)
    yield stream
    await nc.close()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Server]:
    """A redis-server alone, without the services."""
    server = start_redis(tmp_path)
    yield server
    server.stop()


@pytest.fixture
async def store(nats_server: Server) -> AsyncIterator[LeaseStore]:
    """The lease bucket of leader election (runtime/leasestore.py) on `nats_server`."""
    client = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    js = client.jetstream()
    await ensure_lease_bucket(js, 1)
    yield await LeaseStore.open(js)
    await client.close()


@pytest.fixture
async def redis(redis_server: Server) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis(port=redis_server.port)
    yield client
    await client.aclose()
