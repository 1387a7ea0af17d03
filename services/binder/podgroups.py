"""The binder reports a v1alpha2 PodGroup's PodGroupScheduled condition (KEP-5832: the
scheduler writes the PodGroup's status).

- True, reason Scheduled, once a pod of the group is bound: a gang's pods bind only
  after Permit let minCount of them through together, a `basic` group's one by one.
- False, reason Unschedulable, with the pod's FailedScheduling message, when a member
  is rejected at Permit (GangScheduling's timeout: the gang did not come together) while
  the group is not scheduled yet.

Only for pods with spec.schedulingGroup: nothing changes on the hot path of other pods.
The write is a MODIFIED event on the PodGroup's subject, conditional on the version
read (Nats-Expected-Last-Subject-Sequence); on a conflict (another binder wrote it,
or the user changed the object) it reads again and retries, and a condition that is
already as wanted is not written again. The watcher sees the write like any update:
only status changes, which the immutable fields allow.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from nats.js import JetStreamContext
from nats.js.errors import APIError, NotFoundError

from shared.api.events import BadEvent, decode_cluster_event
from shared.api.podgroup import (
    REASON_SCHEDULED,
    REASON_UNSCHEDULABLE,
    SchedulingPodGroup,
    scheduled_condition,
    with_scheduled_condition,
)
from shared.api.podstatus import now_rfc3339
from shared.api.workload import scheduling_group_of
from shared.runtime.publish import WRONG_LAST_SEQUENCE, own_write_headers
from shared.subjects import (
    CLUSTER_STREAM,
    workload_pod_group_subject,
)
from shared.wire import dump_json

log = logging.getLogger("ksched.binder")

ATTEMPTS = 3  # conflicting writes in a row before giving up (the next outcome tries again)

# (namespace, PodGroup name) -> (status, reason, message)
Wanted = dict[tuple[str, str], tuple[str, str, str]]


def wanted_conditions(outcomes: Iterable[tuple[dict[str, Any], bool, str, str]]) -> Wanted:
    """From binding outcomes (raw pod, bound, message, plugin that rejected it): the
    condition each PodGroup should get; a bound member wins over a rejected one."""
    wanted: Wanted = {}
    for pod, ok, message, plugin in outcomes:
        group = scheduling_group_of(pod)
        if not group:
            continue
        key = ((pod.get("metadata") or {}).get("namespace") or "", group)
        if ok:
            wanted[key] = ("True", REASON_SCHEDULED, "")
        elif plugin and key not in wanted:
            wanted[key] = ("False", REASON_UNSCHEDULABLE, message)
    return wanted


async def report(js: JetStreamContext, wanted: Wanted) -> None:
    for (namespace, name), condition in wanted.items():
        try:
            await _write(js, workload_pod_group_subject(namespace, name), *condition)
        except Exception as err:  # a status is informative: never stop a binding for it
            log.warning("PodGroup %s/%s status not written: %s", namespace, name, err)


async def _write(
    js: JetStreamContext, subject: str, status: str, reason: str, message: str
) -> None:
    for _ in range(ATTEMPTS):
        try:
            last = await js.get_last_msg(CLUSTER_STREAM, subject)
        except NotFoundError:
            return  # no such PodGroup (any more)
        try:
            ev = decode_cluster_event(subject, last.data or b"", last.headers, last.seq or 0)
        except BadEvent:
            return
        if ev.type == "DELETED" or not isinstance(ev.obj, SchedulingPodGroup):
            return
        old = scheduled_condition(ev.raw)
        if status == "False" and old is not None and old.get("status") == "True":
            return  # a late rejection does not undo a gang that came together
        new = with_scheduled_condition(ev.raw, status, reason, message, now_rfc3339())
        if new is None:
            return
        body = dump_json({"type": "MODIFIED", "object": new})
        try:
            await js.publish(subject, body, headers=own_write_headers(last.seq or 0))
            return
        except APIError as err:
            if err.err_code != WRONG_LAST_SEQUENCE:
                raise
    log.info("PodGroup status on %s: gave up after %d conflicts", subject, ATTEMPTS)
