"""Gang scheduling through 1.37's Workload API (scheduling.k8s.io/v1beta1) on a real
stack: a v1beta1 Workload and PodGroup on the subjects of the older versions, pods with
spec.schedulingGroup, and the update rules of v1beta1: a gang's minCount may change (and
the new count is used), other fields may not. GangScheduling enabled, a 3 s Permit
timeout."""

from __future__ import annotations

import pytest
from nats.js import JetStreamContext

from shared.subjects import (
    CLUSTER_STREAM,
    ERROR_HEADER,
    ERRORS_PREFIX,
    workload_pod_group_subject,
    workload_subject,
)
from shared.tools.client import (
    PodTracker,
    publish_all,
    publish_node,
    publish_workload,
    publish_workload_pod_group,
)
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import (
    make_group_pod,
    make_node,
    make_pod_group_v1beta1,
    make_workload_v1beta1,
)
from tests.e2e import test_gang_workload as gangs
from tests.e2e.kills import kill_and_restart
from tests.e2e.state import eventually
from tests.e2e.test_binding import unpack_json
from tests.e2e.test_gang_podgroup import held
from tests.e2e.test_gang_workload import WAITING_FOR_PODS

pytestmark = pytest.mark.e2e

# The stack (GangScheduling on, a 3 s Permit timeout) and its clients, as for v1alpha1.
gang_stack, client = gangs.gang_stack, gangs.client


def train_group(min_count: int, **spec: object) -> dict[str, object]:
    group = make_pod_group_v1beta1("train", min_count, workload="job", template="workers")
    group["spec"].update(spec)
    return group


@pytest.mark.parametrize("watcher_restarted", [False, True])
async def test_a_v1beta1_gang_waits_for_min_count_and_a_lowered_min_count_lets_it_bind(
    gang_stack: LocalStack, client: tuple[JetStreamContext, PodTracker], watcher_restarted: bool
) -> None:
    """Also with a watcher that took over after the objects were accepted: it judges the
    updates against the Workload and PodGroup it lists first (v1beta1's rules)."""
    js, tracker = client
    group_subject = workload_pod_group_subject("default", "train")
    refusals = await js.subscribe(f"{ERRORS_PREFIX}.>")
    await publish_node(js, make_node("n1", cpu="8", memory="16Gi"))
    await publish_workload(js, make_workload_v1beta1("job", {"workers": 4}))
    await publish_workload_pod_group(js, train_group(4))
    pods = [make_group_pod(f"w-{i}", "train", cpu="1") for i in range(3)]
    await publish_all(js, pods)
    # 3 pods of a gang of minCount 4: all held at PreEnqueue, none bound
    assert await tracker.wait_until(held(WAITING_FOR_PODS, 3), timeout=30), tracker.pods
    assert not tracker.bound()
    if watcher_restarted:
        kill_and_restart(gang_stack, "watcher")

    # The Workload's template follows (its minCount may change too: accepted, no refusal)
    await publish_workload(js, make_workload_v1beta1("job", {"workers": 3}), "MODIFIED")
    # Another field of the PodGroup may not change: refused as the API server refuses it.
    await publish_workload_pod_group(js, train_group(4, priority=10), "MODIFIED")
    msg = await refusals.next_msg(timeout=30)  # the first refusal: the Workload had none
    assert msg.subject == f"{ERRORS_PREFIX}.{group_subject}"
    assert (msg.headers or {}).get(ERROR_HEADER) == (
        'PodGroup.scheduling.k8s.io "train" is invalid: spec.priority: Invalid value: null: '
        "field is immutable"
    )

    async def undone() -> bool:  # the stream holds the accepted PodGroup again
        last = await js.get_last_msg(CLUSTER_STREAM, group_subject)
        return "priority" not in unpack_json(last.data)["object"]["spec"]

    assert await eventually(undone, timeout=30)
    assert not tracker.bound()

    # minCount 4 -> 3: accepted, and the three pods bind, each written once.
    await publish_workload_pod_group(js, train_group(3), "MODIFIED")
    members = {f"default/w-{i}" for i in range(3)}
    assert await tracker.wait_until(lambda t: members <= set(t.bound()), timeout=60), tracker.pods
    assert all(v.bound_writes == 1 for k, v in tracker.pods.items() if k in members)

    async def reported() -> bool:  # v1beta1's condition, on the PodGroup as updated
        last = unpack_json((await js.get_last_msg(CLUSTER_STREAM, group_subject)).data)
        spec, status = last["object"]["spec"], last["object"].get("status") or {}
        found = [(c["type"], c["status"], c["reason"]) for c in status.get("conditions") or []]
        return spec["schedulingPolicy"] == {"gang": {"minCount": 3}} and found == [
            ("PodGroupInitiallyScheduled", "True", "Scheduled")
        ]

    assert await eventually(reported, timeout=30)
    last = await js.get_last_msg(CLUSTER_STREAM, workload_subject("default", "job"))
    template = unpack_json(last.data)["object"]["spec"]["podGroupTemplates"][0]
    assert template["schedulingPolicy"] == {"gang": {"minCount": 3}}  # not undone
    # Nothing else was refused so far (the binder's status write included).
    assert refusals.pending_msgs == 0
