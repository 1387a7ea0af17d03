"""The queue with the default profile's queueing hints (kube's scheduling_queue_test.go:
TestPriorityQueue_MoveAllToActiveOrBackoffQueueWithQueueingHint, in-flight events,
Update with hints, AssignedPodAdded, incoming-pods metrics)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from services.queue.hints import QueueingHints, Registration, hints_of, registrations
from services.queue.inflight import InFlight
from services.queue.queue import QueuedPodInfo, SchedulingQueue
from shared.config import SchedulerConfiguration, parse_config
from shared.framework.events import EVENT_NODE_ADD
from shared.framework.handle import Handle
from shared.framework.interface import ClusterEvent
from shared.framework.profile_map import ProfileMap
from shared.plugins import REGISTRY
from tests.unit.test_queue import PRE_ENQUEUE, T0, FakeClock
from tests.unit.test_queue_events import AFFINITY, NOSCHEDULE, TOLERATE, node, pod

FIT, AFF, TAINT = "NodeResourcesFit", "NodeAffinity", "TaintToleration"
IPA, NODE_UPDATE_ALLOC = "InterPodAffinity", ClusterEvent("Node", "UpdateNodeAllocatable")
HINTS = hints_of(ProfileMap(SchedulerConfiguration(), REGISTRY))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> SchedulingQueue:
    return SchedulingQueue(clock, hints=HINTS, pre_enqueue=PRE_ENQUEUE)


def key(name: str) -> str:
    return f"default/{name}"


def add(q: SchedulingQueue, raw: dict[str, Any], seq: int = 1) -> str:
    k = key(raw["metadata"]["name"])
    q.add(k, raw["metadata"]["uid"], raw, seq)
    return k


def reject(q: SchedulingQueue, raw: dict[str, Any], *plugins: str) -> QueuedPodInfo:
    """Add, pop and fail the pod as unschedulable by `plugins`."""
    k = add(q, raw)
    (qpi,) = q.pop(1)
    assert qpi.key == k
    assert q.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=list(plugins))
    return qpi


# --- moves on cluster events ---------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "plugins", "event", "old", "new", "expected"),
    [
        pytest.param(
            pod(cpu="2"), [FIT], EVENT_NODE_ADD, None, node(cpu="4"), "active", id="fitting node"
        ),
        pytest.param(
            pod(cpu="8"), [FIT], EVENT_NODE_ADD, None, node(cpu="4"), "unschedulable", id="small"
        ),
        pytest.param(
            pod(node_selector={"disk": "ssd"}),
            [AFF],
            NODE_UPDATE_ALLOC,
            node(cpu="1"),
            node(cpu="8"),
            "unschedulable",
            id="plugin not registered for the event",
        ),
        pytest.param(
            pod(cpu="2", node_selector={"disk": "ssd"}),
            [AFF, FIT],
            NODE_UPDATE_ALLOC,
            node(cpu="1"),
            node(cpu="8"),
            "active",
            id="one of two rejectors registered",
        ),
        pytest.param(
            pod(node_selector={"disk": "ssd"}),
            [AFF],
            ClusterEvent("Node", "UpdateNodeLabel"),
            node(),
            node(labels={"disk": "ssd"}),
            "active",
            id="label update that helps",
        ),
        pytest.param(
            pod(),
            [TAINT],
            ClusterEvent("Node", "UpdateNodeTaint"),
            node(taints=[NOSCHEDULE]),
            node(),
            "active",
            id="taint removed",
        ),
        pytest.param(
            pod(), [IPA], EVENT_NODE_ADD, None, node(), "unschedulable", id="no topology key"
        ),
        pytest.param(
            pod(), ["NoSuchPlugin"], EVENT_NODE_ADD, None, node(), "unschedulable", id="unknown"
        ),
        pytest.param(
            pod(),
            [FIT],
            ClusterEvent("Node", "UpdateNodeAnnotation"),
            node(),
            node(),
            "unschedulable",
        ),
    ],
)
def test_move_with_hints(
    q: SchedulingQueue,
    clock: FakeClock,
    target: dict[str, Any],
    plugins: list[str],
    event: ClusterEvent,
    old: dict[str, Any] | None,
    new: dict[str, Any] | None,
    expected: str,
) -> None:
    qpi = reject(q, target, *plugins)
    assert qpi.where == "unschedulable"
    clock.advance(5)  # backoff over: a moved pod goes straight to activeQ
    moved = q.move_all_to_active_or_backoff(event, old, new)
    assert qpi.where == expected
    assert moved == (expected != "unschedulable")


def test_moved_pod_still_backing_off_goes_to_backoff(q: SchedulingQueue, clock: FakeClock) -> None:
    qpi = reject(q, pod(cpu="2"), FIT)
    clock.advance(0.5)
    assert q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node()) == 1
    assert qpi.where == "backoff"
    clock.advance(0.5)
    assert q.flush_backoff_completed() == 1 and qpi.where == "active"


def test_pod_without_rejectors_moves_on_any_event_of_interest(clock: FakeClock) -> None:
    q = SchedulingQueue(clock, hints=HINTS)
    qpi = reject(q, pod(), FIT)
    # A record from before hints (no plugins) sitting in unschedulable: kube moves it on any event.
    q.restore([qpi.to_record() | {"unschedulable_plugins": []}])
    clock.advance(5)
    # No default plugin registered annotation updates (score plugins register nothing)...
    assert q.move_all_to_active_or_backoff(ClusterEvent("Node", "UpdateNodeAnnotation")) == 0
    # ... but NodeAffinity did register label updates.
    assert (
        q.move_all_to_active_or_backoff(ClusterEvent("Node", "UpdateNodeLabel"), node(), node())
        == 1
    )


def test_only_plugins_that_can_reject_register() -> None:
    plugins = {r.plugin for r in registrations(REGISTRY[n]({}, Handle()) for n in REGISTRY)}
    assert "ImageLocality" not in plugins and "PrioritySort" not in plugins
    assert {FIT, AFF, TAINT, IPA, "SchedulingGates", "NodePorts"} <= plugins


def test_event_nobody_registered_moves_nothing_and_is_not_remembered(clock: FakeClock) -> None:
    hints = QueueingHints({"default-scheduler": [Registration(FIT, EVENT_NODE_ADD)]})
    q = SchedulingQueue(clock, hints=hints)
    qpi = reject(q, pod(), "")  # plugins [""] is still "rejected by someone"
    add(q, pod("other"))
    q.pop(1)
    assert q.move_all_to_active_or_backoff(ClusterEvent("Node", "Delete"), node()) == 0
    assert q.inflight_events == 0 and q.move_request_cycle == -1
    assert q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node()) == 0
    assert q.inflight_events == 1 and q.move_request_cycle == q.scheduling_cycle
    assert qpi.where == "unschedulable"


def test_registration_without_hint_always_queues(clock: FakeClock) -> None:
    hints = QueueingHints({"default-scheduler": [Registration("P", EVENT_NODE_ADD)]})
    q = SchedulingQueue(clock, hints=hints)
    qpi = reject(q, pod(), "P")
    assert q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node()) == 1
    assert qpi.where == "backoff"


def test_failing_hint_counts_as_queue(clock: FakeClock) -> None:
    def broken(pod: Any, old: Any, new: Any) -> bool:
        raise RuntimeError("boom")

    hints = QueueingHints({"default-scheduler": [Registration("P", EVENT_NODE_ADD, broken)]})
    q = SchedulingQueue(clock, hints=hints)
    qpi = reject(q, pod(), "P")
    assert q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node()) == 1
    assert qpi.where == "backoff" and hints.errors == 1


def test_profiles_have_their_own_hints(clock: FakeClock) -> None:
    config = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {"schedulerName": "default-scheduler"},
                {
                    "schedulerName": "no-fit",
                    "plugins": {"multiPoint": {"disabled": [{"name": FIT}]}},
                },
            ],
        }
    )
    q = SchedulingQueue(clock, hints=hints_of(ProfileMap(config, REGISTRY)))
    other = pod("other", cpu="2")
    other["spec"]["schedulerName"] = "no-fit"
    mine, theirs = reject(q, pod("mine", cpu="2"), FIT), reject(q, other, FIT)
    clock.advance(5)
    assert q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node()) == 1
    assert (mine.where, theirs.where) == ("active", "unschedulable")


def test_wildcard_moves_everything(q: SchedulingQueue, clock: FakeClock) -> None:
    pods = [reject(q, pod(f"p{i}", cpu="8"), plugin) for i, plugin in enumerate([FIT, AFF, IPA])]
    clock.advance(5)
    assert q.move_all_to_active_or_backoff("SomethingHappened") == 3
    assert {p.where for p in pods} == {"active"}


def test_gated_pods_ignore_cluster_events(q: SchedulingQueue) -> None:
    k = add(q, pod(gates=["g"]))
    assert q.move_all_to_active_or_backoff("SomethingHappened") == 0
    assert q.get(k).where == "gated"  # type: ignore[union-attr]


# --- assigned pods ----------------------------------------------------------------


def test_assigned_pod_added_moves_only_pods_whose_affinity_it_satisfies(
    q: SchedulingQueue, clock: FakeClock
) -> None:
    wants_db = reject(q, pod("wants-db", affinity=AFFINITY), IPA)
    fit = reject(q, pod("fit", cpu="8"), FIT)
    clock.advance(5)
    assert q.assigned_pod_added(pod("web", node_name="n", labels={"app": "web"})) == 0
    assert q.assigned_pod_added(pod("db", node_name="n", labels={"app": "db"})) == 1
    assert (wants_db.where, fit.where) == ("active", "unschedulable")


def test_assigned_pod_updated_to_match(q: SchedulingQueue, clock: FakeClock) -> None:
    wants_db = reject(q, pod("wants-db", affinity=AFFINITY), IPA)
    clock.advance(5)
    before = pod("x", node_name="n", labels={"app": "x"})
    assert (
        q.assigned_pod_updated(before, pod("x", node_name="n", labels={"app": "x", "v": "2"})) == 0
    )
    assert q.assigned_pod_updated(before, pod("x", node_name="n", labels={"app": "db"})) == 1
    assert wants_db.where == "active"


def test_assigned_pod_deleted_frees_room(q: SchedulingQueue, clock: FakeClock) -> None:
    fit = reject(q, pod("fit", cpu="2"), FIT)
    clock.advance(5)
    event = ClusterEvent("AssignedPod", "Delete")
    assert q.move_all_to_active_or_backoff(event, pod("gone"), None) == 0  # was not placed
    assert q.move_all_to_active_or_backoff(event, pod("gone", node_name="n"), None) == 1
    assert fit.where == "active"


# --- in-flight events ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "event", "old", "new", "expected"),
    [
        pytest.param("none", None, None, None, "unschedulable", id="no event"),
        pytest.param("before", EVENT_NODE_ADD, None, node(), "unschedulable", id="before the pop"),
        pytest.param("during", EVENT_NODE_ADD, None, node(), "backoff", id="relevant, in flight"),
        pytest.param(
            "during", EVENT_NODE_ADD, None, node(cpu="1"), "unschedulable", id="irrelevant (hint)"
        ),
        pytest.param(
            "during",
            ClusterEvent("Node", "UpdateNodeLabel"),
            node(),
            node(labels={"a": "b"}),
            "unschedulable",
            id="not registered by the rejector",
        ),
    ],
)
def test_event_during_attempt(
    q: SchedulingQueue,
    when: str,
    event: ClusterEvent | None,
    old: dict[str, Any] | None,
    new: dict[str, Any] | None,
    expected: str,
) -> None:
    k = add(q, pod(cpu="2"))
    if when == "before" and event is not None:
        q.move_all_to_active_or_backoff(event, old, new)
    (qpi,) = q.pop(1)
    if when == "during" and event is not None:
        q.move_all_to_active_or_backoff(event, old, new)
    assert q.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=[FIT])
    assert qpi.where == expected
    assert q.inflight_events == 0  # nothing left in flight: every event was dropped


def test_event_during_binding_counts_too(q: SchedulingQueue) -> None:
    k = add(q, pod(cpu="2"))
    (qpi,) = q.pop(1)
    assert q.assumed(k, qpi.cycle)
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node())
    assert q.failed(k, qpi.cycle, unschedulable=True, message="bind failed", plugins=[FIT])
    assert qpi.where == "backoff"


def test_update_of_pod_in_flight_counts_for_its_failure(q: SchedulingQueue) -> None:
    raw = pod(cpu="2")
    k = add(q, raw)
    (qpi,) = q.pop(1)
    tolerant = copy.deepcopy(raw)
    tolerant["spec"]["tolerations"] = [TOLERATE]
    q.update(k, qpi.uid, tolerant, 2)
    assert qpi.where == "inflight" and q.inflight_events == 1
    assert q.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=[TAINT])
    assert qpi.where == "backoff"


def test_other_pods_update_does_not_count(q: SchedulingQueue) -> None:
    ka, kb = add(q, pod("a")), add(q, pod("b"))
    pa, pb = q.pop(2)
    tolerant = pod("b", tolerations=[TOLERATE])
    q.update(kb, pb.uid, tolerant, 2)
    assert q.failed(ka, pa.cycle, unschedulable=True, message="m", plugins=[TAINT])
    assert pa.where == "unschedulable"  # b's toleration cannot help a
    assert q.failed(kb, pb.cycle, unschedulable=True, message="m", plugins=[TAINT])
    assert pb.where == "backoff"


@pytest.mark.parametrize(
    ("unschedulable", "plugins"), [(False, [FIT]), (True, [])], ids=["error", "no rejector"]
)
def test_errors_and_unexplained_failures_back_off(
    q: SchedulingQueue, unschedulable: bool, plugins: list[str]
) -> None:
    k = add(q, pod())
    (qpi,) = q.pop(1)
    assert q.failed(k, qpi.cycle, unschedulable=unschedulable, message="m", plugins=plugins)
    assert qpi.where == "backoff"


def test_binding_pod_restored_without_its_attempt_backs_off(
    q: SchedulingQueue, clock: FakeClock
) -> None:
    k = add(q, pod())
    (qpi,) = q.pop(1)
    assert q.assumed(k, qpi.cycle)
    r = SchedulingQueue(clock, hints=HINTS)
    r.restore([qpi.to_record()])
    assert r.failed(k, qpi.cycle, unschedulable=True, message="m", plugins=[FIT])
    assert r.get(k).where == "backoff"  # type: ignore[union-attr]


def test_inflight_events_memory_is_bounded(q: SchedulingQueue) -> None:
    ka, kb = add(q, pod("a")), add(q, pod("b"))
    (pa,) = q.pop(1)
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node("n1"))
    q.pop(1)
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node("n2"))
    assert q.inflight_events == 2
    q.failed(ka, pa.cycle, unschedulable=True, message="m", plugins=[FIT])
    assert q.inflight_events == 1  # n1 came before b's pop: nobody needs it
    q.delete(kb)
    assert q.inflight_events == 0
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node("n3"))
    assert q.inflight_events == 0  # nothing in flight: not remembered


def test_inflight_structure() -> None:
    f: InFlight[str] = InFlight()
    assert not f.add("e0") and f.events_for("a") is None
    f.popped("a")
    f.add("e1")
    f.popped("b")
    f.add("e2")
    assert f.events_for("a") == ["e1", "e2"] and f.events_for("b") == ["e2"]
    assert f.add_for_pod("b", ["b-update"]) and not f.add_for_pod("c", ["x"])
    f.done("a")
    assert len(f) == 2 and f.events_for("b") == ["e2", "b-update"]
    f.popped("b")  # popped again: only later events count
    assert f.events_for("b") == []
    f.done("b")
    assert len(f) == 0 and f.pods == 0
    for i in range(3000):  # long-lived pod, many events, then compaction
        f.popped(f"p{i}")
        f.add(f"e{i}")
        if i:
            f.done(f"p{i - 1}")
    assert len(f) == 1 and len(f._events) < 1100


# --- updates of unschedulable pods, with hints ------------------------------------------


def _update(q: SchedulingQueue, qpi: QueuedPodInfo, mutate: Any) -> None:
    new = copy.deepcopy(qpi.raw)
    mutate(new)
    q.update(qpi.key, qpi.uid, new, qpi.raw_seq + 1)


@pytest.mark.parametrize(
    ("plugins", "mutate", "expected"),
    [
        pytest.param(
            [TAINT],
            lambda p: p["spec"].update(tolerations=[TOLERATE]),
            "active",
            id="toleration for a taint-rejected pod",
        ),
        pytest.param(
            [AFF],
            lambda p: p["spec"].update(tolerations=[TOLERATE]),
            "unschedulable",
            id="toleration does not help node affinity",
        ),
        pytest.param(
            [FIT],
            lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="1"),
            "active",
            id="scaled itself down",
        ),
        pytest.param(
            [FIT],
            lambda p: p["metadata"]["labels"].update(a="b"),
            "unschedulable",
            id="label change does not help fit",
        ),
        pytest.param(
            [FIT],
            lambda p: p["status"].update(conditions=[{"type": "PodScheduled"}]),
            "unschedulable",
            id="status only",
        ),
    ],
)
def test_update_of_unschedulable_pod_with_hints(
    q: SchedulingQueue, clock: FakeClock, plugins: list[str], mutate: Any, expected: str
) -> None:
    qpi = reject(q, pod(cpu="2"), *plugins)
    clock.advance(5)
    _update(q, qpi, mutate)
    assert qpi.where == expected


def test_gates_removed_by_update(q: SchedulingQueue) -> None:
    k = add(q, pod(gates=["a", "b"]))
    qpi = q.get(k)
    assert qpi is not None
    _update(q, qpi, lambda p: p["spec"].update(schedulingGates=[{"name": "b"}]))
    assert qpi.where == "gated"
    _update(q, qpi, lambda p: p["spec"].pop("schedulingGates"))
    assert qpi.where == "active"


# --- metrics --------------------------------------------------------------------------


def test_incoming_pods_by_queue_and_event(q: SchedulingQueue, clock: FakeClock) -> None:
    add(q, pod("gated", gates=["g"]))
    a = reject(q, pod("a", cpu="2"), FIT)
    b = reject(q, pod("b", cpu="2"), FIT)
    clock.advance(0.5)
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node())
    clock.advance(5)
    q.flush_backoff_completed()
    assert (a.where, b.where) == ("active", "active")
    k = add(q, pod("c"))
    (_, _, c) = q.pop(3)
    q.failed(k, c.cycle, unschedulable=False, message="boom", plugins=[])
    assert c.where == "backoff"
    assert q.take_incoming() == {
        ("unschedulable", "UnschedulablePodAdd"): 1,  # the gated pod
        ("active", "UnschedulablePodAdd"): 3,
        ("unschedulable", "ScheduleAttemptFailure"): 2,
        ("backoff", "NodeAdd"): 2,
        ("active", "BackoffComplete"): 2,
        ("backoff", "ScheduleAttemptFailure"): 1,
    }
    assert q.take_incoming() == {}


def test_lease_expiry_is_counted(q: SchedulingQueue, clock: FakeClock) -> None:
    add(q, pod())
    q.pop(1)
    q.take_incoming()
    clock.advance(16)
    (lapsed,) = q.expire_leases()
    assert q.take_incoming() == {}  # not in activeQ until its attempt is fenced
    assert q.requeue_lapsed(lapsed.key, lapsed.cycle, seq=None)
    assert q.take_incoming() == {("active", "LeaseExpired"): 1}
    assert clock() == T0 + 16
