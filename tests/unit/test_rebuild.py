"""Redis data loss, the pure parts (docs/reliability.md, "Redis data loss"): the state
marker's verdicts, the log's latest events routed for a rebuild, the assumptions in
flight put back into the cache, and the queue's pods held to be fenced."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from services.cache.cache import ADDED, ASSUMED, Cache
from services.cache.rebuild import assume_in_flight, unknown_to
from services.queue.fence import Lapsed, lapse_message
from services.queue.podinfo import GATED, INFLIGHT, Gating
from services.queue.queue import SchedulingQueue
from services.queue.rebuild import rebuild
from shared.config import SchedulerConfiguration
from shared.framework.profile_map import ProfileMap
from shared.messages import BindRequest, QueueEvent
from shared.plugins import REGISTRY
from shared.relist import Entry, Latest, route_latest
from shared.runtime.watermark import (
    Marker,
    Watermark,
    incarnation_base,
    lost_at_takeover,
    lost_while_leading,
)
from shared.wire import dump_json
from tests.builders import make_node, make_pod
from tests.unit.conftest import Clock

SERVED = frozenset({"default-scheduler"})


# --- the state marker ---------------------------------------------------------------


def test_the_marker_reads_as_redis_returns_it() -> None:
    raw = {b"incarnation": b"7", b"applied": b"4711", b"writes": b"3"}
    assert Marker.of(raw) == Marker(7, 4711, 3)
    assert Marker.of({}) == Marker(0, 0, 0)


@pytest.mark.parametrize(
    ("marker", "acked", "lost"),
    [
        (Marker(0, 0, 0), {"watcher": 0}, "no state marker"),  # wiped, or a fresh Redis
        (Marker(0, 900, 4), {"watcher": 900}, "no state marker"),
        (Marker(3, 899, 9), {"watcher": 900}, "events applied through sequence 899"),  # went back
        (Marker(3, 900, 9), {"watcher": 900}, None),
        (Marker(3, 950, 9), {"watcher": 900}, None),  # applied, not yet acknowledged
    ],
)
def test_a_new_leader_trusts_redis_only_as_far_as_the_watcher_acknowledged(
    marker: Marker, acked: int, lost: str | None
) -> None:
    why = lost_at_takeover(marker, acked)
    assert (why is None) == (lost is None)
    assert lost is None or (why is not None and why.startswith(lost))


@pytest.mark.parametrize(
    ("marker", "lost"),
    [
        (Marker(0, 0, 0), "the state marker is gone"),
        (Marker(4, 100, 50), "Redis holds incarnation 4, not 5"),  # back before a rewrite
        (Marker(5, 100, 11), "Redis holds 11 of the 12 writes"),
        (Marker(5, 100, 12), None),
        (Marker(5, 100, 13), None),  # a write landing while the marker was read
        (Marker(6, 100, 1), None),  # a successor's: fencing deposes this leader
    ],
)
def test_a_leader_sees_redis_lose_what_it_wrote(marker: Marker, lost: str | None) -> None:
    why = lost_while_leading(marker, 5, 12)
    assert (why is None) == (lost is None)
    assert lost is None or (why is not None and why.startswith(lost))


def test_a_rebuilt_state_skips_the_events_its_list_held_and_counts_on() -> None:
    mark = Watermark("cache")
    mark.start(9, 1200, cut=1200)
    assert [mark.holds(s) for s in (None, 1199, 1200, 1201)] == [False, True, True, False]
    mark.through(1100)  # a redelivered batch's end, older than the list
    mark.through(None)
    assert mark.applied == 1200
    mark.through(1250)
    assert mark.applied == 1250
    mark.start(10, mark.applied)  # a rewrite keeps what the state holds
    assert (mark.incarnation, mark.writes, mark.cut) == (10, 0, 1200)


def test_incarnations_hand_out_numbers_above_any_earlier_one() -> None:
    assert incarnation_base(2) > incarnation_base(1) + 4_000_000_000


# --- the log's latest events, routed -------------------------------------------------


def event(etype: str, obj: dict[str, Any]) -> bytes:
    return dump_json({"type": etype, "object": obj})


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def latest(*entries: tuple[str, int, bytes], cut: int = 100) -> Latest:
    return Latest(cut, {subject: Entry(seq, data, None) for subject, seq, data in entries})


def pod_with(name: str, **spec: Any) -> dict[str, Any]:
    pod = make_pod(name).req(cpu="1").obj()
    pod["spec"].update(spec)
    return pod


def test_the_latest_events_route_as_the_watcher_routes_them() -> None:
    pods = "ksched.cluster.pods.default"
    listed = latest(
        ("ksched.cluster.nodes.n1", 1, event("ADDED", make_node("n1").obj())),
        (f"{pods}.pending", 3, event("ADDED", pod_with("pending", priorityClassName="high"))),
        (f"{pods}.bound", 4, event("MODIFIED", pod_with("bound", nodeName="n1"))),
        ("ksched.cluster.priorityclasses.high", 5, event("ADDED", priority_class("high", 1000))),
        (f"{pods}.other", 6, event("ADDED", pod_with("other", schedulerName="x"))),
        (f"{pods}.gone", 7, event("DELETED", pod_with("gone"))),
        (f"{pods}.bad", 8, b"{not json"),
        (f"{pods}.refused", 9, event("ADDED", pod_with("refused", priorityClassName="none"))),
    )
    relisted = route_latest(listed, SERVED)
    assert relisted.cut == 100
    upserts = [e for e in relisted.queue if e["op"] == "upsert"]
    assert [e["key"] for e in upserts] == ["default/pending"]
    # admission knew the class published after the pod, as the watcher did then
    assert upserts[0]["pod"]["spec"]["priority"] == 1000
    assert upserts[0]["size"] == len(listed.entries[f"{pods}.pending"].data)
    assert [(e["op"], e["name"]) for e in relisted.cache] == [
        ("node_upsert", "n1"),
        ("pod_upsert", "default/bound"),
        ("pod_delete", "default/gone"),
    ]
    # every item names its event, so that a redelivery of it is skipped
    assert all("seq" in e for e in [*relisted.queue, *relisted.cache])
    assert relisted.pending() == {"default/pending": ("uid-default-pending", 3)}


# --- the cache: assumptions in flight ------------------------------------------------

FRAMEWORKS = ProfileMap(SchedulerConfiguration(), REGISTRY)


def request(name: str, node: str, seq: int, cycle: int, **over: Any) -> BindRequest:
    req: dict[str, Any] = {
        "key": f"default/{name}",
        "uid": f"uid-default-{name}",
        "seq": seq,
        "node": node,
        "cycle": cycle,
        "pod": make_pod(name).req(cpu="1").obj(),
        "profile": "default-scheduler",
        "assumed_at": 0.0,
        **over,
    }
    return req  # type: ignore[return-value]


@pytest.fixture
def cache(clock: Clock) -> Cache:
    c = Cache(clock)
    for name in ("a", "b"):
        c.add_or_update_node(make_node(name).capacity(cpu="4", memory="8Gi", pods=10).obj())
    return c


def test_requests_in_flight_are_assumed_while_their_pod_waits_at_that_version(
    cache: Cache,
) -> None:
    requests = [
        (10, request("p1", "a", seq=5, cycle=1)),  # the pod is still at 5: it may bind
        (11, request("p2", "a", seq=5, cycle=2)),  # the pod moved on to 8: it cannot
        (12, request("p3", "b", seq=6, cycle=3, profile="gone")),  # no such profile
        (13, request("p4", "a", seq=7, cycle=4)),  # superseded by the next request
        (14, request("p4", "b", seq=7, cycle=9)),
        (15, request("p5", "b", seq=2, cycle=5)),  # not pending: bound or deleted
    ]
    pending = {
        "default/p1": ("uid-default-p1", 5),
        "default/p2": ("uid-default-p2", 8),
        "default/p3": ("uid-default-p3", 6),
        "default/p4": ("uid-default-p4", 7),
    }
    assumed = assume_in_flight(cache, FRAMEWORKS, requests, pending)
    assert assumed == ["default/p1", "default/p4", "default/p4"]
    assert {k: (s.node, s.state, s.cycle) for k, s in cache.pods.items()} == {
        "default/p1": ("a", ASSUMED, 1),
        "default/p4": ("b", ASSUMED, 9),
    }
    assert cache.nodes["a"].requested["cpu"] == 1000
    assert cache.nodes["b"].requested["cpu"] == 1000


def test_a_bound_pod_keeps_its_node_whatever_a_request_says(cache: Cache) -> None:
    bound = make_pod("p1").req(cpu="1").node("a").info(9)
    cache.add_pod("default/p1", "uid-default-p1", "a", bound, 9)
    req = request("p1", "b", seq=9, cycle=1)
    assert unknown_to(cache, [(1, req), (2, request("p2", "a", 3, 2))]) == {"default/p2"}
    pending = {"default/p1": ("uid-default-p1", 9)}
    assert assume_in_flight(cache, FRAMEWORKS, [(1, req)], pending) == []
    assert (cache.pods["default/p1"].node, cache.pods["default/p1"].state) == ("a", ADDED)


# --- the queue: pods held to be fenced -----------------------------------------------


def upsert(name: str, seq: int) -> QueueEvent:
    key, uid = f"default/{name}", f"uid-default-{name}"
    return {"op": "upsert", "key": key, "uid": uid, "seq": seq, "pod": make_pod(name).obj()}


def adder(q: SchedulingQueue, applied: list[QueueEvent]) -> Callable[[QueueEvent], None]:
    def apply(ev: QueueEvent) -> None:
        applied.append(ev)
        q.add(ev["key"], ev["uid"], ev["pod"], ev["seq"])

    return apply


def test_a_rebuilt_queue_fences_every_pod_before_it_goes_out(clock: Clock) -> None:
    q = SchedulingQueue(clock)
    move: QueueEvent = {"op": "move", "resource": "Node", "action": "Add", "seq": 4}
    applied: list[QueueEvent] = []
    assert rebuild(q, [upsert("a", 3), move, upsert("b", 5)], adder(q, applied), fence=True) == 2
    assert [e["op"] for e in applied] == ["upsert", "upsert"]
    assert q.pop(10) == []  # nothing goes out before its fence
    lapsed = q.expire_leases()
    assert sorted((p.key, p.cycle, p.where) for p in lapsed) == [
        ("default/a", 0, INFLIGHT),
        ("default/b", 0, INFLIGHT),
    ]
    message = lapse_message(Lapsed.of(lapsed[0], binding=False), 15)
    assert "rebuilt from the log" in message
    assert q.requeue_lapsed("default/a", 0, 9)  # fenced: the subject is at 9 now
    (popped,) = q.pop(10)
    assert (popped.key, popped.seq) == ("default/a", 9)


def test_a_gated_pod_is_not_held(clock: Clock) -> None:
    """It never went out: nothing to fence (and its status says why it waits)."""

    def gate(raw: dict[str, Any]) -> Gating | None:
        gated = raw["metadata"]["name"] == "g"
        return Gating("SchedulingGates", "waiting for scheduling gates") if gated else None

    q = SchedulingQueue(clock, pre_enqueue=gate)
    assert rebuild(q, [upsert("g", 1), upsert("a", 2)], adder(q, []), fence=True) == 1
    assert dict(q.pending()) == {"default/g": GATED, "default/a": INFLIGHT}


def test_a_queue_built_on_a_first_start_holds_nothing(clock: Clock) -> None:
    """No earlier incarnation handed anything out: the pods go out at once."""
    q = SchedulingQueue(clock)
    assert rebuild(q, [upsert("a", 3)], adder(q, []), fence=False) == 0
    assert [p.key for p in q.pop(10)] == ["default/a"]
