"""The deployment's access control, run locally with compose's own configuration:
deploy/nats/nats.conf (a NATS user per service and one for publishers) and
deploy/redis/users.acl.template (a Redis ACL user per stateful service)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.aio.subscription import Subscription
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

import shared.snapshot
from services.queue.fence import Lapsed, Outcome, fence
from shared import keys
from shared.framework.types import NodeInfo
from shared.relist import read_in_flight, read_latest
from shared.runtime.connections import ensure_streams
from shared.runtime.publish import write_pod
from shared.runtime.watermark import state_at_takeover
from shared.sharding import PARTITIONS, mapping_config, partitioned_pod_subject, pod_partition
from shared.snapshot import Snapshot
from shared.subjects import (
    BIND_SUBJECT,
    CACHE_ASSUME,
    CACHE_BINDING,
    CLUSTER_STREAM,
    ERROR_HEADER,
    ERRORS_PREFIX,
    PARTITIONED_PODS_PREFIX,
    QUEUE_POP,
    UNDO_HEADER,
    WHATIF,
    event_subject,
    pod_subject,
    priority_class_subject,
)
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import SERVICES, LocalStack
from shared.tools.servers import Server, start_nats, start_redis
from shared.tools.synthetic import make_node, make_pod
from shared.wire import dump_json, pack
from tests.conftest import SHORT_ELECTION

pytestmark = pytest.mark.e2e

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NATS_USERS = ("publisher", "operator", "watcher", "queue", "cache", "worker", "binder")
REDIS_USERS = ("watcher", "queue", "cache", "worker")  # the binder keeps no state
PASSWORDS = {user: f"{user}-secret-0123456789" for user in NATS_USERS}


def nats_env() -> dict[str, str]:
    return {f"KSCHED_NATS_{u.upper()}_PASSWORD": p for u, p in PASSWORDS.items()}


def render_acl(workdir: Path) -> Path:
    """What deploy/redis/entrypoint.sh does with the docker secrets."""
    lines = (DEPLOY / "redis" / "users.acl.template").read_text().splitlines()
    text = "\n".join(line for line in lines if line.strip() and not line.startswith("#"))
    for user in REDIS_USERS:
        text = text.replace(f"@{user.upper()}@", PASSWORDS[user])
    path = workdir / "users.acl"
    path.write_text(text)
    return path


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    nats_server = start_nats(tmp_path, config=DEPLOY / "nats" / "nats.conf", env=nats_env())
    redis_server = start_redis(tmp_path, aclfile=render_acl(tmp_path))
    yield nats_server, redis_server
    redis_server.stop()
    nats_server.stop()


@pytest.fixture
def mapped_servers(tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    """As `servers`, with the partition mapping added to compose's configuration the way
    docs/deploy.md says (nats-ha.conf includes it as base.conf likewise)."""
    (tmp_path / "base.conf").write_text((DEPLOY / "nats" / "nats.conf").read_text())
    config = tmp_path / "mapped.conf"
    config.write_text("include ./base.conf\n" + mapping_config())
    nats_server = start_nats(tmp_path, config=config, env=nats_env())
    redis_server = start_redis(tmp_path, aclfile=render_acl(tmp_path))
    yield nats_server, redis_server
    redis_server.stop()
    nats_server.stop()


async def connect_as(server: Server, user: str, errors: list[str] | None = None) -> NATS:
    async def on_error(err: Exception) -> None:
        if errors is not None:
            errors.append(str(err))

    return await nats.connect(
        f"nats://127.0.0.1:{server.port}",
        user=user,
        password=PASSWORDS[user],
        error_cb=on_error,
        allow_reconnect=False,
    )


def redis_as(server: Server, user: str | None) -> aioredis.Redis:
    auth = {"username": user, "password": PASSWORDS[user]} if user else {}
    return aioredis.Redis(port=server.port, **auth)  # type: ignore[arg-type]


async def test_a_publisher_publishes_cluster_events_and_reads_events(
    servers: tuple[Server, Server],
) -> None:
    nats_server, _ = servers
    binder = await connect_as(nats_server, "binder")
    await ensure_streams(binder.jetstream())  # the services create the streams
    publisher = await connect_as(nats_server, "publisher")
    try:
        events = await publisher.subscribe("ksched.events.>")
        await publisher.flush()
        ack = await publisher.jetstream().publish(pod_subject("default", "p"), b"{}")
        assert ack.stream == CLUSTER_STREAM
        await binder.publish(event_subject("default", "p"), b"scheduled")
        assert (await events.next_msg(timeout=2)).data == b"scheduled"
        last = await publisher.jetstream().get_last_msg(CLUSTER_STREAM, pod_subject("default", "p"))
        assert last.data == b"{}"
    finally:
        await publisher.close()
        await binder.close()


@pytest.mark.parametrize(
    "subject", [BIND_SUBJECT, QUEUE_POP, CACHE_ASSUME, WHATIF, "ksched.errors.x"]
)
async def test_a_publisher_cannot_publish_on_an_internal_subject(
    servers: tuple[Server, Server], subject: str
) -> None:
    nats_server, _ = servers
    insider = await connect_as(nats_server, "worker")
    listener = await connect_as(nats_server, "queue" if subject == QUEUE_POP else "cache")
    errors: list[str] = []
    publisher = await connect_as(nats_server, "publisher", errors)
    try:
        # the subject's real audience listens (the queue, the cache, or a JetStream stream)
        heard = await listener.subscribe("ksched.internal.>")
        await ensure_streams(insider.jetstream())
        await listener.flush()
        await publisher.publish(subject, b"forged")
        await publisher.flush()
        await asyncio.sleep(0.3)
        assert any("permissions violation" in e.lower() for e in errors), errors
        with pytest.raises(nats.errors.TimeoutError):
            await heard.next_msg(timeout=0.3)
        info = await insider.jetstream().stream_info("KSCHED_BIND")
        assert info.state.messages == 0
    finally:
        for nc in (publisher, listener, insider):
            await nc.close()


async def test_a_publisher_can_neither_listen_in_nor_touch_the_streams(
    servers: tuple[Server, Server],
) -> None:
    nats_server, _ = servers
    watcher = await connect_as(nats_server, "watcher")
    await ensure_streams(watcher.jetstream())
    errors: list[str] = []
    publisher = await connect_as(nats_server, "publisher", errors)
    try:
        await publisher.subscribe("ksched.internal.>")
        await publisher.flush()
        await asyncio.sleep(0.3)
        assert any("subscription" in e.lower() for e in errors), errors
        with pytest.raises(Exception):  # noqa: B017 - denied: no responder ever answers
            await publisher.jetstream(timeout=1).delete_stream(CLUSTER_STREAM)
        assert (await watcher.jetstream().stream_info(CLUSTER_STREAM)).config.name
    finally:
        await publisher.close()
        await watcher.close()


async def test_the_queue_may_fence_a_lapsed_attempt(servers: tuple[Server, Server]) -> None:
    """services/queue/fence.py writes the pod once more under its last version and reads
    the subject's latest version back, and the queue has the cache forget the attempt:
    the queue's user may do all three (it could not, and
    every attempt that lapsed in compose, e.g. across a Redis failover, stayed stuck)."""
    nats_server, _ = servers
    errors: list[str] = []
    queue = await connect_as(nats_server, "queue", errors)
    try:
        js = queue.jetstream(timeout=2)
        await ensure_streams(js)
        pod = make_pod("lapsed")
        assert await write_pod(js, pod, 0) > 0
        last = await js.get_last_msg(CLUSTER_STREAM, pod_subject("default", "lapsed"))
        assert json.loads(last.data)["object"]["metadata"]["name"] == "lapsed"
        await queue.publish(CACHE_BINDING, b"{}")  # forgetting the attempt's room
        await queue.flush()
        await asyncio.sleep(0.3)  # a violation is reported asynchronously
        assert not errors
    finally:
        await queue.close()


async def test_an_operator_may_inspect_but_not_schedule(servers: tuple[Server, Server]) -> None:
    nats_server, _ = servers
    errors: list[str] = []
    operator = await connect_as(nats_server, "operator", errors)
    try:
        for subject in (pod_subject("default", "p"), QUEUE_POP, CACHE_ASSUME):
            await operator.publish(subject, b"forged")
        await operator.flush()
        await asyncio.sleep(0.3)
        assert sum("permissions violation" in e.lower() for e in errors) == 3, errors
    finally:
        await operator.close()


async def test_no_redis_for_publishers_and_each_service_only_its_keys(
    servers: tuple[Server, Server],
) -> None:
    _, redis_server = servers
    cache, queue, worker = (redis_as(redis_server, u) for u in ("cache", "queue", "worker"))
    outsider = redis_as(redis_server, None)  # a publisher has no Redis user at all
    await cache.hset(keys.CACHE_PODS, "default/p", b"record")
    try:
        assert await outsider.ping()
        with pytest.raises(NoPermissionError):
            await outsider.hgetall(keys.CACHE_PODS)
        with pytest.raises((AuthenticationError, ResponseError)):
            await outsider.execute_command("AUTH", "publisher", PASSWORDS["publisher"])
        assert await worker.hgetall(keys.CACHE_PODS) == {b"default/p": b"record"}
        with pytest.raises(NoPermissionError):
            await worker.hset(keys.CACHE_PODS, "default/p", b"forged")  # read-only
        # nor through a script
        with pytest.raises(ResponseError, match=r"(?i)permission|can.t run this command"):
            await worker.eval("return redis.call('HDEL', KEYS[1], 'default/p')", 1, keys.CACHE_PODS)
        with pytest.raises(NoPermissionError):
            await queue.hgetall(keys.CACHE_PODS)  # another service's keys
        for client in (cache, queue, worker):
            for command in (("FLUSHALL",), ("KEYS", "*"), ("CONFIG", "GET", "*")):
                with pytest.raises(NoPermissionError):
                    await client.execute_command(*command)
        assert await cache.hget(keys.CACHE_PODS, "default/p") == b"record"
    finally:
        for client in (cache, queue, worker, outsider):
            await client.aclose()


async def test_a_worker_pages_its_snapshot_refresh_with_its_own_credentials(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refresh's script runs with the worker's rights, past its first page too."""
    _, redis_server = servers
    monkeypatch.setattr(shared.snapshot, "REFRESH_PAGE", 2)
    cache, worker = redis_as(redis_server, "cache"), redis_as(redis_server, "worker")
    names = [f"n{i}" for i in range(5)]
    try:
        await cache.hset(keys.state_key("cache"), "incarnation", 1)
        for name in names:
            info = NodeInfo(name)
            info.set_node(make_node(name))
            info.generation = 1
            await cache.hset(keys.CACHE_NODEINFO, name, pack(info.to_record()))
        await cache.zadd(keys.CACHE_GENERATIONS, dict.fromkeys(names, 1))
        await cache.set(keys.CACHE_GENERATION, 1)
        snapshot = Snapshot(worker)
        await snapshot.refresh()
        assert sorted(snapshot.nodes) == names
    finally:
        for client in (cache, worker):
            await client.aclose()


async def test_queue_and_cache_rebuild_and_fence_with_their_own_credentials(
    servers: tuple[Server, Server],
) -> None:
    """What a takeover reads (a new incarnation, the watcher's ack floor, the state
    marker, the log's latest events, the binds in flight) and the queue's fence of a
    lapsed attempt: each as the service's own users, without a permissions violation."""
    nats_server, redis_server = servers
    publisher = await connect_as(nats_server, "publisher")
    clients = {name: await connect_as(nats_server, name) for name in ("queue", "cache")}
    redis = {name: redis_as(redis_server, name) for name in clients}
    try:
        await ensure_streams(clients["queue"].jetstream())
        await publish_all(publisher.jetstream(), [make_pod("p")])
        for name, nc in clients.items():
            js = nc.jetstream()
            takeover = await state_at_takeover(js, redis[name], name)
            assert takeover.incarnation and takeover.first
            assert len((await read_latest(js)).entries) == 1
        assert await read_in_flight(clients["cache"].jetstream()) == []
        lapsed = Lapsed("default/p", 3, 1, make_pod("p"), binding=False)
        assert (await fence(clients["queue"].jetstream(), lapsed, "lapsed")).outcome is (
            Outcome.FENCED
        )
        violations = [
            line for line in nats_server.log_path.read_text().splitlines() if "Violation" in line
        ]
        assert not violations, violations[:3]
    finally:
        for nc in (publisher, *clients.values()):
            await nc.close()
        for client in redis.values():
            await client.aclose()


def own_credentials_stack(nats_server: Server, redis_server: Server, tmp_path: Path) -> LocalStack:
    """The five services, each as its NATS user and Redis user (passwords from files, as
    docker secrets), on the servers of `servers`; not started."""
    service_env = {}
    for name in SERVICES:
        (tmp_path / f"nats_{name}").write_text(PASSWORDS[name])
        env = {
            "KSCHED_NATS_USER": name,
            "KSCHED_NATS_PASSWORD_FILE": str(tmp_path / f"nats_{name}"),
        }
        if name in REDIS_USERS:
            env |= {"KSCHED_REDIS_USERNAME": name, "KSCHED_REDIS_PASSWORD": PASSWORDS[name]}
        service_env[name] = env
    stack = LocalStack(tmp_path / "stack", workers=1, binders=1, service_env=service_env)
    stack.nats, stack.redis = nats_server, redis_server
    stack.workdir.mkdir(parents=True)
    return stack


@contextlib.asynccontextmanager
async def own_users_running(
    servers: tuple[Server, Server], tmp_path: Path, *, shards: int = 1, short: bool = False
) -> AsyncIterator[tuple[LocalStack, NATS, Subscription]]:
    """The services started as their own users (`own_credentials_stack`), a publisher's
    connection, and its subscription to ksched.errors; all stopped afterwards."""
    stack = own_credentials_stack(*servers, tmp_path)
    stack.shards = shards
    if short:
        stack.env |= SHORT_ELECTION
    publisher = await connect_as(servers[0], "publisher")
    errors = await publisher.subscribe(f"{ERRORS_PREFIX}.>")
    try:
        stack.start_services()
        stack.wait_ready()
        yield stack, publisher, errors
    finally:
        await publisher.close()
        stack.stop_services()


def violations(server: Server) -> list[str]:
    """The permission violations nats-server logged."""
    return [line for line in server.log_path.read_text().splitlines() if "Violation" in line]


async def test_the_services_schedule_with_their_own_credentials_only(
    servers: tuple[Server, Server], tmp_path: Path
) -> None:
    """The whole pipeline, each service as its NATS user and Redis user (passwords from
    files, as docker secrets): the permissions are enough to schedule; the publisher
    watches the outcome with its own."""
    nats_server, redis_server = servers
    stack = own_credentials_stack(nats_server, redis_server, tmp_path)
    publisher = await connect_as(nats_server, "publisher")
    try:
        stack.start_services()
        stack.wait_ready()
        tracker = PodTracker()
        await tracker.start(publisher)  # a publisher lists and watches through an ephemeral
        js = publisher.jetstream()
        await publish_all(js, [make_node(f"n{i}", cpu="2") for i in range(3)])
        await publish_all(js, [make_pod(f"p-{i}", cpu="500m") for i in range(12)])
        await publish_all(js, [make_pod("huge", cpu="64")])
        assert await tracker.wait_until(
            lambda t: len(t.bound()) == 12 and "default/huge" in t.unschedulable(),
            timeout=60,
        ), f"{len(tracker.bound())} bound"
        # the nodes are full: a preemptor reserves its nomination at the cache, writes
        # it and deletes its victims, all with the worker's own credentials
        await publish_all(js, [make_pod("vip", cpu="1", priority=10)])
        assert await tracker.wait_until(
            lambda t: "default/vip" in t.bound() and len(t.deleted()) == 2, timeout=60
        ), tracker.pods.get("default/vip")
        assert all(s.proc.poll() is None for s in stack.services)
        # and an operator finds every instance through discovery (`ksched status`)
        operator = await connect_as(nats_server, "operator")
        try:
            inbox = operator.new_inbox()
            replies = await operator.subscribe(inbox)
            await operator.publish("$SRV.PING", b"", reply=inbox)
            names = set()
            for _ in range(len(stack.services)):
                names.add(json.loads((await replies.next_msg(timeout=5)).data)["name"])
            assert names == {f"ksched-{name}" for name in SERVICES}
            # and asks a worker what-if (`ksched whatif`), which a publisher may not
            ask = json.dumps({"pod": make_pod("what", cpu="500m")}).encode()
            report = json.loads((await operator.request(WHATIF, ask, timeout=10)).data)
            assert report["message"].startswith("0/3 nodes are available: 3 Insufficient cpu")
        finally:
            await operator.close()
        found = violations(nats_server)
        assert not found, found[:3]  # the services needed nothing they lack
    finally:
        await publisher.close()
        stack.stop_services()


@pytest.mark.timeout(180)
async def test_bad_input_is_refused_and_undone_with_the_watchers_own_credentials(
    servers: tuple[Server, Server], tmp_path: Path
) -> None:
    """What the watcher does with input it refuses (its error on ksched.errors, the
    subject put back as it was) and with the PriorityClasses a new leader reads back,
    as its own NATS user: it reads the cluster stream's messages and writes the undo on
    the refused object's subject. Refused, a new leader's read of the PriorityClasses
    was retried for ever, and so was the undo's publish, which nobody answered: nothing
    published after the bad event was scheduled."""
    async with own_users_running(servers, tmp_path, short=True) as (stack, publisher, errors):
        js = publisher.jetstream()
        high: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
        high |= {"metadata": {"name": "high"}, "value": 1000}
        await js.publish(
            priority_class_subject("high"), dump_json({"type": "ADDED", "object": high})
        )
        first_leader = stack.leader("watcher")
        assert first_leader is not None
        first_leader.proc.kill()  # its successor lists the PriorityClasses
        successor = stack.start_service("watcher")
        for _ in range(300):  # its lease: the predecessor's lapses first (SHORT_ELECTION)
            if await asyncio.to_thread(stack.leader, "watcher") is successor:
                break
            await asyncio.sleep(0.1)
        assert await asyncio.to_thread(stack.leader, "watcher") is successor
        tracker = PodTracker()
        await tracker.start(publisher)
        await publish_all(js, [make_node("n0", cpu="2")])
        # a pod whose object names another pod than its subject: refused, then undone
        ghost = dump_json({"type": "ADDED", "object": make_pod("other")})
        refused = (await js.publish(pod_subject("default", "ghost"), ghost)).seq
        first = make_pod("first", cpu="100m")
        first["spec"]["priorityClassName"] = "high"
        await publish_all(js, [first, make_pod("after", cpu="100m")])
        error = await errors.next_msg(timeout=30)
        assert error.subject == f"{ERRORS_PREFIX}.{pod_subject('default', 'ghost')}"
        assert "does not match the subject" in (error.headers or {}).get(ERROR_HEADER, "")
        assert await tracker.wait_until(
            lambda t: {"default/first", "default/after"} <= set(t.bound()), timeout=60
        ), sorted(tracker.bound())
        assert tracker.objects["default/first"]["spec"]["priority"] == 1000
        last = await js.get_last_msg(CLUSTER_STREAM, pod_subject("default", "ghost"))
        assert (last.headers or {}).get(UNDO_HEADER) == str(refused)
        assert all(s.proc.poll() is None for s in stack.services if s is not first_leader)
        found = violations(servers[0])
        assert not found, found[:3]


@pytest.mark.timeout(180)
async def test_the_services_schedule_through_the_partition_mapping_with_their_credentials(
    mapped_servers: tuple[Server, Server], tmp_path: Path
) -> None:
    """Compose's users on servers with the partition mapping: nats-server checks a
    publish's rights on the subject it maps to, so every pod writer (the publisher, the
    binder's bindings) needs the stored prefix too. A pod published there directly,
    under another partition than the mapping gives it, is refused (it would give the pod
    a second subject, read by another watcher shard) and never becomes a pod."""
    # two watcher shards, each consuming its own partitions
    async with own_users_running(mapped_servers, tmp_path, shards=2) as running_:
        stack, publisher, errors = running_
        js = publisher.jetstream()
        tracker = PodTracker()
        await tracker.start(publisher)
        await publish_all(js, [make_node(f"n{i}", cpu="2") for i in range(3)])
        pods = [make_pod(f"p-{i}", cpu="100m") for i in range(12)]
        await publish_all(js, pods)
        right = pod_partition("default", "forged")
        wrong = f"{PARTITIONED_PODS_PREFIX}.{(right + 1) % PARTITIONS}.default.forged"
        forged = dump_json({"type": "ADDED", "object": make_pod("forged", cpu="100m")})
        await js.publish(wrong, forged)
        error = await errors.next_msg(timeout=30)
        assert error.subject == f"{ERRORS_PREFIX}.{pod_subject('default', 'forged')}"
        reason = (error.headers or {}).get(ERROR_HEADER, "")
        assert "not where the partition mapping stores this pod" in reason, reason
        await publish_all(js, [make_pod("after", cpu="100m")])
        assert await tracker.wait_until(lambda t: len(t.bound()) == 13, timeout=60), sorted(
            tracker.bound()
        )
        assert "default/forged" not in tracker.bound()
        stored = await js.get_last_msg(CLUSTER_STREAM, partitioned_pod_subject("default", "p-0"))
        assert (stored.subject or "").startswith(PARTITIONED_PODS_PREFIX)
        assert all(s.proc.poll() is None for s in stack.services)
        found = violations(mapped_servers[0])
        assert not found, found[:3]
