"""scheduler_unschedulable_pods{plugin,profile}, as the queue keeps it: a pod counts for
each plugin that rejected it in its last attempt, or that gates it, while it waits in a
sub-queue (unschedulable, backoff, active, gated); it stops counting when popped,
admitted or gone, and a rebuilt queue counts from its records."""

from __future__ import annotations

from services.queue.queue import SchedulingQueue
from tests.unit.test_queue import PRE_ENQUEUE, FakeClock, add, key, pod, pop_one

FIT, TAINT, GATES = "NodeResourcesFit", "TaintToleration", "SchedulingGates"
DEFAULT = "default-scheduler"


def new_queue() -> tuple[SchedulingQueue, FakeClock]:
    clock = FakeClock()
    return SchedulingQueue(clock, pre_enqueue=PRE_ENQUEUE), clock


def counts(q: SchedulingQueue) -> dict[tuple[str, str], int]:
    """The gauge's non-zero values."""
    return {label: n for label, n in q.unschedulable_pods().items() if n}


def fail(q: SchedulingQueue, name: str, plugins: list[str], *, unschedulable: bool = True) -> None:
    qpi = pop_one(q)
    assert qpi.key == key(name)
    assert q.failed(qpi.key, qpi.cycle, unschedulable=unschedulable, message="no", plugins=plugins)


def test_a_rejected_pod_counts_for_each_rejecting_plugin_until_its_next_pop() -> None:
    q, clock = new_queue()
    add(q, "a")
    fail(q, "a", [FIT, TAINT])
    assert q.get(key("a")).where == "unschedulable"  # type: ignore[union-attr]
    assert counts(q) == {(FIT, DEFAULT): 1, (TAINT, DEFAULT): 1}

    q.move_all_to_active_or_backoff("NodeAdd")  # to backoff: still counted, as upstream
    assert q.get(key("a")).where in ("backoff", "active")  # type: ignore[union-attr]
    assert counts(q) == {(FIT, DEFAULT): 1, (TAINT, DEFAULT): 1}

    clock.advance(60)
    q.flush_backoff_completed()
    pop_one(q)  # kube decrements on Pop
    assert counts(q) == {}
    assert q.unschedulable_pods() == {(FIT, DEFAULT): 0, (TAINT, DEFAULT): 0}


def test_counts_follow_the_last_attempt_and_the_profile() -> None:
    q, _ = new_queue()
    add(q, "a")
    other = pod("b")
    other["spec"]["schedulerName"] = "other-scheduler"
    q.add(key("b"), "uid-b", other, 1)
    fail(q, "a", [FIT])
    fail(q, "b", [FIT])
    assert counts(q) == {(FIT, DEFAULT): 1, (FIT, "other-scheduler"): 1}


def test_an_error_counts_for_no_plugin() -> None:
    q, _ = new_queue()
    add(q, "a")
    fail(q, "a", [], unschedulable=False)
    assert counts(q) == {}


def test_a_gated_pod_counts_for_its_gating_plugin_until_admitted() -> None:
    q, _ = new_queue()
    add(q, "g", gates=["example.com/wait"])
    assert counts(q) == {(GATES, DEFAULT): 1}
    q.update(key("g"), "uid-g", pod("g", rv=2), 2)  # gates removed: admitted
    assert q.get(key("g")).where == "active"  # type: ignore[union-attr]
    assert counts(q) == {}


def test_a_deleted_pod_stops_counting() -> None:
    q, _ = new_queue()
    add(q, "a")
    add(q, "g", gates=["example.com/wait"])
    fail(q, "a", [FIT])
    q.delete(key("a"))
    q.delete(key("g"))
    assert counts(q) == {}


def test_a_rebuilt_queue_counts_from_its_records() -> None:
    q, clock = new_queue()
    add(q, "a")
    add(q, "g", gates=["example.com/wait"])
    fail(q, "a", [FIT])
    records = [q.get(k).to_record() for k in (key("a"), key("g"))]  # type: ignore[union-attr]
    rebuilt = SchedulingQueue(clock, pre_enqueue=PRE_ENQUEUE)
    rebuilt.restore(records)
    assert counts(rebuilt) == {(FIT, DEFAULT): 1, (GATES, DEFAULT): 1}
    rebuilt.restore([])  # emptied: every count back to 0
    assert counts(rebuilt) == {}
