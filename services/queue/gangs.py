"""The gangs' members as the queue sees them, for GangScheduling's PreEnqueue: the keys
of each gang's existing pods, pending or bound (upstream's workload manager AllPods).

Kept from the events the queue applies: a pending pod (upsert) joins its gang, a
deletion leaves it; a binding keeps it; an assigned pod (AssignedPod Add or Delete
moves, whose objects carry spec.workloadRef) joins or leaves. Pure: the service calls
`observe` before applying an event, so PreEnqueue counts the pod that event brings.

Not kept in Redis: a queue that takes over lists the log and observes what it routes
(services/queue/service.py `_list_gang_members`), bound pods included.
"""

from __future__ import annotations

from typing import Any

from shared.api.workload import gang_of
from shared.framework.events import ADD, ASSIGNED_POD, DELETE
from shared.messages import QueueEvent

Members = dict[str, set[str]]  # gang key -> pod keys


def observe(members: Members, ev: QueueEvent) -> None:
    op = ev.get("op")
    if op == "upsert":
        _set(members, gang_of(ev["pod"]), ev["key"], True)
    elif op == "delete":
        for gang in [g for g, keys in members.items() if ev["key"] in keys]:
            _set(members, gang, ev["key"], False)
    elif op == "move" and ev.get("resource") == ASSIGNED_POD:
        raw = ev.get("new") if ev.get("action") == ADD else ev.get("old")
        if raw and ev.get("action") in (ADD, DELETE):
            gang = gang_of(raw)
            if gang:  # every bound pod comes this way: most belong to no gang
                _set(members, gang, _key(raw), ev.get("action") == ADD)


def _set(members: Members, gang: str, key: str, present: bool) -> None:
    if not gang:
        return
    if present:
        members.setdefault(gang, set()).add(key)
        return
    keys = members.get(gang)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del members[gang]


def _key(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
