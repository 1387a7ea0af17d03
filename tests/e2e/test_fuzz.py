"""Hostile input against a running ksched (hypothesis): every public subject and every
internal one gets malformed, truncated, oversized, wrong-typed and adversarial
messages. No service crashes or stalls, a rejected public message is on
ksched.errors.<subject> with its reason (exactly those the watcher's decoder refuses),
memory stays bounded, and a normal pod still schedules afterwards."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client as NATS
from nats.js.errors import NotFoundError

from shared.api.events import BadEvent, decode_cluster_event
from shared.runtime.leasestore import LeaseStore
from shared.subjects import (
    BIND_DEAD_LETTER,
    BIND_STREAM,
    BIND_SUBJECT,
    CACHE_ASSUME,
    CACHE_BINDING,
    CACHE_EVENTS,
    CACHE_NOMINATE,
    CACHE_PERMIT,
    ERROR_HEADER,
    ERRORS_STREAM,
    PERMIT_VERDICTS,
    QUEUE_EVENTS,
    QUEUE_NOMINATED,
    QUEUE_POP,
    QUEUE_REPORT,
    error_subject,
)
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack
from tests.conftest import make_test_stack
from tests.fuzz_strategies import NAME, NAMESPACE, internal_request, watch_event

pytestmark = pytest.mark.e2e

# KSCHED_FUZZ_EXAMPLES=500 (and KSCHED_FUZZ_RANDOM=1 for new examples) digs deeper.
FUZZ = settings(
    max_examples=int(os.environ.get("KSCHED_FUZZ_EXAMPLES", "20")),
    deadline=None,
    derandomize=not os.environ.get("KSCHED_FUZZ_RANDOM"),  # `make test` stays repeatable
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SUBJECTS = {
    "pod": [
        "ksched.cluster.pods.{ns}.{name}",
        "ksched.cluster.pods.{ns}",
        "ksched.cluster.pods.{ns}.{name}.x",
    ],
    "node": ["ksched.cluster.nodes.{name}", "ksched.cluster.widgets.{name}"],
    "pdb": ["ksched.cluster.pdbs.{ns}.{name}"],
    "podgroup": ["ksched.cluster.podgroups.{ns}.{name}"],
}
RPC_SUBJECTS = [
    QUEUE_EVENTS,
    QUEUE_POP,
    QUEUE_REPORT,
    QUEUE_NOMINATED,
    CACHE_EVENTS,
    CACHE_ASSUME,
    CACHE_BINDING,
    CACHE_NOMINATE,
    CACHE_PERMIT,
]
RSS_GROWTH_LIMIT_MB = 400


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with running(make_test_stack(tmp_path_factory.mktemp("fuzz") / "stack")) as stack:
        rss_before = {s.proc.pid: rss_mb(s.proc.pid) for s in stack.services}
        yield stack
        check_alive_and_bounded(stack, rss_before)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def check_alive_and_bounded(stack: LocalStack, before: dict[int, float]) -> None:
    for svc in stack.services:
        assert svc.proc.poll() is None, f"{svc.name} died: see {svc.log_path}"
        grew = rss_mb(svc.proc.pid) - before[svc.proc.pid]
        assert grew < RSS_GROWTH_LIMIT_MB, f"{svc.name} grew by {grew:.0f} MB"


_unique = itertools.count(1)

event_batch = st.lists(
    st.sampled_from(sorted(SUBJECTS)).flatmap(
        lambda kind: st.tuples(st.just(kind), st.sampled_from(SUBJECTS[kind]), watch_event(kind))
    ),
    min_size=1,
    max_size=12,
)


def personalize(template: str, data: bytes) -> tuple[str, bytes]:
    """A subject and payload with a name and namespace no other message has."""
    n = next(_unique)
    name, ns = f"f{n:013d}", f"n{n:013d}"
    data = data.replace(NAME.encode(), name.encode()).replace(NAMESPACE.encode(), ns.encode())
    return template.format(name=name, ns=ns), data


def refused(subject: str, data: bytes, headers: dict[str, str]) -> bool:
    """The oracle: what the watcher's decoder says about the message."""
    try:
        decode_cluster_event(subject, data, headers or None, 1)
    except BadEvent:
        return True
    return False


async def error_of(js: Any, subject: str) -> str | None:
    try:
        msg = await js.get_last_msg(ERRORS_STREAM, error_subject(subject))
    except NotFoundError:
        return None
    return str((msg.headers or {}).get(ERROR_HEADER, ""))  # non-ASCII: an email Header


async def wait_error(js: Any, subject: str, timeout: float = 30) -> str:
    for _ in range(int(timeout / 0.1)):
        reason = await error_of(js, subject)
        if reason is not None:
            return reason
        await asyncio.sleep(0.1)
    raise AssertionError(f"no ksched.errors message for {subject}")


async def publish_and_check(
    url: str, batch: list[tuple[str, str, tuple[bytes, dict[str, str]]]]
) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        sent = []
        for _, template, (data, headers) in batch:
            subject, payload = personalize(template, data)
            await js.publish(subject, payload, headers=headers or None)
            sent.append((subject, refused(subject, payload, headers)))
        # The watcher handles the stream in order: once this one is refused, all were seen.
        sentinel, _ = personalize("ksched.cluster.pods.{ns}.{name}", b"{not json")
        await js.publish(sentinel, b"{not json")
        await wait_error(js, sentinel)
        for subject, expected in sent:
            reason = await error_of(js, subject)
            assert (reason is not None) == expected, (subject, reason)
            assert reason is None or reason.strip(), f"{subject}: empty reason"
    finally:
        await nc.close()


@pytest.mark.timeout(900)
def test_hostile_watch_events_are_refused_with_a_reason(fuzz_stack: LocalStack) -> None:
    @FUZZ
    @given(batch=event_batch)
    def check(batch: list[tuple[str, str, tuple[bytes, dict[str, str]]]]) -> None:
        asyncio.run(publish_and_check(fuzz_stack.nats_url, batch))

    check()


def test_an_oversized_event_is_refused_at_the_door_or_on_ksched_errors(
    fuzz_stack: LocalStack,
) -> None:
    async def scenario() -> None:
        nc = await nats.connect(fuzz_stack.nats_url)
        try:
            js = nc.jetstream()
            big = make_pod("big")
            big["metadata"]["labels"] = {f"k{i}": "v" * 60 for i in range(20_000)}  # > 1 MB
            with pytest.raises(nats.errors.MaxPayloadError):
                await js.publish("ksched.cluster.pods.default.big", pack(big))
            many = make_pod("many-labels")
            many["metadata"]["labels"] = {f"k{i}": f"v{i}" for i in range(10_000)}
            await publish_all(js, [many])  # 10k labels: valid, just large
        finally:
            await nc.close()

    asyncio.run(scenario())


async def current_watcher_epoch(stack: LocalStack) -> int:
    """The watcher leader's epoch, from the lease bucket that hands epochs out."""
    nc = await nats.connect(stack.nats_url)
    try:
        return await (await LeaseStore.open(nc.jetstream())).epoch("watcher")
    finally:
        await nc.close()


def packed(body: Any) -> bytes:
    try:
        return pack(body)
    except (OverflowError, ValueError, TypeError):  # beyond msgpack (ints past 64 bits)
        return b"\xc1 unpackable"


async def fire_internal(nc: NATS, subject: str, body: Any, epoch: int, raw: bool) -> None:
    if isinstance(body, dict) and subject in (QUEUE_EVENTS, CACHE_EVENTS) and epoch:
        body = {**body, "epoch": epoch}  # past the fence, into the handlers
    if isinstance(body, dict) and subject == QUEUE_POP:
        wait = body.get("wait_ms")
        if isinstance(wait, int | float) and wait > 500:
            body = {**body, "wait_ms": 500}  # a long poll is no stall; keep the test short
    data = b"\xc1\xff garbage" if raw else packed(body)
    if len(data) > nc.max_payload:
        return  # refused by NATS itself
    # Every request is answered (an error is an answer): nothing stalls on bad input.
    await nc.request(subject, data, timeout=10)


@pytest.mark.timeout(900)
def test_hostile_internal_requests_are_answered_and_change_nothing_fatal(
    fuzz_stack: LocalStack,
) -> None:
    epoch = asyncio.run(current_watcher_epoch(fuzz_stack))
    assert epoch >= 1

    @FUZZ
    @given(
        requests=st.lists(
            st.tuples(internal_request(RPC_SUBJECTS), st.booleans(), st.booleans()),
            min_size=1,
            max_size=10,
        )
    )
    def check(requests: list[tuple[tuple[str, Any], bool, bool]]) -> None:
        async def run() -> None:
            nc = await nats.connect(fuzz_stack.nats_url)
            try:
                for (subject, body), with_epoch, raw in requests:
                    await fire_internal(nc, subject, body, epoch if with_epoch else 0, raw)
                for (_, body), _, raw in requests[:3]:  # fan-out and the bind queue too
                    data = b"\x00" if raw else packed(body)
                    if len(data) <= nc.max_payload:
                        await nc.publish(PERMIT_VERDICTS, data)
                        await nc.jetstream().publish(BIND_SUBJECT, data)
            finally:
                await nc.close()

        asyncio.run(run())

    check()

    async def bind_queue_drains() -> None:
        nc = await nats.connect(fuzz_stack.nats_url)
        try:
            js = nc.jetstream()
            for _ in range(300):
                if (await js.stream_info(BIND_STREAM)).state.messages == 0:
                    break
                await asyncio.sleep(0.1)
            assert (await js.stream_info(BIND_STREAM)).state.messages == 0
            assert await js.get_last_msg(ERRORS_STREAM, BIND_DEAD_LETTER)  # dead-lettered
        finally:
            await nc.close()

    asyncio.run(bind_queue_drains())


def test_after_the_fuzzing_a_normal_pod_still_schedules(fuzz_stack: LocalStack) -> None:
    async def scenario() -> None:
        nc = await nats.connect(fuzz_stack.nats_url)
        try:
            tracker = PodTracker()
            await tracker.start(nc)
            js = nc.jetstream()
            node = make_node("after-fuzz", cpu="8", memory="32Gi")
            node["metadata"]["labels"]["fuzz"] = "after"
            pod = make_pod("after-fuzz")
            pod["spec"]["nodeSelector"] = {"fuzz": "after"}
            await publish_all(js, [node, pod])
            assert await tracker.wait_until(
                lambda t: t.bound().get("default/after-fuzz") == "after-fuzz", timeout=60
            )
        finally:
            await nc.close()

    asyncio.run(scenario())
