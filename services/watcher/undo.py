"""Undoing a refused write: the cluster stream must not keep what ksched refused.

The API server validates before it stores; here the user's event is in the cluster
stream before the watcher sees it. Were a refused event left there as its subject's
latest, every reader of the stream would take it for the object (`ksched get` would
list a pod ksched never had, a later conditional write would race it, a new watcher
leader replaying the stream would meet it again instead of the version ksched
holds). So the watcher puts the subject back as it was: the stream keeps the two
latest events per subject, and the one before the refused event is republished (or,
when the refused event was the subject's first, a DELETED tombstone). The republish
is conditional on the refused event still being the latest: a newer write wins and
is judged on its own. An undo is never undone (UNDO_HEADER): were it refused too,
the subject stays as it is.
"""

from __future__ import annotations

import logging

from nats.js import JetStreamContext
from nats.js.errors import APIError, NotFoundError

from shared.api.events import BadEvent, decode_cluster_event, parse_subject
from shared.runtime.publish import WRONG_LAST_SEQUENCE, own_write_headers
from shared.sharding import misplaced_partition
from shared.subjects import (
    CLUSTER_STREAM,
    UNDO_HEADER,
)
from shared.wire import dump_json

log = logging.getLogger("ksched.watcher")


# What a kind's object cannot be without, beyond the names.
_REQUIRED = {"priorityclass": {"value": 0}}


def tombstone(subject: str) -> bytes:
    """DELETED for an object that never was: the names the subject gives, and what the
    kind requires."""
    ref = parse_subject(subject)
    meta = {"name": ref.name, **({"namespace": ref.namespace} if ref.namespace else {})}
    obj = {"metadata": meta, **_REQUIRED.get(ref.kind, {})}
    return dump_json({"type": "DELETED", "object": obj})


async def undo_refused(
    js: JetStreamContext, subject: str, seq: int, headers: dict[str, str] | None
) -> None:
    """Put `subject` back to the event before the refused one at `seq`."""
    if seq <= 0 or UNDO_HEADER in (headers or {}):
        return
    try:
        parse_subject(subject)
    except BadEvent:
        return  # no object's subject (ksched.cluster.widgets.x): nothing to put back
    # an undo puts back a version the door took, which may be one of ksched's own writes
    out_headers = {**own_write_headers(seq), UNDO_HEADER: str(seq)}
    if misplaced_partition(subject):  # no pod lives there: nothing to put back
        await _publish_undo(js, subject, tombstone(subject), out_headers)
        return
    try:
        first = await js.get_msg(CLUSTER_STREAM, seq=1, subject=subject, next=True)
    except NotFoundError:
        return  # the subject is gone (purged): nothing to undo
    if first.seq is None or first.seq >= seq:
        data = tombstone(subject)
    else:
        data = first.data or b""
        try:  # the event before may itself have been refused (a burst of bad writes)
            decode_cluster_event(subject, data, first.headers, first.seq)
        except BadEvent:
            log.warning(
                "cannot undo the refused event %d on %s: no valid event before it", seq, subject
            )
            return
        for key, value in (first.headers or {}).items():
            if key.lower() == "content-type":
                out_headers[key] = value
    await _publish_undo(js, subject, data, out_headers)


async def _publish_undo(
    js: JetStreamContext, subject: str, data: bytes, headers: dict[str, str]
) -> None:
    try:
        await js.publish(subject, data, headers=headers)
    except APIError as err:
        if err.err_code != WRONG_LAST_SEQUENCE:
            raise
        # a newer event arrived meanwhile: it replaces the refused one
