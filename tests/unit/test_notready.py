"""KEP-5501: what a pod a PreEnqueue plugin rejects says (its PodScheduled condition and
event, notready.py), and which pods the queue hands over to say it."""

from __future__ import annotations

from typing import Any

import pytest

from services.queue.notready import not_ready
from services.queue.podinfo import Gating
from services.queue.queue import SchedulingQueue
from shared.api.podstatus import pod_condition, with_condition
from tests.unit.test_queue import FakeClock, add, key
from tests.unit.test_queue import pod as queued_pod

APISERVER = "Scheduling is blocked due to non-empty scheduling gates"


def condition(raw: dict[str, Any]) -> tuple[str, str, str]:
    cond = pod_condition(raw) or {}
    return cond.get("status", ""), cond.get("reason", ""), cond.get("message", "")


def test_a_gated_pod_gets_kube_apiservers_condition_and_no_event() -> None:
    report = not_ready(queued_pod("g", gates=["example.com/wait"]), "SchedulingGates", "x")
    assert report is not None and report.event is None
    assert condition(report.pod) == ("False", "SchedulingGated", APISERVER)
    assert report.pod["status"]["phase"] == "Pending"


def test_another_plugins_rejection_is_not_ready_for_scheduling_with_an_event() -> None:
    raw = queued_pod("p")
    report = not_ready(raw, "Hold", "held: review")
    assert report is not None and report.event is not None
    assert condition(report.pod) == ("False", "NotReadyForScheduling", "held: review")
    event = report.event
    assert (event["reason"], event["message"], event["type"]) == (
        "NotReadyForScheduling",
        "held: review",
        "Warning",
    )
    assert event["involvedObject"]["name"] == "p"
    assert pod_condition(raw) is None  # the pod it was given is left as it was


@pytest.mark.parametrize(
    ("plugin", "reason", "message"),
    [("SchedulingGates", "SchedulingGated", APISERVER), ("Hold", "NotReadyForScheduling", "m")],
)
def test_a_pod_that_already_says_so_is_not_written_again(
    plugin: str, reason: str, message: str
) -> None:
    raw = with_condition(queued_pod("p"), "False", reason, message)
    assert raw is not None
    assert not_ready(raw, plugin, message) is None


def test_a_new_reason_replaces_an_earlier_one() -> None:
    raw = with_condition(queued_pod("p"), "False", "Unschedulable", "0/3 nodes are available")
    assert raw is not None
    report = not_ready(raw, "Hold", "held: legal")
    assert report is not None
    assert condition(report.pod) == ("False", "NotReadyForScheduling", "held: legal")
    assert len(report.pod["status"]["conditions"]) == 1


def hold_by_label(raw: dict[str, Any]) -> Gating | None:
    reason = raw["metadata"]["labels"].get("hold")
    return None if reason is None else Gating("Hold", f"held: {reason}")


def test_the_queue_hands_over_each_rejected_pod_still_gated_once() -> None:
    q = SchedulingQueue(FakeClock(), pre_enqueue=hold_by_label)
    add(q, "a", labels={"hold": "review"})
    add(q, "b", labels={"hold": "review"})
    add(q, "free")
    rejected = q.take_pre_enqueue_rejected()
    assert sorted((p.key, p.message) for p in rejected) == [
        (key("a"), "held: review"),
        (key("b"), "held: review"),
    ]
    assert q.take_pre_enqueue_rejected() == []

    # rejected again on an update (another reason): handed over again, with it
    q.update(key("a"), "uid-a", queued_pod("a", labels={"hold": "legal"}, rv=2), 2)
    # let in by an update: nothing to say
    q.update(key("b"), "uid-b", queued_pod("b", rv=2), 2)
    assert [(p.key, p.message) for p in q.take_pre_enqueue_rejected()] == [
        (key("a"), "held: legal")
    ]
