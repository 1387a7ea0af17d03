"""ksched's writes to public subjects: conditional pod writes and Event objects."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import nats.errors
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import APIError, NoStreamResponseError, ServiceUnavailableError

from shared.api.models import namespace_and_name
from shared.subjects import (
    EXPECTED_LAST_SUBJECT_SEQ,
    MSG_ID_HEADER,
    OWN_WRITE_HEADER,
    event_subject,
    pod_subject,
)
from shared.wire import dump_json

log = logging.getLogger("ksched.publish")

# JetStream's error code for a failed Nats-Expected-Last-Subject-Sequence check.
WRONG_LAST_SEQUENCE = 10071
UNSURE_WRITE_PAUSE = 0.1  # before an unsure write is sent again; doubles up to 1 s
# What a publish raises when JetStream did not take it for sure: unanswered (the answer
# lost, or the request), no stream leader to answer (503), JetStream unavailable (503).
UNSURE = (nats.errors.TimeoutError, NoStreamResponseError, ServiceUnavailableError)


def own_write_headers(expected_seq: int) -> dict[str, str]:
    """What every write ksched makes of an object it carries sends: conditional on the
    subject still being at `expected_seq` (Kubernetes' resourceVersion precondition),
    and marked as ksched's own (the watcher's door lets it grow past a publisher's
    limit, services/watcher/outbound.py OWN_WRITE_GROWTH)."""
    return {EXPECTED_LAST_SUBJECT_SEQ: str(expected_seq), OWN_WRITE_HEADER: "1"}


class Conflict(Exception):
    """The pod changed (or was deleted) since the version ksched acted on."""


async def write_pod(
    js: JetStreamContext,
    raw: dict[str, Any],
    expected_seq: int,
    *,
    patience: float = 0.0,
    headers: dict[str, str] | None = None,
) -> int:
    """Publish `MODIFIED raw` on the pod's subject if the subject is still at
    `expected_seq` (Kubernetes' resourceVersion precondition), with `headers` besides;
    returns the new seq.

    For `patience` seconds, a write JetStream did not take for sure is sent again as it
    was: no stream leader answered (one lost with its server is replaced within 4-9 s),
    or the answer was lost. The precondition makes a second copy impossible: a first
    one that did land comes back as a Conflict, which the caller checks."""
    namespace, name = namespace_and_name(raw)
    subject = pod_subject(namespace, name)
    body = dump_json({"type": "MODIFIED", "object": raw})
    headers = {**(headers or {}), **own_write_headers(expected_seq)}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    delay = UNSURE_WRITE_PAUSE
    while True:
        try:
            ack = await js.publish(subject, body, headers=headers)
            return int(ack.seq)
        except Exception as err:
            if isinstance(err, APIError) and err.err_code == WRONG_LAST_SEQUENCE:
                changed = f"{namespace}/{name} changed since sequence {expected_seq}"
                raise Conflict(changed) from None
            if not isinstance(err, UNSURE) or loop.time() >= deadline:
                raise
        log.debug("write of %s/%s unsure; sending it again", namespace, name)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


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
