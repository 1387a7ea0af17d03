"""KEP-5501: what a pod a PreEnqueue plugin rejects says (its PodScheduled condition and
event, notready.py), which pods the queue hands over to say it, and the reporter that
writes it (real nats-server): at once for scheduling gates, after KEP-5501's delay
otherwise, never over a newer version of the pod."""

from __future__ import annotations

import json
from typing import Any

import nats
import pytest

from services.queue.notready import NotReadyReporter, not_ready
from services.queue.podinfo import Gating, QueuedPodInfo
from services.queue.queue import SchedulingQueue
from shared.api.podstatus import pod_condition, with_condition
from shared.runtime.connections import ensure_streams
from shared.subjects import CLUSTER_STREAM, EVENTS_PREFIX, pod_subject
from shared.tools.client import publish_pod
from shared.tools.servers import Server
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


# --- the reporter, against a real nats-server -----------------------------------------


def rejected_pod(raw: dict[str, Any], seq: int, plugin: str, message: str) -> QueuedPodInfo:
    return QueuedPodInfo(
        key=key(raw["metadata"]["name"]),
        uid=raw["metadata"]["uid"],
        raw=raw,
        seq=seq,
        priority=0,
        timestamp=0.0,
        where="gated",
        unschedulable_plugins=[plugin],
        message=message,
    )


async def test_the_reporter_writes_a_gated_pods_condition_at_once(nats_server: Server) -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    js = nc.jetstream()
    await ensure_streams(js)
    raw = queued_pod("g", gates=["example.com/wait"])
    seq = await publish_pod(js, raw)
    reporter = NotReadyReporter(nc, delay=60)  # only NotReadyForScheduling waits
    reporter.rejected(rejected_pod(raw, seq, "SchedulingGates", "waiting for gates"))
    await reporter.idle()
    await nc.flush()
    last = await js.get_last_msg(CLUSTER_STREAM, pod_subject("default", "g"))
    assert condition(json.loads(last.data)["object"]) == ("False", "SchedulingGated", APISERVER)
    assert last.seq == seq + 1  # written over the version it was given
    await nc.close()


async def test_not_ready_waits_its_delay_and_a_pod_updated_meanwhile_is_not_written(
    nats_server: Server,
) -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    js = nc.jetstream()
    await ensure_streams(js)
    events = await nc.subscribe(f"{EVENTS_PREFIX}.default.>")
    held = queued_pod("p", labels={"hold": "review"})
    seq = await publish_pod(js, held)
    other = queued_pod("q", labels={"hold": "review"})
    other_seq = await publish_pod(js, other)
    reporter = NotReadyReporter(nc, delay=2.0)
    reporter.rejected(rejected_pod(held, seq, "Hold", "held: review"))
    reporter.rejected(rejected_pod(other, other_seq, "Hold", "held: review"))
    update = await publish_pod(js, queued_pod("p", rv=2), "MODIFIED")  # let in meanwhile
    await reporter.idle()
    await nc.flush()
    assert update == other_seq + 1  # nothing written before it: the delay
    last = await js.get_last_msg(CLUSTER_STREAM, pod_subject("default", "p"))
    assert last.seq == update  # nor after it: the pod changed since its rejection
    last = await js.get_last_msg(CLUSTER_STREAM, pod_subject("default", "q"))
    assert condition(json.loads(last.data)["object"]) == (
        "False",
        "NotReadyForScheduling",
        "held: review",
    )
    event = json.loads((await events.next_msg(timeout=5)).data)
    assert (event["reason"], event["involvedObject"]["name"]) == ("NotReadyForScheduling", "q")
    with pytest.raises(TimeoutError):  # none for p, whose write was refused
        await events.next_msg(timeout=0.5)
    await nc.close()
