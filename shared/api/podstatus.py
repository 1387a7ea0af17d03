"""What ksched writes about a pod: PodScheduled conditions, bindings, Event objects."""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from typing import Any

from shared.api.models import DEFAULT_SCHEDULER_NAME, key_of

POD_SCHEDULED = "PodScheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
# A pod with scheduling gates: the condition kube-apiserver sets on it (ksched has none).
REASON_SCHEDULING_GATED = "SchedulingGated"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
# KEP-5501: any other PreEnqueue rejection, in the condition and an event.
REASON_NOT_READY_FOR_SCHEDULING = "NotReadyForScheduling"
EVENT_SCHEDULED = "Scheduled"
EVENT_FAILED_SCHEDULING = "FailedScheduling"
EVENT_PREEMPTED = "Preempted"
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


_now_cache: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """The time now to the second (formatted once per second: every binding asks)."""
    global _now_cache
    second = int(time.time())
    if _now_cache[0] != second:
        stamp = dt.datetime.fromtimestamp(second, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _now_cache = (second, stamp)
    return _now_cache[1]


def _with_status(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A copy of the pod and of its status to change; the rest is shared, not copied
    (these objects are written out, never changed further)."""
    new = dict(raw)
    st = dict(raw.get("status") or {})
    new["status"] = st
    return new, st


def pod_condition(raw: dict[str, Any], ctype: str = POD_SCHEDULED) -> dict[str, Any] | None:
    for cond in (raw.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def with_condition(
    raw: dict[str, Any], status: str, reason: str = "", message: str = ""
) -> dict[str, Any] | None:
    """The pod with its PodScheduled condition set, or None when nothing would change
    (kube-scheduler skips such writes, which would only wake watchers)."""
    old = pod_condition(raw)
    if old is not None and (old.get("status"), old.get("reason", ""), old.get("message", "")) == (
        status,
        reason,
        message,
    ):
        return None
    cond: dict[str, Any] = {"type": POD_SCHEDULED, "status": status, "lastProbeTime": None}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    keep_time = old is not None and old.get("status") == status
    cond["lastTransitionTime"] = (
        old.get("lastTransitionTime") if keep_time and old else now_rfc3339()
    )
    new, st = _with_status(raw)
    others = [c for c in st.get("conditions") or [] if c is not old]
    st["conditions"] = [*others, cond]
    if status == "False" and not st.get("phase"):
        st["phase"] = "Pending"
    return new


def bound_pod(raw: dict[str, Any], node: str) -> dict[str, Any]:
    new = with_condition(raw, "True") or dict(raw)
    new["spec"] = {**(new.get("spec") or {}), "nodeName": node}
    return new


def unschedulable_pod(raw: dict[str, Any], message: str, reason: str = REASON_UNSCHEDULABLE):
    """`with_condition` for a failed cycle (None when already reported identically)."""
    return with_condition(raw, "False", reason, message)


def with_nominated_node(raw: dict[str, Any], node: str) -> dict[str, Any] | None:
    """The pod with status.nominatedNodeName set to `node` ("" removes it), or None when
    it already is."""
    status = raw.get("status") or {}
    if (status.get("nominatedNodeName") or "") == node:
        return None
    new, st = _with_status(raw)
    if node:
        st["nominatedNodeName"] = node
    else:
        st.pop("nominatedNodeName", None)
    return new


def preempted_victim(raw: dict[str, Any], preemptor_scheduler: str) -> dict[str, Any]:
    """The victim as deleted: with kube's DisruptionTarget condition saying why."""
    new, st = _with_status(raw)
    cond = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": REASON_PREEMPTION_BY_SCHEDULER,
        "message": f"{preemptor_scheduler}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": now_rfc3339(),
    }
    conds = st.get("conditions") or []
    others = [c for c in conds if not (isinstance(c, dict) and c.get("type") == DISRUPTION_TARGET)]
    st["conditions"] = [*others, cond]
    return new


def preempted_message(preemptor: dict[str, Any], node: str) -> str:
    uid = (preemptor.get("metadata") or {}).get("uid", "")
    return f"Preempted by pod {uid} on node {node}"


def scheduler_name(raw: dict[str, Any]) -> str:
    return (raw.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER_NAME


def make_event(
    raw: dict[str, Any], reason: str, message: str, *, warning: bool, action: str
) -> dict[str, Any]:
    """A core/v1 Event about the pod, as kube-scheduler's event recorder writes it."""
    meta = raw.get("metadata") or {}
    namespace, name = meta.get("namespace", "default"), meta.get("name", "")
    now = dt.datetime.now(dt.UTC)
    suffix = hashlib.blake2s(f"{name}{reason}{now.timestamp()}".encode(), digest_size=8).hexdigest()
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    reporter = scheduler_name(raw)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{suffix}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": namespace,
            "name": name,
            "uid": meta.get("uid", ""),
        },
        "reason": reason,
        "message": message,
        "type": "Warning" if warning else "Normal",
        "action": action,
        "source": {"component": reporter},
        "reportingComponent": reporter,
        "reportingInstance": reporter,
        "firstTimestamp": stamp[:19] + "Z",
        "lastTimestamp": stamp[:19] + "Z",
        "eventTime": stamp,
        "count": 1,
    }


def scheduled_message(raw: dict[str, Any], node: str) -> str:
    return f"Successfully assigned {key_of(raw)} to {node}"
