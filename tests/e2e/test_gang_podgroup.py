"""Gang scheduling through 1.36's Workload API (scheduling.k8s.io/v1alpha2) on a real
stack: a Workload with a pod group template, the PodGroup object made from it on its own
subject, pods with spec.schedulingGroup. GangScheduling enabled, a 3 s Permit timeout."""

from __future__ import annotations

from collections.abc import Callable

import nats
import pytest
import redis.asyncio as aioredis
from nats.js import JetStreamContext

from shared.subjects import (
    CLUSTER_STREAM,
    ERROR_HEADER,
    error_subject,
    workload_pod_group_subject,
)
from shared.tools.client import (
    PodTracker,
    publish_all,
    publish_node,
    publish_pod,
    publish_workload,
    publish_workload_pod_group,
)
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import (
    make_group_pod,
    make_node,
    make_pod,
    make_scheduling_pod_group,
    make_workload_v1alpha2,
)
from tests.e2e import test_gang_workload as gangs
from tests.e2e.kills import kill_and_restart
from tests.e2e.state import eventually
from tests.e2e.test_binding import unpack_json
from tests.e2e.test_gang_workload import (
    WAITING_FOR_PODS,
    completes_the_gang,
    times_out_at_permit,
)
from tests.e2e.test_whatif_e2e import what_if

pytestmark = pytest.mark.e2e

# The stack (GangScheduling on, a 3 s Permit timeout) and its clients, as for v1alpha1.
gang_stack, client, redis = gangs.gang_stack, gangs.client, gangs.redis

WAITING_FOR_GROUP = 'waiting for pod\'s pod group "train" to appear in scheduling queue'


def train_group(min_count: int) -> dict[str, object]:
    return make_scheduling_pod_group("train", min_count, workload="job", template="workers")


async def condition(js: JetStreamContext, wanted: tuple[str, str]) -> bool:
    """Whether PodGroup train's PodGroupScheduled condition has that status and reason."""
    last = await js.get_last_msg(CLUSTER_STREAM, workload_pod_group_subject("default", "train"))
    conditions = (unpack_json(last.data)["object"].get("status") or {}).get("conditions") or []
    found = [(c["status"], c["reason"]) for c in conditions if c["type"] == "PodGroupScheduled"]
    return found == [wanted]


def held(message: str, count: int) -> Callable[[PodTracker], bool]:
    def check(t: PodTracker) -> bool:
        return sum(m == message for m in t.unschedulable().values()) == count

    return check


async def test_pods_wait_for_their_pod_group_then_for_min_count_then_bind_whole(
    client: tuple[JetStreamContext, PodTracker],
) -> None:
    js, tracker = client
    await publish_node(js, make_node("n1", cpu="8", memory="16Gi"))
    await publish_workload(js, make_workload_v1alpha2("job", {"workers": 3}))
    pods = [make_group_pod(f"w-{i}", "train", cpu="1") for i in range(3)]
    # The pods come before their PodGroup object: they wait for it (KEP-5832 allows any
    # order), while a pod in no gang binds.
    await publish_all(js, pods[:2])
    await publish_pod(js, make_pod("solo", cpu="1"))
    assert await tracker.wait_until(held(WAITING_FOR_GROUP, 2), timeout=30), tracker.pods
    assert await tracker.wait_until(lambda t: "default/solo" in t.bound(), timeout=30)

    await publish_workload_pod_group(js, train_group(3))
    assert await tracker.wait_until(held(WAITING_FOR_PODS, 2), timeout=30), tracker.pods
    await completes_the_gang(client, pods[2])
    # ksched reports it on the PodGroup (KEP-5832's status)
    assert await eventually(lambda: condition(js, ("True", "Scheduled")), timeout=30)


async def test_a_pod_group_gang_that_cannot_all_fit_times_out_at_permit_and_binds_none(
    client: tuple[JetStreamContext, PodTracker], redis: aioredis.Redis
) -> None:
    await publish_workload_pod_group(client[0], train_group(3))
    gang = [make_group_pod(f"w-{i}", "train", cpu="1") for i in range(3)]
    await times_out_at_permit(client, redis, gang)
    assert await eventually(lambda: condition(client[0], ("False", "Unschedulable")), timeout=30)
    last = await client[0].get_last_msg(
        CLUSTER_STREAM, workload_pod_group_subject("default", "train")
    )
    (cond,) = unpack_json(last.data)["object"]["status"]["conditions"]
    assert "rejected due to timeout after waiting 3s at plugin GangScheduling" in cond["message"]


@pytest.mark.parametrize("watcher_restarted", [False, True])
async def test_a_pod_groups_policy_is_immutable_the_update_is_refused_and_undone(
    gang_stack: LocalStack, client: tuple[JetStreamContext, PodTracker], watcher_restarted: bool
) -> None:
    """Also by a watcher that took over after the PodGroup was accepted (it lists the
    accepted Workloads and PodGroups first): were the update taken there, the stream
    would say minCount 1 while the queue's and workers' copies keep 3."""
    js, tracker = client
    subject = workload_pod_group_subject("default", "train")
    refusals = await js.subscribe(error_subject(subject))
    await publish_node(js, make_node("n1", cpu="8", memory="16Gi"))
    await publish_workload_pod_group(js, train_group(3))
    await publish_all(js, [make_group_pod(f"w-{i}", "train", cpu="1") for i in range(2)])
    assert await tracker.wait_until(held(WAITING_FOR_PODS, 2), timeout=30), tracker.pods
    if watcher_restarted:
        kill_and_restart(gang_stack, "watcher")

    # minCount 3 -> 1 would let both bind: refused, as the API server refuses it.
    await publish_workload_pod_group(js, train_group(1), "MODIFIED")
    msg = await refusals.next_msg(timeout=30)
    reason = (msg.headers or {}).get(ERROR_HEADER, "")
    assert reason == (
        'PodGroup.scheduling.k8s.io "train" is invalid: spec.schedulingPolicy: '
        'Invalid value: {"gang":{"minCount":1}}: field is immutable'
    )

    async def undone() -> bool:  # the stream holds the old PodGroup again
        last = await js.get_last_msg(CLUSTER_STREAM, subject)
        return unpack_json(last.data)["object"]["spec"]["schedulingPolicy"] == {
            "gang": {"minCount": 3}
        }

    assert await eventually(undone, timeout=30)
    # The gang still needs 3: a third pod completes it and all three bind.
    await completes_the_gang(client, make_group_pod("w-2", "train", cpu="1"))


async def test_whatif_says_a_pod_of_an_incomplete_gang_would_wait_at_permit(
    gang_stack: LocalStack, client: tuple[JetStreamContext, PodTracker]
) -> None:
    js, tracker = client
    await publish_node(js, make_node("n1", cpu="8", memory="16Gi"))
    await publish_workload_pod_group(js, train_group(3))
    nc = await nats.connect(gang_stack.nats_url)
    try:
        pod = make_group_pod("asked", "train", cpu="1")

        async def seen() -> bool:  # the worker knows the node and the PodGroup
            report = await what_if(nc, pod)
            return report["nodes"] == 1 and "gated" not in report

        assert await eventually(seen, timeout=30)
        report = await what_if(nc, pod)
        assert report["chosen"] == "n1"
        (wait,) = report["permit"]["wait"]
        assert (wait["plugin"], wait["placed"], wait["minCount"]) == ("GangScheduling", 1, 3)
        whole = await what_if(nc, pod, replicas=3)
        assert whole["permit"] is None and whole["replicas"]["fit"] == 3
    finally:
        await nc.close()
    assert tracker.pods == {}  # asking wrote nothing
