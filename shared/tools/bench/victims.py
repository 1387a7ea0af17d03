"""Who preempted whom, read from kube's `Preempted` Events.

A bench's victims per bound preemptor must count only the victims of preemptors that
bound: a run ends at its last measured binding, when some preemptors have already
evicted their victims but not bound yet, and counting those victims against the bound
preemptors alone made the figure look worse than it was (PreemptionAsync: 69 victims,
15 of 22 preemptors bound, 4.6 per bound one). Each victim's Event names its
preemptor's uid ("Preempted by pod <uid> on node <node>", as kube-scheduler writes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from shared.api.names import object_key
from shared.api.podstatus import EVENT_PREEMPTED
from shared.runtime.timeouts import within
from shared.subjects import EVENTS_PREFIX, EVENTS_STREAM

_PREEMPTED_BY = re.compile(r"^Preempted by pod (\S+) on node ")


def preemption_of(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """(victim's key, preemptor's uid) of a Preempted Event; None for any other."""
    if event.get("reason") != EVENT_PREEMPTED:
        return None
    found = _PREEMPTED_BY.match(str(event.get("message", "")))
    involved = event.get("involvedObject") or {}
    if not found or not isinstance(involved, dict):
        return None
    return object_key(involved.get("namespace", ""), involved.get("name", "")), found.group(1)


def victims_of_bound(
    preemptions: Mapping[str, str], uids: Mapping[str, str], bound: Iterable[str]
) -> int:
    """Victims (keys -> their preemptor's uid) whose preemptor is among `bound` (pod
    keys), given each pod key's uid."""
    bound_uids = {uids[k] for k in bound if k in uids}
    return sum(1 for uid in preemptions.values() if uid in bound_uids)


async def read_preemptions(js: JetStreamContext, timeout: float = 30) -> dict[str, str]:
    """Every victim in the events stream -> the uid of the pod that preempted it (the
    first such Event of a victim)."""
    last = (await js.stream_info(EVENTS_STREAM)).state.last_seq
    found: dict[str, str] = {}
    if not last:
        return found
    done = asyncio.Event()

    async def on_msg(msg: Msg) -> None:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            pair = preemption_of(json.loads(msg.data))
            if pair is not None:
                found.setdefault(*pair)
        if msg.metadata.sequence.stream >= last:
            done.set()

    sub = await js.subscribe(
        f"{EVENTS_PREFIX}.>", cb=on_msg, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
    )
    try:
        await within(done.wait(), timeout)
    finally:
        await sub.unsubscribe()
    return found
