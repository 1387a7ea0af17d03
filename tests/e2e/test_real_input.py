"""Real-world input never wedges ksched: bursts of several-KB pods, objects near the
server's max payload, values past the API's limits, updates the API server refuses,
redelivered binds. Everything goes through the public subjects, against real servers."""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from services.watcher.outbound import object_limit
from shared.subjects import (
    BIND_SUBJECT,
    ERROR_HEADER,
    ERRORS_STREAM,
    EVENTS_PREFIX,
    UNDO_HEADER,
    error_subject,
    pod_subject,
)
from shared.tools.client import PodTracker, last_pod_msg, publish_all, publish_node, publish_pod
from shared.tools.devstack import LocalStack, ServiceProc, running
from shared.tools.realistic import docs_pod
from shared.tools.synthetic import make_node, make_pod
from shared.wire import body_limit, dump_json, pack
from tests.conftest import make_test_stack
from tests.e2e.state import assumed_pods, eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
async def client(stack: LocalStack) -> AsyncIterator[tuple[NATS, PodTracker]]:
    nc = await nats.connect(stack.nats_url)
    tracker = PodTracker()
    await tracker.start(nc)
    yield nc, tracker
    await nc.close()


async def error_reason(js: JetStreamContext, subject: str, timeout: float = 30) -> str:
    """The reason ksched gave on ksched.errors.<subject>, once it is there."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            msg = await js.get_last_msg(ERRORS_STREAM, error_subject(subject))
            return str((msg.headers or {}).get(ERROR_HEADER, ""))
        except NotFoundError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"nothing on {error_subject(subject)}")


async def publish_raw(js: JetStreamContext, subject: str, event: dict[str, Any] | bytes) -> int:
    data = event if isinstance(event, bytes) else dump_json(event)
    return int((await js.publish(subject, data)).seq)


def nodes(n: int, cpu: str = "16", prefix: str = "n") -> list[dict[str, Any]]:
    return [make_node(f"{prefix}{i}", cpu=cpu, memory="256Gi", pods=200) for i in range(n)]


# --- sizes ---------------------------------------------------------------------------


@pytest.mark.timeout(300)
async def test_a_burst_of_a_thousand_several_kb_pods_binds_every_one(
    stack: LocalStack, client: tuple[NATS, PodTracker]
) -> None:
    """1000 docs-style pods (about 3 KB each, 2.9 MB together) published at once: the
    watcher's deliveries and the queue's pop replies are split to fit the server's max
    payload, and every pod binds; so does one published afterwards."""
    nc, tracker = client
    js = nc.jetstream()
    await publish_all(js, nodes(20))
    burst = [docs_pod(f"web-{i}") for i in range(1000)]
    assert sum(len(dump_json({"object": p})) for p in burst) > 2 * nc.max_payload
    await publish_all(js, burst)
    assert await tracker.wait_until(lambda t: len(t.bound()) == 1000, timeout=240), (
        f"{len(tracker.bound())} of 1000 bound"
    )
    await publish_pod(js, docs_pod("after"))
    assert await tracker.wait_until(lambda t: "default/after" in t.bound(), timeout=30)
    assert all(v.bind_count == 1 for v in tracker.pods.values())


@pytest.mark.timeout(300)
async def test_large_pods_behind_a_backlog_and_one_too_large_for_any_message(
    stack: LocalStack, client: tuple[NATS, PodTracker]
) -> None:
    """200 pods of 20 KB each behind a backlog of 1000 small ones all bind, and so does
    one of the largest size ksched accepts; an object too large for ksched to carry or
    write back (it fits the server's limit, but not with what ksched adds) is refused
    at the door on ksched.errors, with the reason."""
    nc, tracker = client
    js = nc.jetstream()
    await publish_all(js, nodes(40))
    giant = docs_pod("giant", size=nc.max_payload - 1024)
    await publish_pod(js, giant)
    # the largest object ksched takes binds: its every internal message and write fits
    await publish_pod(js, docs_pod("at-limit", size=object_limit(body_limit(nc.max_payload))))
    await publish_all(js, [make_pod(f"small-{i}", cpu="10m") for i in range(1000)])
    await publish_all(js, [docs_pod(f"large-{i}", size=20_000) for i in range(200)])
    reason = await error_reason(js, pod_subject("default", "giant"))
    assert reason.startswith("Request entity too large"), reason
    assert await tracker.wait_until(lambda t: len(t.bound()) == 1201, timeout=240), (
        f"{len(tracker.bound())} of 1201 bound"
    )
    assert "default/at-limit" in tracker.bound()
    assert "default/giant" not in tracker.bound()
    assert not tracker.unschedulable()


async def test_a_pod_at_the_size_limit_is_bound_once_and_its_binding_kept(
    stack: LocalStack, client: tuple[NATS, PodTracker]
) -> None:
    """ksched's own write of an object the door took at its limit (the binding adds
    spec.nodeName and a condition) is ksched's, not a publisher's: the door takes it.
    It refused it, undid the binding, and the pod was bound again after each binding
    lease (120 s), never for good."""
    nc, tracker = client
    js = nc.jetstream()
    await publish_all(js, nodes(2))
    await publish_pod(js, docs_pod("at-limit", size=object_limit(body_limit(nc.max_payload))))
    assert await tracker.wait_until(lambda t: "default/at-limit" in t.bound(), timeout=60)
    # the watcher handles the stream in order: once a pod published after the binding
    # is bound, the binding was judged
    await publish_pod(js, make_pod("after", cpu="10m"))
    assert await tracker.wait_until(lambda t: "default/after" in t.bound(), timeout=60)
    subject = pod_subject("default", "at-limit")
    with pytest.raises(NotFoundError):
        await js.get_last_msg(ERRORS_STREAM, error_subject(subject))
    latest = await last_pod_msg(js, "default", "at-limit")
    assert json.loads(latest.data)["object"]["spec"].get("nodeName"), "the binding was undone"
    assert tracker.pods["default/at-limit"].bind_count == 1


# --- values past the API's limits ------------------------------------------------------


async def test_values_past_the_api_limits_are_refused_and_never_stop_scheduling(
    stack: LocalStack, client: tuple[NATS, PodTracker]
) -> None:
    """An integer msgpack cannot carry (>= 2^64), in a pod's priority and a node's
    metadata, a label value outside the label grammar, a lone surrogate: each refused
    on ksched.errors with a reason naming the field; ordinary pods keep binding."""
    nc, tracker = client
    js = nc.jetstream()
    await publish_all(js, nodes(2))
    huge = make_pod("huge-priority")
    huge["spec"]["priority"] = 2**64
    int32 = make_pod("int32-priority")
    int32["spec"]["priority"] = 2**31
    node = make_node("huge-generation")
    node["metadata"]["generation"] = 2**64
    label = make_pod("bad-label", labels={"app": "väl"})
    surrogate = dump_json({"type": "ADDED", "object": make_pod("surrogate")}).replace(
        b'"app":"surrogate"', b'"app":"\\ud800"'
    )
    bad = {
        pod_subject("default", "huge-priority"): {"type": "ADDED", "object": huge},
        pod_subject("default", "int32-priority"): {"type": "ADDED", "object": int32},
        "ksched.cluster.nodes.huge-generation": {"type": "ADDED", "object": node},
        pod_subject("default", "bad-label"): {"type": "ADDED", "object": label},
        pod_subject("default", "surrogate"): surrogate,
    }
    for subject, event in bad.items():
        await publish_raw(js, subject, event)
    await publish_all(js, [make_pod(f"ok-{i}") for i in range(10)])
    assert await tracker.wait_until(lambda t: len(t.bound()) == 10, timeout=60), tracker.bound()
    reasons = {s: await error_reason(js, s) for s in bad}
    assert "spec.priority" in reasons[pod_subject("default", "huge-priority")]
    assert "spec.priority" in reasons[pod_subject("default", "int32-priority")]
    assert "metadata.generation" in reasons["ksched.cluster.nodes.huge-generation"]
    assert "metadata.labels" in reasons[pod_subject("default", "bad-label")]
    assert "metadata.labels" in reasons[pod_subject("default", "surrogate")]
    assert not set(tracker.bound()) & {"default/huge-priority", "default/int32-priority"}


# --- updates the API server refuses -----------------------------------------------------


async def test_clearing_a_bound_pods_node_name_is_refused_and_keeps_its_room(
    stack: LocalStack, client: tuple[NATS, PodTracker]
) -> None:
    """spec.nodeName is immutable once bound: an update clearing it goes to
    ksched.errors; the pod stays bound where it was (no scheduling attempts, no
    FailedScheduling), its room stays taken, and deleting it frees that room."""
    nc, tracker = client
    js = nc.jetstream()
    events = await js.subscribe(f"{EVENTS_PREFIX}.default.held", ordered_consumer=True)
    await publish_node(js, make_node("only", cpu="1"))
    await publish_pod(js, make_pod("held", cpu="1"))
    assert await tracker.wait_until(lambda t: t.bound().get("default/held") == "only", 30)

    unbound = make_pod("held", cpu="1")
    refused = await publish_raw(
        js, pod_subject("default", "held"), {"type": "MODIFIED", "object": unbound}
    )
    reason = await error_reason(js, pod_subject("default", "held"))
    assert "spec.nodeName" in reason and "Forbidden" in reason, reason

    await publish_pod(js, make_pod("waiting", cpu="1"))
    assert await tracker.wait_until(lambda t: "default/waiting" in t.unschedulable(), 30)
    # The refused update was undone: the subject holds the bound pod again, republished
    # by the watcher after the refused write, and nothing else was written.
    last = await last_pod_msg(js, "default", "held")
    assert last.seq == refused + 1 or last.seq > refused
    assert (last.headers or {}).get(UNDO_HEADER) == str(refused)
    assert json.loads(last.data or b"")["object"]["spec"]["nodeName"] == "only"
    assert tracker.bound().get("default/held") == "only"
    await publish_pod(js, make_pod("held", cpu="1"), "DELETED")
    assert await tracker.wait_until(lambda t: t.bound().get("default/waiting") == "only", 30)
    reasons = Counter()
    while True:
        try:
            msg = await events.next_msg(timeout=0.5)
        except nats.errors.TimeoutError:
            break
        reasons[json.loads(msg.data)["reason"]] += 1
    assert reasons == {"Scheduled": 1}, reasons


async def test_a_refused_object_is_undone_and_never_listed_as_a_pod(
    stack: LocalStack, client: tuple[NATS, PodTracker]
) -> None:
    """An object published on another pod's subject is refused; the watcher undoes it
    (a DELETED tombstone, since the subject held nothing before), so no reader of the
    stream takes it for a pod, and the name can then be used as usual."""
    nc, tracker = client
    js = nc.jetstream()
    await publish_node(js, make_node("only", cpu="4"))
    subject = pod_subject("default", "ghost")
    refused = await publish_raw(js, subject, {"type": "ADDED", "object": make_pod("other")})
    reason = await error_reason(js, subject)
    assert "does not match the subject" in reason, reason

    async def undone() -> bool:
        last = await last_pod_msg(js, "default", "ghost")
        return last.seq is not None and last.seq > refused

    assert await eventually(undone, 30)
    last = await last_pod_msg(js, "default", "ghost")
    assert (last.headers or {}).get(UNDO_HEADER) == str(refused)
    assert json.loads(last.data or b"")["type"] == "DELETED"
    assert await tracker.wait_until(lambda t: "default/ghost" in t.deleted(), 30)
    assert "default/other" not in tracker.pods

    await publish_pod(js, make_pod("ghost", cpu="1"))
    assert await tracker.wait_until(lambda t: t.bound().get("default/ghost") == "only", 30)


# --- redelivered binds -------------------------------------------------------------------


async def test_a_redelivered_bind_records_one_scheduled_event(
    stack: LocalStack, client: tuple[NATS, PodTracker]
) -> None:
    """A bind request delivered again after its binding went through (a binder that
    died before acking) is recognised as done, and the binding's Scheduled event is not
    recorded twice."""
    nc, tracker = client
    js = nc.jetstream()
    events = await js.subscribe(f"{EVENTS_PREFIX}.default.once", ordered_consumer=True)
    await publish_node(js, make_node("n1"))
    pod = make_pod("once")
    seq = await publish_pod(js, pod)
    assert await tracker.wait_until(lambda t: t.bound().get("default/once") == "n1", 30)
    first = await events.next_msg(timeout=10)
    assert json.loads(first.data)["reason"] == "Scheduled"

    again = {
        "key": "default/once",
        "uid": pod["metadata"]["uid"],
        "seq": seq,
        "node": "n1",
        "cycle": 1,
        "pod": pod,
        "profile": "default-scheduler",
        "assumed_at": 0.0,
    }
    await js.publish(BIND_SUBJECT, pack({"requests": [again]}))
    with pytest.raises(nats.errors.TimeoutError):
        dup = await events.next_msg(timeout=5)
        pytest.fail(f"a second event: {dup.data!r}")
    assert tracker.pods["default/once"].bound_writes == 1


# --- a binder frozen past its lease ----------------------------------------------------

BINDING_LEASE = 4.0


@pytest.fixture
def one_binder_stack(tmp_path: Path) -> Iterator[LocalStack]:
    stack = make_test_stack(tmp_path / "stack", binders=1)
    stack.env["KSCHED_QUEUE_BINDING_LEASE_SECONDS"] = str(BINDING_LEASE)
    with running(stack) as st:
        yield st


async def follow(stack: LocalStack) -> tuple[NATS, PodTracker, ServiceProc]:
    """A connection, the pods it follows, and the stack's (one) binder."""
    nc = await nats.connect(stack.nats_url)
    tracker = PodTracker()
    await tracker.start(nc)
    return nc, tracker, next(s for s in stack.services if s.name == "binder")


async def assumed(stack: LocalStack, prefix: str) -> int:
    """How many pods named `prefix…` the cache holds as assumed."""
    client = aioredis.Redis.from_url(stack.redis_url)
    try:
        return sum(1 for key in await assumed_pods(client) if key.startswith(prefix))
    finally:
        await client.aclose()


@pytest.mark.timeout(240)
async def test_a_binder_frozen_past_its_lease_never_overcommits_a_node(
    one_binder_stack: LocalStack,
) -> None:
    """The issue's scenario: the only binder frozen (SIGSTOP) while 20 pods wait to bind
    on 10 full nodes; 10 empty nodes are added, and the freeze outlasts the binding
    lease, so the pods are scheduled again, onto the new nodes; a second wave of 20
    fills the first nodes; then the binder thaws with the first attempts' binds still
    in hand. The lapsed attempts were fenced, so those binds fail as conflicts: every
    pod binds once, and no node holds more cpu than it has (2 pods of 1 cpu per 2-cpu
    node)."""
    stack = one_binder_stack
    nc, tracker, binder = await follow(stack)
    try:
        js = nc.jetstream()
        await publish_all(js, nodes(10, cpu="2", prefix="old-"))
        binder.proc.send_signal(signal.SIGSTOP)
        await publish_all(js, [make_pod(f"first-{i}", cpu="1") for i in range(20)])
        assert await eventually(lambda: _is(assumed(stack, "default/first-"), 20), timeout=30)
        await publish_all(js, nodes(10, cpu="2", prefix="new-"))
        await asyncio.sleep(BINDING_LEASE + 3)  # the freeze outlasts the lease
        await publish_all(js, [make_pod(f"second-{i}", cpu="1") for i in range(20)])
        assert await eventually(lambda: _is(assumed(stack, "default/second-"), 20), timeout=30)
        binder.proc.send_signal(signal.SIGCONT)
        await all_bound_once_within_capacity(tracker, pods=40, per_node=2)
    finally:
        if binder.proc.poll() is None:
            binder.proc.send_signal(signal.SIGCONT)
        await nc.close()


@pytest.mark.timeout(240)
async def test_room_a_fenced_attempt_held_gives_turned_away_pods_another_look(
    one_binder_stack: LocalStack,
) -> None:
    """The only binder frozen with two pods of 1 cpu assumed on a 4-cpu node; a pod of
    3 cpu (a higher priority) is turned away: Insufficient cpu. The freeze outlasts the
    binding lease, so the queue fences the two attempts and the cache forgets their
    room: the pod turned away gets another look then (as kube moves pods when a binding
    cycle forgets its pod), not minutes later, and is assumed while the binder is
    still frozen."""
    stack = one_binder_stack
    nc, tracker, binder = await follow(stack)
    try:
        js = nc.jetstream()
        binder.proc.send_signal(signal.SIGSTOP)
        await publish_all(js, [make_node("only", cpu="4", memory="64Gi")])
        await publish_all(js, [make_pod(f"first-{i}", cpu="1") for i in range(2)])
        assert await eventually(lambda: _is(assumed(stack, "default/first-"), 2), timeout=30)
        await publish_all(js, [make_pod("big", cpu="3", priority=100)])
        assert await tracker.wait_until(
            lambda t: "Insufficient cpu" in t.unschedulable().get("default/big", ""), timeout=30
        )
        assert await eventually(
            lambda: _is(assumed(stack, "default/big"), 1), timeout=BINDING_LEASE + 20
        )
    finally:
        binder.proc.send_signal(signal.SIGCONT)
        await nc.close()


async def all_bound_once_within_capacity(tracker: PodTracker, pods: int, per_node: int) -> None:
    assert await tracker.wait_until(lambda t: len(t.bound()) == pods, timeout=120), (
        f"{len(tracker.bound())} of {pods} bound"
    )
    placed = Counter(tracker.bound().values())
    assert max(placed.values()) <= per_node, placed
    assert all(v.bind_count == 1 for v in tracker.pods.values())


async def _is(count: Awaitable[int], expected: int) -> bool:
    return await count == expected


@pytest.fixture
def workerless_stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The stack without workers: the test starts them, each as it needs."""
    stack = make_test_stack(tmp_path / "stack")
    stack.workers = 0
    with running(stack) as st:
        yield st


@pytest.mark.timeout(240)
async def test_a_worker_frozen_before_its_report_never_overcommits_a_node(
    workerless_stack: LocalStack,
) -> None:
    """The worker-crash route: the only worker hands 20 assumed pods to the binders and
    then pauses before its report, past its in-flight lease (a failpoint, as if frozen),
    while the binder is slow (frozen) so the bind requests wait. A second worker and 10
    empty nodes come; the lapsed attempts are fenced and the pods scheduled again; a
    second wave follows; then the binder thaws and meets the first attempts' binds
    first. They fail as conflicts: every pod binds once, and no node holds more cpu
    than it has."""
    stack = workerless_stack
    stack.service_env["worker"] = {"KSCHED_FAILPOINTS": "worker.handed=pause:8"}
    stack.start_service("worker")
    stack.service_env.pop("worker")
    nc = await nats.connect(stack.nats_url)
    tracker = PodTracker()
    await tracker.start(nc)
    try:
        js = nc.jetstream()
        await publish_all(js, nodes(10, cpu="2", prefix="old-"))
        signal_binders(stack, signal.SIGSTOP)
        await publish_all(js, [make_pod(f"first-{i}", cpu="1") for i in range(20)])
        assert await eventually(lambda: _is(assumed(stack, "default/first-"), 20), timeout=30)
        await publish_all(js, nodes(10, cpu="2", prefix="new-"))
        stack.start_service("worker")
        await asyncio.sleep(5)  # past the 3 s in-flight lease: the pods go out again
        await publish_all(js, [make_pod(f"second-{i}", cpu="1") for i in range(20)])
        assert await eventually(lambda: _is(assumed(stack, "default/second-"), 20), timeout=30)
        signal_binders(stack, signal.SIGCONT)
        await all_bound_once_within_capacity(tracker, pods=40, per_node=2)
    finally:
        signal_binders(stack, signal.SIGCONT)
        await nc.close()


def signal_binders(stack: LocalStack, sig: signal.Signals) -> None:
    for svc in stack.services:
        if svc.name == "binder" and svc.proc.poll() is None:
            svc.proc.send_signal(sig)
