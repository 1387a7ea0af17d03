"""The nominator inside the queue (kube's nominator and its use in Add / Update /
Delete / assume)."""

from __future__ import annotations

import copy
from typing import Any

import msgpack
import pytest

from services.queue.nominator import Nominator
from services.queue.queue import SchedulingQueue
from tests.unit.test_queue import PRE_ENQUEUE, FakeClock
from tests.unit.test_queue_events import pod
from tests.unit.test_queue_hints import FIT, HINTS, add, key, reject


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> SchedulingQueue:
    return SchedulingQueue(clock, hints=HINTS, pre_enqueue=PRE_ENQUEUE)


def nominated(q: SchedulingQueue, node: str | None = None) -> list[str]:
    return [p.key for p in q.nominated_pods(node)]


def with_status(raw: dict[str, Any], nominated_node: str) -> dict[str, Any]:
    new = copy.deepcopy(raw)
    new["status"] = {"nominatedNodeName": nominated_node} if nominated_node else {}
    return new


def test_nominator_structure() -> None:
    n = Nominator()
    n.set("a", "n1")
    n.set("b", "n1")
    n.set("c", "n2")
    v = n.version
    n.set("a", "n1")  # no change, no new version
    assert n.version == v
    assert n.pods_for("n1") == ["a", "b"] and n.node_of("c") == "n2"
    n.set("a", "n2")
    assert n.pods_for("n1") == ["b"] and n.pods_for("n2") == ["c", "a"]
    n.set("b", "")
    n.delete("c")
    n.delete("zzz")
    assert list(n.items()) == [("a", "n2")] and len(n) == 1 and n.version == v + 3


def test_added_pod_with_nominated_node(q: SchedulingQueue) -> None:
    add(q, pod("a", nominated="n1"))
    add(q, pod("b"))
    add(q, pod("g", nominated="n1", gates=["x"]))  # gated pods are not nominated
    assert nominated(q) == [key("a")] and nominated(q, "n1") == [key("a")]
    assert q.get(key("a")).nominated_node == "n1"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("", "n1", "n1"),  # nomination added
        ("n1", "n2", "n2"),  # changed
        ("n1", "", ""),  # removed
    ],
)
def test_update_follows_the_status(
    q: SchedulingQueue, before: str, after: str, expected: str
) -> None:
    raw = pod("a", nominated=before)
    k = add(q, raw)
    q.update(k, "uid-a", with_status(raw, after), 2)
    assert q.nominator.node_of(k) == expected


def test_update_without_nominations_keeps_preemptions_choice(q: SchedulingQueue) -> None:
    raw = pod("a")
    k = add(q, raw)
    (qpi,) = q.pop(1)
    # preemption (ModeOverride) nominated n1 before the status write reached us
    assert q.failed(
        k, qpi.cycle, unschedulable=True, message="m", plugins=[FIT], nominated_node="n1"
    )
    labelled = copy.deepcopy(raw)
    labelled["metadata"]["labels"] = {"x": "y"}
    q.update(k, qpi.uid, labelled, 2)
    assert q.nominator.node_of(k) == "n1"


def test_a_failed_preemption_clears_the_nomination(q: SchedulingQueue) -> None:
    k = add(q, with_status(pod("a"), "n1"))
    assert q.nominator.node_of(k) == "n1"
    (qpi,) = q.pop(1)
    # a later cycle: preemption cannot help (PostFilter result with no node)
    assert q.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=[FIT], nominated_node="")
    assert q.nominator.node_of(k) == "" and nominated(q) == []
    # not eligible (preemptionPolicy Never): the report leaves the nomination alone
    q2 = add(q, with_status(pod("b"), "n2"))
    (qpi2,) = q.pop(1)
    assert q.failed(q2, qpi2.cycle, unschedulable=True, message="m", plugins=[FIT])
    assert q.nominator.node_of(q2) == "n2"


def test_assumed_and_deleted_pods_leave_the_nominator(q: SchedulingQueue) -> None:
    raw = pod("a", nominated="n1")
    ka, kb = add(q, raw), add(q, pod("b", nominated="n1"))
    pa, _ = q.pop(2)
    assert q.assumed(ka, pa.cycle)
    q.delete(kb)
    assert nominated(q) == []
    labelled = copy.deepcopy(raw)
    labelled["metadata"]["labels"] = {"x": "y"}
    q.update(ka, pa.uid, labelled, 2)  # still binding: not nominated again
    assert nominated(q) == []


def test_deleting_a_nominated_pod_moves_lower_or_equal_priority_pods(
    q: SchedulingQueue, clock: FakeClock
) -> None:
    low = reject(q, pod("low", cpu="2"), FIT)
    low.priority = 1
    high = reject(q, pod("high", cpu="2"), FIT)
    high.priority = 100
    k = add(q, pod("preemptor", nominated="n1"))
    q.get(k).priority = 10  # type: ignore[union-attr]
    clock.advance(5)
    q.delete(k)
    assert (low.where, high.where) == ("active", "unschedulable")


def test_renomination_frees_the_old_node(q: SchedulingQueue, clock: FakeClock) -> None:
    low = reject(q, pod("low", cpu="2"), FIT)
    raw = pod("preemptor", nominated="n1")
    k = add(q, raw)
    clock.advance(5)
    q.update(k, "uid-preemptor", with_status(raw, "n2"), 2)
    assert low.where == "active"


def test_binding_a_nominated_pod_moves_nothing(q: SchedulingQueue, clock: FakeClock) -> None:
    low = reject(q, pod("low", cpu="2"), FIT)
    k = add(q, pod("preemptor", nominated="n1"))
    clock.advance(5)
    q.delete(k, bound=True)
    assert low.where == "unschedulable"


def test_nominations_survive_a_restart(q: SchedulingQueue, clock: FakeClock) -> None:
    k = add(q, pod("a"))
    (qpi,) = q.pop(1)
    q.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=[FIT], nominated_node="n3")
    records = [msgpack.unpackb(msgpack.packb(p.to_record())) for p in q.pending_pods()]
    r = SchedulingQueue(clock, hints=HINTS)
    r.restore(records)
    assert r.nominator.node_of(k) == "n3" and nominated(r, "n3") == [k]


def test_a_preemptions_victims_travel_with_its_nomination(q: SchedulingQueue) -> None:
    """Every worker treats the victims it still sees as terminating (kube's check on the
    nominated node), so the version moves when they are known."""
    k = add(q, pod("a"))
    (qpi,) = q.pop(1)
    before = q.nominator.version
    victims = ["default/low-1"]
    assert q.failed(
        k,
        qpi.cycle,
        unschedulable=True,
        message="m",
        plugins=[FIT],
        nominated_node="n1",
        victims=victims,
    )
    assert q.nominator.version > before
    (held,) = q.nominated_pods("n1")
    assert held.victims == victims
