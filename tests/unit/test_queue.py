"""Unit tests for the pure scheduling queue (kube's PriorityQueue semantics)."""

from __future__ import annotations

import copy
import random
from typing import Any

import msgpack
import pytest

from services.queue.preenqueue import run_pre_enqueue
from services.queue.queue import QueuedPodInfo, SchedulingQueue
from shared.config import Profile
from shared.framework.runtime import Framework
from shared.plugins import REGISTRY

T0 = 1000.0
# The default profile's PreEnqueue plugins (SchedulingGates), as the queue service runs them.
PRE_ENQUEUE = run_pre_enqueue(
    {Profile().scheduler_name: Framework.from_profile(Profile(), REGISTRY)}
)


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


def pod(
    name: str,
    *,
    priority: int | None = None,
    gates: list[str] | None = None,
    labels: dict[str, str] | None = None,
    rv: int = 1,
    uid: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if priority is not None:
        spec["priority"] = priority
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {
        "metadata": {
            "namespace": "default",
            "name": name,
            "uid": uid or f"uid-{name}",
            "resourceVersion": str(rv),
            "labels": labels or {},
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def key(name: str) -> str:
    return f"default/{name}"


def add(q: SchedulingQueue, name: str, seq: int = 1, **kw: Any) -> str:
    raw = pod(name, rv=seq, **kw)
    q.add(key(name), raw["metadata"]["uid"], raw, seq)
    return key(name)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> SchedulingQueue:
    return SchedulingQueue(clock, pre_enqueue=PRE_ENQUEUE)


def pop_one(q: SchedulingQueue) -> QueuedPodInfo:
    popped = q.pop(1)
    assert len(popped) == 1
    return popped[0]


def make_unschedulable(q: SchedulingQueue, name: str, seq: int = 1) -> QueuedPodInfo:
    k = add(q, name, seq)
    qpi = pop_one(q)
    assert qpi.key == k
    assert q.failed(k, qpi.cycle, unschedulable=True, message="no fit", plugins=["Fit"])
    assert qpi.where == "unschedulable"
    return qpi


def put_in(q: SchedulingQueue, clock: FakeClock, name: str, where: str) -> str:
    """Drive a fresh pod into the sub-queue `where` through the public API."""
    if where == "gated":
        return add(q, name, gates=["example.com/wait"])
    k = add(q, name)
    if where == "active":
        return k
    qpi = pop_one(q)
    if where == "binding":
        assert q.assumed(k, qpi.cycle)
    elif where == "backoff":
        assert q.failed(k, qpi.cycle, unschedulable=False, message="boom", plugins=[])
    elif where == "unschedulable":
        assert q.failed(k, qpi.cycle, unschedulable=True, message="no fit", plugins=["X"])
    assert q.get(k) is not None and q.get(k).where == where  # type: ignore[union-attr]
    return k


ALL_WHERES = ["active", "backoff", "unschedulable", "gated", "inflight", "binding"]


# --- ordering and popping -------------------------------------------------------


def test_priority_sort_order(q: SchedulingQueue, clock: FakeClock) -> None:
    # (name, priority) in arrival order, one second apart
    arrivals = [("a", 0), ("b", 10), ("c", None), ("d", 10), ("e", -5), ("f", 100)]
    for name, prio in arrivals:
        add(q, name, priority=prio)
        clock.advance(1)
    assert [p.key for p in q.pop(10)] == [key(n) for n in ["f", "b", "d", "a", "c", "e"]]
    assert q.pop(10) == []


def test_pop_respects_n_and_fifo_on_equal_timestamps(q: SchedulingQueue) -> None:
    for name in "abcde":
        add(q, name)  # same clock value: arrival order breaks the tie
    assert [p.key for p in q.pop(2)] == [key("a"), key("b")]
    assert q.pop(0) == []
    assert [p.key for p in q.pop(5)] == [key("c"), key("d"), key("e")]
    assert q.counts()["inflight"] == 5
    assert q.counts()["active"] == 0


def test_pop_increments_cycle_and_attempts(q: SchedulingQueue, clock: FakeClock) -> None:
    k = add(q, "a")
    add(q, "b")
    first = pop_one(q)
    assert (first.key, first.cycle, first.attempts, q.scheduling_cycle) == (k, 1, 1, 1)
    assert first.initial_attempt_timestamp == T0
    assert first.where == "inflight"
    assert first.lease_deadline == T0 + 15.0
    assert pop_one(q).cycle == 2

    clock.advance(5)
    assert q.failed(k, 1, unschedulable=False, message="err", plugins=[])
    clock.advance(1)
    assert q.flush_backoff_completed() == 1
    again = pop_one(q)
    assert (again.key, again.cycle, again.attempts, q.scheduling_cycle) == (k, 3, 2, 3)
    assert again.initial_attempt_timestamp == T0  # set on the first pop only
    assert again.lease_deadline == clock() + 15.0


# --- failures, backoff and move requests ------------------------------------------


def test_backoff_durations_double_up_to_the_cap(q: SchedulingQueue, clock: FakeClock) -> None:
    k = add(q, "a")
    durations = []
    for _ in range(6):
        qpi = pop_one(q)
        assert q.failed(k, qpi.cycle, unschedulable=False, message="err", plugins=[])
        assert qpi.where == "backoff"
        durations.append(qpi.backoff_expiry - qpi.timestamp)
        clock.advance(qpi.backoff_expiry - clock())
        assert q.flush_backoff_completed() == 1
    assert durations == [1, 2, 4, 8, 10, 10]


@pytest.mark.parametrize(
    ("attempts", "initial", "maximum", "expected"),
    [(0, 1.0, 10.0, 1.0), (1, 1.0, 10.0, 1.0), (3, 0.5, 10.0, 2.0), (10_000, 1.0, 10.0, 10.0)],
)
def test_backoff_duration(
    clock: FakeClock, attempts: int, initial: float, maximum: float, expected: float
) -> None:
    q = SchedulingQueue(clock, initial_backoff=initial, max_backoff=maximum)
    assert q.backoff_duration(attempts) == expected


@pytest.mark.parametrize(
    ("move_before_pop", "move_during_cycle", "unschedulable", "expected"),
    [
        (False, False, True, "unschedulable"),  # no move request: wait for an event
        (True, False, True, "unschedulable"),  # move request predates the cycle
        (False, True, True, "backoff"),  # move request during the cycle
        (False, False, False, "backoff"),  # an Error always backs off
        (False, True, False, "backoff"),
    ],
)
def test_failed_destination(
    q: SchedulingQueue,
    move_before_pop: bool,
    move_during_cycle: bool,
    unschedulable: bool,
    expected: str,
) -> None:
    k = add(q, "a")
    if move_before_pop:
        q.move_all_to_active_or_backoff("NodeAdd")
    qpi = pop_one(q)
    if move_during_cycle:
        q.move_all_to_active_or_backoff("NodeAdd")
        assert q.move_request_cycle == qpi.cycle
    assert q.failed(k, qpi.cycle, unschedulable=unschedulable, message="m", plugins=["P"])
    assert qpi.where == expected
    assert q.counts()[expected] == 1
    assert q.counts()["inflight"] == 0
    assert (qpi.message, qpi.unschedulable_plugins) == ("m", ["P"])


def test_failed_sets_timestamp_and_backoff(q: SchedulingQueue, clock: FakeClock) -> None:
    k = add(q, "a")
    qpi = pop_one(q)
    clock.advance(7)
    assert q.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=[])
    assert qpi.timestamp == T0 + 7
    assert qpi.backoff_expiry == T0 + 8
    assert qpi.lease_deadline == 0.0


def test_move_all_by_backoff_expiry(q: SchedulingQueue, clock: FakeClock) -> None:
    old = make_unschedulable(q, "old")  # backoff until T0+1
    clock.advance(5)
    young = make_unschedulable(q, "young")  # backoff until T0+6
    clock.advance(0.5)
    assert q.move_all_to_active_or_backoff("NodeAdd") == 2
    assert (old.where, young.where) == ("active", "backoff")
    assert (old.timestamp, young.timestamp) == (T0, T0 + 5)  # unchanged by the move
    assert q.move_request_cycle == q.scheduling_cycle == 2
    assert q.counts() == dict.fromkeys(["unschedulable", "gated", "inflight", "binding"], 0) | {
        "active": 1,
        "backoff": 1,
    }
    assert q.move_all_to_active_or_backoff("NodeAdd") == 0


def test_flush_backoff_completed(q: SchedulingQueue, clock: FakeClock) -> None:
    expiries = {}
    for name in "abc":
        k = add(q, name)
        qpi = pop_one(q)
        assert q.failed(k, qpi.cycle, unschedulable=False, message="", plugins=[])
        expiries[name] = qpi.backoff_expiry
        clock.advance(1)
    # a expires at T0+1, b at T0+2, c at T0+3; now is T0+3 - epsilon
    clock.t = T0 + 2.999
    assert q.flush_backoff_completed() == 2
    assert [q.get(key(n)).where for n in "abc"] == ["active", "active", "backoff"]  # type: ignore[union-attr]
    clock.t = expiries["c"]  # expiry <= now completes
    assert q.flush_backoff_completed() == 1
    assert q.flush_backoff_completed() == 0
    assert [p.key for p in q.pop(3)] == [key("a"), key("b"), key("c")]


@pytest.mark.parametrize(
    ("settings", "wait", "expected"),
    [
        ({}, 300.0, "unschedulable"),  # not longer than 5 minutes yet
        ({}, 300.5, "active"),
        ({"max_in_unschedulable": 2.0, "initial_backoff": 5.0}, 3.0, "backoff"),
    ],
)
def test_flush_unschedulable_leftover(
    clock: FakeClock, settings: dict[str, float], wait: float, expected: str
) -> None:
    q = SchedulingQueue(clock, **settings)
    qpi = make_unschedulable(q, "a")
    clock.advance(wait)
    moved = expected != "unschedulable"
    assert q.flush_unschedulable_leftover() == moved
    assert qpi.where == expected
    # upstream moves leftovers as a wildcard UnschedulableTimeout event
    assert q.move_request_cycle == (q.scheduling_cycle if moved else -1)
    assert q.take_incoming() == (
        {("unschedulable", "ScheduleAttemptFailure"): 1}
        | ({(expected, "UnschedulableTimeout"): 1} if moved else {})
        | {("active", "UnschedulablePodAdd"): 1}
    )


def test_flush_unschedulable_leftover_only_old_pods(q: SchedulingQueue, clock: FakeClock) -> None:
    make_unschedulable(q, "old")
    clock.advance(200)
    make_unschedulable(q, "new")
    clock.advance(101)
    assert q.flush_unschedulable_leftover() == 1
    assert q.get(key("old")).where == "active"  # type: ignore[union-attr]
    assert q.get(key("new")).where == "unschedulable"  # type: ignore[union-attr]


# --- updates ----------------------------------------------------------------------


def _status_only(raw: dict[str, Any]) -> None:
    raw["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]


def _bookkeeping_only(raw: dict[str, Any]) -> None:
    raw["metadata"]["generation"] = 7
    raw["metadata"]["managedFields"] = [{"manager": "ksched"}]
    raw["metadata"]["finalizers"] = ["example.com/f"]


def _label(raw: dict[str, Any]) -> None:
    raw["metadata"]["labels"]["team"] = "x"


def _spec(raw: dict[str, Any]) -> None:
    raw["spec"]["nodeSelector"] = {"disk": "ssd"}


@pytest.mark.parametrize(
    ("mutate", "wait", "expected"),
    [
        (_status_only, 5.0, "unschedulable"),
        (_bookkeeping_only, 5.0, "unschedulable"),
        (_label, 5.0, "active"),  # backoff (1s) expired
        (_spec, 5.0, "active"),
        (_spec, 0.5, "backoff"),  # still backing off
    ],
)
def test_update_of_unschedulable_pod(
    q: SchedulingQueue, clock: FakeClock, mutate: Any, wait: float, expected: str
) -> None:
    qpi = make_unschedulable(q, "a", seq=1)
    clock.advance(wait)
    new = copy.deepcopy(qpi.raw)
    new["metadata"]["resourceVersion"] = "2"
    mutate(new)
    q.update(qpi.key, qpi.uid, new, 2)
    assert qpi.where == expected
    assert (qpi.raw, qpi.seq) == (new, 2)  # the object is always replaced


@pytest.mark.parametrize("where", ["active", "backoff", "inflight", "binding"])
def test_relevant_update_keeps_place(q: SchedulingQueue, clock: FakeClock, where: str) -> None:
    k = put_in(q, clock, "a", where)
    qpi = q.get(k)
    assert qpi is not None
    before = (qpi.cycle, qpi.attempts, qpi.timestamp)
    new = pod("a", rv=5, labels={"changed": "yes"})
    q.update(k, qpi.uid, new, 5)
    assert qpi.where == where
    assert (qpi.raw, qpi.seq) == (new, 5)
    assert (qpi.cycle, qpi.attempts, qpi.timestamp) == before


def test_update_of_inflight_pod_is_used_by_next_attempt(
    q: SchedulingQueue, clock: FakeClock
) -> None:
    k = add(q, "a")
    qpi = pop_one(q)
    new = pod("a", rv=2, labels={"v": "2"})
    q.update(k, qpi.uid, new, 2)
    assert q.failed(k, qpi.cycle, unschedulable=False, message="", plugins=[])
    clock.advance(1)
    q.flush_backoff_completed()
    again = pop_one(q)
    assert (again.raw, again.seq) == (new, 2)


def test_priority_change_of_active_pod_reorders(q: SchedulingQueue, clock: FakeClock) -> None:
    add(q, "a", priority=1)
    add(q, "b", priority=5)
    q.update(key("a"), "uid-a", pod("a", priority=10, rv=2), 2)
    assert [p.key for p in q.pop(5)] == [key("a"), key("b")]


@pytest.mark.parametrize("seq", [0, 3])
def test_stale_update_ignored(q: SchedulingQueue, seq: int) -> None:
    qpi = make_unschedulable(q, "a", seq=3)
    q.take_dirty()
    stale = pod("a", rv=seq, labels={"changed": "yes"})
    q.update(qpi.key, qpi.uid, stale, seq)
    assert qpi.where == "unschedulable"
    assert qpi.seq == 3
    assert qpi.raw["metadata"]["labels"] == {}
    assert q.take_dirty() == set()


def test_uid_change_replaces_pod(q: SchedulingQueue, clock: FakeClock) -> None:
    qpi = make_unschedulable(q, "a", seq=1)
    clock.advance(3)
    new = pod("a", rv=9, uid="uid-new")
    q.add(qpi.key, "uid-new", new, 9)
    fresh = q.get(qpi.key)
    assert fresh is not None and fresh is not qpi
    assert (fresh.uid, fresh.seq, fresh.where, fresh.attempts) == ("uid-new", 9, "active", 0)
    assert fresh.timestamp == T0 + 3
    assert fresh.message == "" and fresh.unschedulable_plugins == []
    assert q.counts()["unschedulable"] == 0 and q.counts()["active"] == 1
    # a report about the old object's cycle is stale
    assert not q.failed(qpi.key, qpi.cycle, unschedulable=True, message="", plugins=[])


def test_add_of_known_pod_is_an_update(q: SchedulingQueue, clock: FakeClock) -> None:
    qpi = make_unschedulable(q, "a", seq=1)
    clock.advance(2)
    q.add(qpi.key, qpi.uid, pod("a", rv=2, labels={"x": "y"}), 2)
    assert qpi.where == "active" and qpi.attempts == 1
    assert len(q) == 1


# --- ksched's own status write after a failure --------------------------------------


def test_failed_takes_newer_seq_and_own_status_write_does_not_retry(
    q: SchedulingQueue,
) -> None:
    k = add(q, "a", seq=1)
    qpi = pop_one(q)
    assert q.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=["P"], seq=4)
    assert qpi.seq == 4
    written = pod("a", rv=4)
    _status_only(written)
    q.update(k, qpi.uid, written, 4)  # the watcher delivers ksched's own write
    assert qpi.where == "unschedulable"
    assert qpi.raw == written
    q.update(k, qpi.uid, written, 4)  # replayed
    assert qpi.where == "unschedulable"


def test_failed_ignores_older_seq(q: SchedulingQueue) -> None:
    k = add(q, "a", seq=5)
    qpi = pop_one(q)
    assert q.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=[], seq=3)
    assert qpi.seq == 5


def test_spec_change_racing_own_status_write_still_moves(q: SchedulingQueue) -> None:
    # The user changed the spec (seq 2) while the pod was inflight; ksched's status write
    # (seq 3) was reported before the watcher delivered seq 2. Seq 3 includes the change.
    k = add(q, "a", seq=1)
    qpi = pop_one(q)
    assert q.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=["P"], seq=3)
    assert qpi.where == "unschedulable"
    written = pod("a", rv=3, labels={"team": "x"})
    _status_only(written)
    q.update(k, qpi.uid, written, 3)
    assert qpi.where == "backoff"  # moved (backoff of 1s not yet over)


# --- delete -----------------------------------------------------------------------


@pytest.mark.parametrize("where", ALL_WHERES)
def test_delete_from_each_sub_queue(q: SchedulingQueue, clock: FakeClock, where: str) -> None:
    k = put_in(q, clock, "a", where)
    cycle = q.get(k).cycle  # type: ignore[union-attr]
    q.take_dirty()
    q.delete(k)
    assert q.get(k) is None
    assert len(q) == 0
    assert q.counts() == dict.fromkeys(ALL_WHERES, 0)
    assert q.take_dirty() == {k}
    # nothing comes back from any heap
    clock.advance(1000)
    assert q.move_all_to_active_or_backoff("NodeAdd") == 0
    assert q.flush_backoff_completed() == 0
    assert q.flush_unschedulable_leftover() == 0
    assert q.expire_leases() == []
    assert q.pop(10) == []
    assert not q.assumed(k, cycle)
    assert not q.failed(k, cycle, unschedulable=True, message="", plugins=[])
    q.delete(k)  # absent: no-op
    assert q.take_dirty() == set()


def test_delete_then_re_add_pops_once(q: SchedulingQueue) -> None:
    k = add(q, "a", seq=1)
    q.delete(k)
    add(q, "a", seq=2)
    assert [p.key for p in q.pop(10)] == [k]


# --- scheduling gates ---------------------------------------------------------------


def test_gated_pod_waits_until_gates_removed(q: SchedulingQueue, clock: FakeClock) -> None:
    k = add(q, "a", seq=1, gates=["g1", "g2"])
    assert q.counts()["gated"] == 1
    assert q.pop(10) == []
    q.update(k, "uid-a", pod("a", rv=2, gates=["g2"]), 2)  # one gate left
    assert q.get(k).where == "gated"  # type: ignore[union-attr]
    assert q.pop(10) == []
    q.update(k, "uid-a", pod("a", rv=3), 3)
    assert q.counts()["gated"] == 0
    popped = q.pop(10)
    assert [p.key for p in popped] == [k]
    assert popped[0].attempts == 1


def test_gated_pods_not_moved_by_events(q: SchedulingQueue, clock: FakeClock) -> None:
    add(q, "a", gates=["g"])
    clock.advance(1000)
    assert q.move_all_to_active_or_backoff("NodeAdd") == 0
    assert q.flush_unschedulable_leftover() == 0
    assert q.get(key("a")).where == "gated"  # type: ignore[union-attr]


# --- reports ------------------------------------------------------------------------


def test_assumed_and_stale_reports(q: SchedulingQueue, clock: FakeClock) -> None:
    k = add(q, "a")
    qpi = pop_one(q)
    assert not q.assumed(k, qpi.cycle + 1)  # wrong cycle
    assert not q.assumed("default/nope", qpi.cycle)
    assert qpi.where == "inflight"
    assert q.assumed(k, qpi.cycle)
    assert (qpi.where, qpi.lease_deadline) == ("binding", T0 + 120.0)
    assert not q.assumed(k, qpi.cycle)  # already binding
    assert not q.failed(k, qpi.cycle - 1, unschedulable=False, message="", plugins=[])
    assert qpi.where == "binding"
    # the binder failed: back off and try again
    assert q.failed(k, qpi.cycle, unschedulable=False, message="bind failed", plugins=[])
    assert qpi.where == "backoff"
    assert not q.failed(k, qpi.cycle, unschedulable=False, message="twice", plugins=[])
    assert qpi.message == "bind failed"
    assert not q.assumed(k, qpi.cycle)


def test_report_for_active_pod_is_stale(q: SchedulingQueue) -> None:
    k = add(q, "a")
    assert not q.assumed(k, 0)
    assert not q.failed(k, 0, unschedulable=True, message="", plugins=[])
    assert q.get(k).where == "active"  # type: ignore[union-attr]


# --- leases -------------------------------------------------------------------------


def test_lease_expiry_returns_inflight_and_binding_pods(
    q: SchedulingQueue, clock: FakeClock
) -> None:
    ki = add(q, "inflight")
    kb = add(q, "binding")
    pi, pb = q.pop(2)
    assert q.assumed(kb, pb.cycle)
    clock.advance(15)
    assert q.expire_leases() == []  # deadline not passed yet (strictly less than now)
    clock.advance(0.1)
    assert [p.key for p in q.expire_leases()] == [ki]
    # lapsed, not yet requeued: the attempt must be fenced first; its lease runs again
    assert (pi.where, pi.lease_deadline) == ("inflight", T0 + 30.1)
    assert q.pop(2) == []
    assert q.requeue_lapsed(ki, pi.cycle, seq=7)
    assert (pi.where, pi.timestamp, pi.lease_deadline, pi.seq) == ("active", T0, 0.0, 7)
    assert pb.where == "binding"
    clock.advance(105)
    assert [p.key for p in q.expire_leases()] == [kb]
    assert q.requeue_lapsed(kb, pb.cycle, seq=None)
    assert pb.where == "active"
    # the vanished worker's late report is stale once the pod was popped again
    again = q.pop(2)
    assert {p.key for p in again} == {ki, kb}
    assert not q.failed(ki, pi.cycle - 2, unschedulable=True, message="", plugins=[])
    assert not q.assumed(kb, pb.cycle - 2)
    assert not q.requeue_lapsed(ki, pi.cycle - 2, seq=9)  # a fence of an older attempt


def test_a_lapsed_attempt_that_reports_before_its_fence_is_not_requeued_twice(
    q: SchedulingQueue, clock: FakeClock
) -> None:
    k = add(q, "a")
    (p,) = q.pop(1)
    clock.advance(16)
    assert [x.key for x in q.expire_leases()] == [k]
    assert q.failed(k, p.cycle, unschedulable=False, message="late", plugins=[])
    assert p.where == "backoff"
    assert not q.requeue_lapsed(k, p.cycle, seq=3)
    assert p.where == "backoff"


def test_a_lapsed_attempt_whose_pod_was_bound_waits_for_the_watcher(
    q: SchedulingQueue, clock: FakeClock
) -> None:
    k = add(q, "a")
    (p,) = q.pop(1)
    assert q.assumed(k, p.cycle)
    clock.advance(121)
    assert [x.key for x in q.expire_leases()] == [k]
    q.extend_lapsed(k, p.cycle)
    assert (p.where, p.lease_deadline) == ("binding", T0 + 121 + 120)
    q.delete(k, bound=True)
    assert q.get(k) is None


def test_custom_leases(clock: FakeClock) -> None:
    q = SchedulingQueue(clock, inflight_lease=3.0, binding_lease=4.0)
    k = add(q, "a")
    qpi = pop_one(q)
    assert qpi.lease_deadline == T0 + 3.0
    assert q.assumed(k, qpi.cycle)
    assert qpi.lease_deadline == T0 + 4.0


# --- persistence --------------------------------------------------------------------


def test_record_round_trip_through_msgpack(q: SchedulingQueue, clock: FakeClock) -> None:
    k = add(q, "a", priority=7)
    qpi = pop_one(q)
    clock.advance(2)
    assert q.failed(k, qpi.cycle, unschedulable=True, message="0/3 nodes", plugins=["A", "B"])
    rec = msgpack.unpackb(msgpack.packb(qpi.to_record()))
    back = QueuedPodInfo.from_record(rec)
    assert back == qpi
    assert back.initial_attempt_timestamp == T0
    assert back.unschedulable_plugins == ["A", "B"]
    fresh = QueuedPodInfo("k", "u", {}, 3, 0, 1.0)
    assert QueuedPodInfo.from_record(msgpack.unpackb(msgpack.packb(fresh.to_record()))) == fresh
    assert fresh.initial_attempt_timestamp is None


def test_from_record_tolerates_unknown_and_missing_fields() -> None:
    rec = {"key": "k", "uid": "u", "raw": {}, "seq": 4, "priority": 1, "timestamp": 2.0}
    qpi = QueuedPodInfo.from_record(rec | {"future_field": 1})
    assert (qpi.where, qpi.attempts, qpi.raw_seq) == ("active", 0, 4)


def test_restore(q: SchedulingQueue, clock: FakeClock) -> None:
    # put_in pops the top active pod, so the plain active pod comes last
    for name in ["backoff", "unschedulable", "inflight", "binding", "gated", "active"]:
        put_in(q, clock, name, name)
        clock.advance(1)
    records = [msgpack.unpackb(msgpack.packb(q.get(k).to_record())) for k, _ in q.pending()]  # type: ignore[union-attr]
    expected = dict(q.pending())

    r = SchedulingQueue(clock)
    r.restore(records)
    r.restore_meta(q.scheduling_cycle, q.move_request_cycle)
    assert dict(r.pending()) == expected
    assert (r.scheduling_cycle, r.move_request_cycle) == (q.scheduling_cycle, q.move_request_cycle)
    # the inflight pod's lease has lapsed: its worker may still be at it, so it is fenced
    # before it goes out again
    (lapsed,) = r.expire_leases()
    assert lapsed.key == key("inflight")
    assert r.pop(10)[0].key == key("active")
    assert r.requeue_lapsed(lapsed.key, lapsed.cycle, seq=None)
    assert r.counts() == {
        "active": 1,
        "backoff": 1,
        "unschedulable": 1,
        "gated": 1,
        "inflight": 1,
        "binding": 1,
    }
    # the inflight pod keeps its turn
    popped = [*r.pop(10), r.get(key("active"))]
    assert [p.key for p in popped] == [key("inflight"), key("active")]
    assert popped[0].attempts == 2 and popped[0].cycle == q.scheduling_cycle + 2
    # the old worker's report is stale; the binder's report still counts
    old_inflight = q.get(key("inflight"))
    assert old_inflight is not None
    assert not r.assumed(key("inflight"), old_inflight.cycle)
    binding = q.get(key("binding"))
    assert binding is not None
    assert r.failed(key("binding"), binding.cycle, unschedulable=False, message="", plugins=[])
    # heaps were rebuilt: backoff, unschedulable and leases still work
    clock.advance(1000)
    assert r.flush_backoff_completed() == 2
    assert r.flush_unschedulable_leftover() == 1
    lapsed = r.expire_leases()
    assert {p.key for p in lapsed} == {p.key for p in popped}
    for p in lapsed:
        assert r.requeue_lapsed(p.key, p.cycle, seq=None)
    assert r.counts()["active"] == 5


def test_restore_replaces_content(q: SchedulingQueue) -> None:
    add(q, "old")
    rec = QueuedPodInfo("default/new", "u", pod("new"), 1, 0, T0).to_record()
    q.restore([rec])
    assert [k for k, _ in q.pending()] == ["default/new"]
    assert q.counts()["active"] == 1
    assert [p.key for p in q.pop(5)] == ["default/new"]


# --- dirty tracking -----------------------------------------------------------------


def test_dirty_tracking(q: SchedulingQueue, clock: FakeClock) -> None:
    ka = add(q, "a")
    kb = add(q, "b")
    assert q.take_dirty() == {ka, kb}
    assert q.take_dirty() == set()
    assert q.dirty == set()

    (pa,) = q.pop(1)
    assert q.take_dirty() == {ka}
    assert q.failed(ka, pa.cycle, unschedulable=True, message="", plugins=["X"])
    assert q.take_dirty() == {ka}
    assert not q.assumed(ka, pa.cycle)  # stale: no change
    q.update(ka, "uid-a", pod("a", rv=1), 1)  # stale seq: no change
    assert q.take_dirty() == set()

    q.update(kb, "uid-b", pod("b", rv=2), 2)  # object replaced, not moved
    assert q.take_dirty() == {kb}
    assert q.move_all_to_active_or_backoff("NodeAdd") == 1
    assert q.take_dirty() == {ka}
    assert q.flush_backoff_completed() == 0
    clock.advance(2)
    assert q.flush_backoff_completed() == 1
    assert q.take_dirty() == {ka}
    assert q.expire_leases() == []
    assert q.flush_unschedulable_leftover() == 0
    assert q.take_dirty() == set()

    pops = q.pop(2)
    q.take_dirty()
    clock.advance(16)
    assert len(q.expire_leases()) == 2
    assert q.take_dirty() == {p.key for p in pops}
    q.delete(kb)
    assert q.take_dirty() == {kb}


# --- scale and lazy deletion --------------------------------------------------------


def test_many_pods_pop_in_order_and_heaps_stay_compact(clock: FakeClock) -> None:
    q = SchedulingQueue(clock)
    rng = random.Random(7)
    n = 100_000
    prios = [rng.randrange(10) for _ in range(n)]
    for i, prio in enumerate(prios):
        raw = {"metadata": {"name": f"p{i}"}, "spec": {"priority": prio}}
        q.add(f"ns/p{i}", f"u{i}", raw, 1)
    assert q.active_len() == n
    for i in range(n):
        if i % 4:
            q.delete(f"ns/p{i}")
    live = n // 4
    assert len(q) == q.active_len() == live
    assert len(q._placements._heaps["active"]) <= 2 * live + 64 + 1  # stale entries compacted
    popped = q.pop(n)
    assert len(popped) == live
    order = [(-p.priority, int(p.key[4:])) for p in popped]
    assert order == sorted(order)
    assert [p.cycle for p in popped] == list(range(1, live + 1))
    assert q.counts()["inflight"] == live


def test_a_pop_whose_reply_never_went_out_goes_back_to_active_keeping_its_turn(
    q: SchedulingQueue, clock: FakeClock
) -> None:
    ka, kb = add(q, "a"), add(q, "b", priority=5)
    clock.advance(1)
    kc = add(q, "c")  # after a: a's turn comes first
    popped = q.pop(2)
    assert [p.key for p in popped] == [kb, ka]
    attempts = [(p.key, p.cycle) for p in popped]
    q.dirty.clear()
    assert q.unpop(attempts) == 2
    assert [q.get(k).where for k in (ka, kb)] == ["active", "active"]  # type: ignore[union-attr]
    assert q.dirty == {ka, kb}  # written back as pending
    assert [q.get(k).attempts for k in (ka, kb)] == [0, 0]  # type: ignore[union-attr]
    assert [p.key for p in q.pop(3)] == [kb, ka, kc]  # their turn kept, before c
    assert q.expire_leases() == []


def test_unpop_leaves_alone_what_changed_meanwhile(q: SchedulingQueue, clock: FakeClock) -> None:
    ka, kb = add(q, "a"), add(q, "b")
    (pa, pb) = q.pop(2)
    attempts = [(pa.key, pa.cycle), (pb.key, pb.cycle)]
    assert q.assumed(kb, pb.cycle)  # a report of this attempt came first
    q.delete(ka)
    assert q.unpop(attempts) == 0
    assert q.get(ka) is None
    assert pb.where == "binding"
    kc = add(q, "c")
    (pc,) = q.pop(1)
    assert q.unpop([(kc, pc.cycle - 1)]) == 0  # an older attempt's
    assert pc.where == "inflight"
