"""ksched's writes to public subjects: conditional pod writes and Event objects."""

from __future__ import annotations

import logging
from typing import Any

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import APIError

from shared.api.models import namespace_and_name
from shared.subjects import EXPECTED_LAST_SUBJECT_SEQ, MSG_ID_HEADER, event_subject, pod_subject
from shared.wire import dump_json

log = logging.getLogger("ksched.publish")

# JetStream's error code for a failed Nats-Expected-Last-Subject-Sequence check.
WRONG_LAST_SEQUENCE = 10071


class Conflict(Exception):
    """The pod changed (or was deleted) since the version ksched acted on."""


async def write_pod(js: JetStreamContext, raw: dict[str, Any], expected_seq: int) -> int:
    """Publish `MODIFIED raw` on the pod's subject if the subject is still at
    `expected_seq` (Kubernetes' resourceVersion precondition); returns the new seq."""
    namespace, name = namespace_and_name(raw)
    body = dump_json({"type": "MODIFIED", "object": raw})
    try:
        ack = await js.publish(
            pod_subject(namespace, name),
            body,
            headers={EXPECTED_LAST_SUBJECT_SEQ: str(expected_seq)},
        )
    except APIError as err:
        if err.err_code == WRONG_LAST_SEQUENCE:
            raise Conflict(f"{namespace}/{name} changed since sequence {expected_seq}") from None
        raise
    return int(ack.seq)


async def publish_event(nc: NATS, event: dict[str, Any], once_as: str = "") -> None:
    """Events are best effort, as in kube-scheduler's recorder: a plain publish into the
    events stream, not waited on for JetStream's ack (one round trip less per pod).
    `once_as` names what the event records (a binding, say): the stream drops a second
    event of that name within its duplicate window, as when a bind is redelivered."""
    involved = event["involvedObject"]
    headers = {MSG_ID_HEADER: once_as} if once_as else None
    subject = event_subject(involved["namespace"], involved["name"])
    try:
        await nc.publish(subject, dump_json(event), headers=headers)
    except Exception as err:
        log.warning(
            "event for %s/%s not published: %s", involved["namespace"], involved["name"], err
        )
