"""The pod objects ksched writes: what they change, and that the pod they start from
(shared with the caller's queue and cache entries) stays as it was."""

from __future__ import annotations

import copy
from typing import Any

from shared.api.podstatus import (
    bound_pod,
    pod_condition,
    preempted_victim,
    unschedulable_pod,
    with_nominated_node,
)
from shared.tools.synthetic import make_pod


def pending_pod() -> dict[str, Any]:
    pod = make_pod("p", cpu="1")
    pod["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    return pod


def test_bound_pod_sets_node_and_condition_and_leaves_the_original() -> None:
    raw = pending_pod()
    before = copy.deepcopy(raw)
    bound = bound_pod(raw, "n1")
    assert raw == before
    assert bound["spec"]["nodeName"] == "n1"
    assert (pod_condition(bound) or {}).get("status") == "True"
    assert {c["type"] for c in bound["status"]["conditions"]} == {"Ready", "PodScheduled"}
    assert bound["spec"]["containers"] == raw["spec"]["containers"]


def test_unschedulable_then_nominated_leave_the_original() -> None:
    raw = pending_pod()
    before = copy.deepcopy(raw)
    failed = unschedulable_pod(raw, "0/3 nodes are available: 3 Insufficient cpu.")
    assert failed is not None
    nominated = with_nominated_node(failed, "n2")
    assert nominated is not None
    assert raw == before
    assert failed["status"].get("nominatedNodeName") is None
    assert nominated["status"]["nominatedNodeName"] == "n2"
    assert nominated["status"]["phase"] == "Pending"
    assert (pod_condition(nominated) or {}).get("reason") == "Unschedulable"
    cleared = with_nominated_node(nominated, "")
    assert cleared is not None and "nominatedNodeName" not in cleared["status"]
    assert nominated["status"]["nominatedNodeName"] == "n2"
    assert unschedulable_pod(failed, "0/3 nodes are available: 3 Insufficient cpu.") is None


def test_preempted_victim_gets_disruption_target_and_leaves_the_original() -> None:
    raw = bound_pod(pending_pod(), "n1")
    before = copy.deepcopy(raw)
    victim = preempted_victim(raw, "default-scheduler")
    assert raw == before
    target = pod_condition(victim, "DisruptionTarget")
    assert target is not None and target["reason"] == "PreemptionByScheduler"
    assert pod_condition(victim) == pod_condition(raw)
