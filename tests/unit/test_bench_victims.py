"""Victims attributed to their preemptors by the Preempted Events (bench/victims.py)."""

from __future__ import annotations

from shared.api.podstatus import EVENT_PREEMPTED, make_event, preempted_message
from shared.tools.bench.victims import (
    Preemption,
    preempted_again,
    preemption_of,
    victims_of_bound,
)
from shared.tools.synthetic import make_pod


def _preempted(victim: str, preemptor: str, node: str = "node-1") -> dict[str, object]:
    raw = make_pod(victim, namespace="init", cpu="900m")
    by = make_pod(preemptor, namespace="measured", cpu="3")
    message = preempted_message(by, node)
    return make_event(raw, EVENT_PREEMPTED, message, warning=False, action="Preempting")


def test_a_preempted_event_names_its_victim_the_preemptors_uid_and_the_node() -> None:
    assert preemption_of(_preempted("low-1", "high-1", "node-00042")) == (
        "init/low-1",
        Preemption("uid-measured-high-1", "node-00042"),
    )


def test_other_events_name_no_preemption() -> None:
    event = _preempted("low-1", "high-1")
    assert preemption_of({**event, "reason": "Scheduled"}) is None
    assert preemption_of({**event, "message": "something else"}) is None


def test_only_the_bound_preemptors_victims_count() -> None:
    preemptions = {
        "init/a": Preemption("u1", "n1"),
        "init/b": Preemption("u1", "n1"),
        "init/c": Preemption("u2", "n2"),
        "init/d": Preemption("u3", "n3"),
    }
    uids = {"m/p1": "u1", "m/p2": "u2", "m/p3": "u3"}
    # p3 evicted its victim but had not bound when the run ended
    assert victims_of_bound(preemptions, uids, ["m/p1", "m/p2"]) == 3
    assert victims_of_bound(preemptions, uids, []) == 0


def test_a_preemptor_with_victims_on_two_nodes_preempted_again() -> None:
    """The average cannot tell: p1 evicted on two nodes, p2 took p1's first room and
    evicted nobody; 4 victims for 2 bound preemptors either way."""
    preemptions = {
        "init/a": Preemption("u1", "n1"),
        "init/b": Preemption("u1", "n1"),
        "init/c": Preemption("u1", "n2"),
        "init/d": Preemption("u1", "n2"),
        "init/e": Preemption("u3", "n3"),
        "init/f": Preemption("u3", "n4"),
    }
    uids = {"m/p1": "u1", "m/p2": "u2", "m/p3": "u3"}
    assert victims_of_bound(preemptions, uids, ["m/p1", "m/p2"]) == 4
    assert preempted_again(preemptions, uids, ["m/p1", "m/p2"]) == ["m/p1"]  # p3 unbound
    assert preempted_again(preemptions, uids, ["m/p2", "m/p3"]) == ["m/p3"]
