"""PendingPods and stats as the queue's inspection service serves them."""

from __future__ import annotations

import pytest

from services.queue.inspect import pending_reply, stats_reply
from services.queue.queue import SchedulingQueue
from tests.unit.test_queue import PRE_ENQUEUE, T0, FakeClock
from tests.unit.test_queue_events import pod
from tests.unit.test_queue_hints import FIT, HINTS, add, key, reject


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> SchedulingQueue:
    return SchedulingQueue(clock, hints=HINTS, pre_enqueue=PRE_ENQUEUE)


def test_pending_pods_listing(q: SchedulingQueue, clock: FakeClock) -> None:
    add(q, pod("gated", gates=["g"]))
    unsched = reject(q, pod("unsched", cpu="2"), FIT)
    clock.advance(1)
    add(q, pod("active-low"))
    hi = add(q, pod("active-high"))
    q.get(hi).priority = 5  # type: ignore[union-attr]
    q.update(hi, "uid-active-high", pod("active-high") | {"spec": {"priority": 5}}, 2)
    reply = pending_reply(q, {})
    assert [(p["key"], p["queue"]) for p in reply["pods"]] == [
        (key("active-high"), "active"),
        (key("active-low"), "active"),
        (key("unsched"), "unschedulable"),
        (key("gated"), "gated"),
    ]
    entry = reply["pods"][2]
    assert entry["attempts"] == 1 and entry["unschedulable_plugins"] == [FIT]
    assert entry["backoff_expiry"] == unsched.backoff_expiry == T0 + 1
    assert entry["message"] == "m"
    assert reply["summary"] == "activeQ:2; backoffQ:0; unschedulablePods:2"
    only = pending_reply(q, {"queue": "unschedulable", "limit": 5})
    assert [p["key"] for p in only["pods"]] == [key("unsched")] and only["total"] == 1
    assert pending_reply(q, {"limit": 1})["total"] == 4
    with pytest.raises(ValueError, match="queue must be one of"):
        pending_reply(q, {"queue": "nowhere"})


def test_stats(q: SchedulingQueue) -> None:
    add(q, pod("a", nominated="n1"))
    stats = stats_reply(q)
    assert stats["counts"]["active"] == 1 and stats["nominated"] == 1
    assert stats["scheduling_cycle"] == 0 and stats["hint_errors"] == 0
