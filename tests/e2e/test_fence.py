"""Fencing a lapsed attempt through the pod's subject (services/queue/fence.py), against
a real nats-server: what each state of the subject gives."""

from __future__ import annotations

import pytest
from nats.js import JetStreamContext

from services.queue.fence import Lapsed, Outcome, fence
from shared.api.podstatus import bound_pod, pod_condition
from shared.runtime.publish import Conflict, write_pod
from shared.tools.client import last_pod_msg, publish_pod
from shared.tools.synthetic import make_pod
from shared.wire import decode_user_payload

pytestmark = pytest.mark.e2e


def lapsed(seq: int, name: str = "p", binding: bool = True) -> Lapsed:
    return Lapsed(f"default/{name}", 3, seq, make_pod(name), binding)


async def test_a_fence_moves_the_subject_past_the_attempt_whose_bind_then_conflicts(
    js: JetStreamContext,
) -> None:
    seq = await publish_pod(js, make_pod("p"))
    result = await fence(js, lapsed(seq), "binding did not complete within 120s")
    assert result.outcome is Outcome.FENCED and result.seq is not None and result.seq > seq
    last = await last_pod_msg(js, "default", "p")
    condition = pod_condition(decode_user_payload(last.data, None)["object"])
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "SchedulerError")
    assert condition["message"] == "binding did not complete within 120s"
    with pytest.raises(Conflict):  # the lapsed attempt's bind, woken late
        await write_pod(js, bound_pod(make_pod("p"), "n1"), seq)


async def test_a_pod_bound_meanwhile_is_left_for_the_watcher(js: JetStreamContext) -> None:
    seq = await publish_pod(js, make_pod("p"))
    await write_pod(js, bound_pod(make_pod("p"), "n1"), seq)
    assert (await fence(js, lapsed(seq), "x")).outcome is Outcome.RESOLVED


async def test_a_deleted_pod_is_left_for_the_watcher(js: JetStreamContext) -> None:
    seq = await publish_pod(js, make_pod("p"))
    await publish_pod(js, make_pod("p"), "DELETED")
    assert (await fence(js, lapsed(seq), "x")).outcome is Outcome.RESOLVED


async def test_a_pod_updated_meanwhile_is_fenced_at_its_latest_version(
    js: JetStreamContext,
) -> None:
    seq = await publish_pod(js, make_pod("p"))
    newer = await publish_pod(js, make_pod("p", cpu="200m"), "MODIFIED")
    result = await fence(js, lapsed(seq), "x")
    assert (result.outcome, result.seq) == (Outcome.FENCED, newer)
