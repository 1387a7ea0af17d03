"""Victims attributed to their preemptors by the Preempted Events (bench/victims.py)."""

from __future__ import annotations

from shared.api.podstatus import EVENT_PREEMPTED, make_event, preempted_message
from shared.tools.bench.victims import preemption_of, victims_of_bound
from shared.tools.synthetic import make_pod


def _preempted(victim: str, preemptor: str) -> dict[str, object]:
    raw = make_pod(victim, namespace="init", cpu="900m")
    by = make_pod(preemptor, namespace="measured", cpu="3")
    message = preempted_message(by, "node-1")
    return make_event(raw, EVENT_PREEMPTED, message, warning=False, action="Preempting")


def test_a_preempted_event_names_its_victim_and_the_preemptors_uid() -> None:
    assert preemption_of(_preempted("low-1", "high-1")) == ("init/low-1", "uid-measured-high-1")


def test_other_events_name_no_preemption() -> None:
    event = _preempted("low-1", "high-1")
    assert preemption_of({**event, "reason": "Scheduled"}) is None
    assert preemption_of({**event, "message": "something else"}) is None


def test_only_the_bound_preemptors_victims_count() -> None:
    preemptions = {"init/a": "u1", "init/b": "u1", "init/c": "u2", "init/d": "u3"}
    uids = {"m/p1": "u1", "m/p2": "u2", "m/p3": "u3"}
    # p3 evicted its victim but had not bound when the run ended
    assert victims_of_bound(preemptions, uids, ["m/p1", "m/p2"]) == 3
    assert victims_of_bound(preemptions, uids, []) == 0
