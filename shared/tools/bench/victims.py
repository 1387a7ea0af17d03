"""Who preempted whom, read from kube's `Preempted` Events.

A bench's victims per bound preemptor must count only the victims of preemptors that
bound: a run ends at its last measured binding, when some preemptors have already
evicted their victims but not bound yet, and counting those victims against the bound
preemptors alone made the figure look worse than it was (PreemptionAsync: 69 victims,
15 of 22 preemptors bound, 4.6 per bound one). Each victim's Event names its
preemptor's uid and the node ("Preempted by pod <uid> on node <node>", as kube-scheduler
writes it).

The average hides a preemptor that preempted twice when another bound without
preempting (it took a room someone else freed): PreemptionBasic with four workers read
3.00 per bound preemptor while 71 of 1000 had evicted pods on two to four nodes. So the
bench also counts bound preemptors whose victims were on more than one node.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from shared.api.names import object_key
from shared.api.podstatus import EVENT_PREEMPTED
from shared.runtime.timeouts import within
from shared.subjects import EVENTS_PREFIX, EVENTS_STREAM

_PREEMPTED_BY = re.compile(r"^Preempted by pod (\S+) on node (\S+)")


class Preemption(NamedTuple):
    """One victim's eviction: by whom (the preemptor's uid), on which node."""

    preemptor: str
    node: str


def preemption_of(event: Mapping[str, Any]) -> tuple[str, Preemption] | None:
    """(victim's key, its preemption) of a Preempted Event; None for any other."""
    if event.get("reason") != EVENT_PREEMPTED:
        return None
    found = _PREEMPTED_BY.match(str(event.get("message", "")))
    involved = event.get("involvedObject") or {}
    if not found or not isinstance(involved, dict):
        return None
    victim = object_key(involved.get("namespace", ""), involved.get("name", ""))
    return victim, Preemption(found.group(1), found.group(2))


def victims_of_bound(
    preemptions: Mapping[str, Preemption], uids: Mapping[str, str], bound: Iterable[str]
) -> int:
    """Victims (keys -> their preemption) whose preemptor is among `bound` (pod keys),
    given each pod key's uid."""
    bound_uids = {uids[k] for k in bound if k in uids}
    return sum(1 for p in preemptions.values() if p.preemptor in bound_uids)


def preempted_again(
    preemptions: Mapping[str, Preemption], uids: Mapping[str, str], bound: Iterable[str]
) -> list[str]:
    """The bound preemptors (keys) whose victims were on more than one node: each
    preempted again after a first preemption's room went to another pod."""
    nodes: dict[str, set[str]] = {}
    for p in preemptions.values():
        nodes.setdefault(p.preemptor, set()).add(p.node)
    return sorted(k for k in bound if len(nodes.get(uids.get(k, ""), ())) > 1)


async def read_preemptions(js: JetStreamContext, timeout: float = 30) -> dict[str, Preemption]:
    """Every victim in the events stream -> its preemption (the first such Event of a
    victim)."""
    last = (await js.stream_info(EVENTS_STREAM)).state.last_seq
    found: dict[str, Preemption] = {}
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
