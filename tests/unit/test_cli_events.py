"""`get events`, describe's events (the pod's own, by uid; repeats folded), AGE from
the stream when there is no creationTimestamp, and a pod bound to a missing node."""

from __future__ import annotations

import datetime as dt
from typing import Any

from shared.tools.cli.describe import describe_pod
from shared.tools.cli.events import about, event_columns, event_row, interval, series
from shared.tools.cli.live import Instance
from shared.tools.cli.tables import pod_row, pod_status
from shared.tools.cli.top import render_status
from shared.tools.synthetic import make_pod

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def event(reason: str, seconds_ago: int, uid: str = "u1", message: str = "m") -> dict[str, Any]:
    stamp = (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "kind": "Event",
        "metadata": {"name": f"p.{reason}{seconds_ago}", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p", "uid": uid},
        "type": "Warning" if reason == "FailedScheduling" else "Normal",
        "reason": reason,
        "message": message,
        "source": {"component": "default-scheduler"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def test_repeats_fold_into_one_event_with_a_count() -> None:
    events = [
        event("FailedScheduling", 40),
        event("FailedScheduling", 20),
        event("FailedScheduling", 5),
        event("Scheduled", 1),
    ]
    folded = series(events)
    assert [(e["reason"], e["count"]) for e in folded] == [
        ("FailedScheduling", 3),
        ("Scheduled", 1),
    ]
    assert interval(folded[0], NOW) == "5s (x3 over 40s)"
    assert interval(folded[1], NOW) == "1s"
    assert event_columns(False) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert event_row(folded[0], NOW, False) == ["5s", "Warning", "FailedScheduling", "pod/p", "m"]
    assert event_row(folded[1], NOW, True)[:2] == ["default", "1s"]


def test_describe_shows_only_the_current_pods_events() -> None:
    """After `delete pod p` and a new `p`, the old pod's Scheduled must not show."""
    old = event("Scheduled", 60, uid="old-uid", message="Successfully assigned default/p to n1")
    new = event("FailedScheduling", 2, uid="new-uid", message="0/1 nodes are available")
    pod = make_pod("p")
    pod["metadata"]["uid"] = "new-uid"
    text = describe_pod(pod, series(about([old, new], pod)), NOW)
    assert "FailedScheduling" in text and "Successfully assigned" not in text


def test_age_from_the_stream_when_there_is_no_creation_timestamp() -> None:
    pod = make_pod("p")
    pod["metadata"].pop("creationTimestamp", None)
    assert pod_row(pod, NOW)[4] == "<unknown>"
    assert pod_row(pod, NOW, seen=NOW - dt.timedelta(seconds=90))[4] == "90s"
    pod["metadata"]["creationTimestamp"] = "2024-01-01T11:59:00Z"  # it wins when present
    assert pod_row(pod, NOW, seen=NOW - dt.timedelta(seconds=90))[4] == "60s"


def test_a_pod_bound_to_a_missing_node_is_pending_not_scheduled() -> None:
    pod = make_pod("p", node="gone")
    assert pod_status(pod, {"n1"}) == "Pending"
    assert pod_status(pod, {"gone"}) == "Scheduled"
    assert pod_row(pod, NOW, nodes={"n1"})[2] == "Pending"
    text = describe_pod(pod, [], NOW, node_missing=True)
    assert "Node:           gone (not found: no such node in the cluster)" in text
    assert "Status:         Pending" in text


def test_status_shows_the_configuration_each_instance_loaded() -> None:
    up = [
        Instance(s, f"id-{s}", "0.1.0", "h", "1", ready=True, reason="ok", config=c, profiles=p)
        for s, c, p in (
            ("watcher", "/etc/ksched/config.yaml", "default-scheduler,batch"),
            ("queue", "defaults", "default-scheduler"),
        )
    ]
    text, _ = render_status(up, NOW)
    header = text.splitlines()[0].split()
    assert header[-3:] == ["CONFIG", "PROFILES", "MESSAGE"]
    assert "/etc/ksched/config.yaml   default-scheduler,batch   ok" in text
    assert "defaults                  default-scheduler         ok" in text
