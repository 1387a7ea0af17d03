"""Event objects for `get events` and `describe` (pure).

ksched publishes one Event per occurrence (every retry of a pending pod adds a
FailedScheduling); client-go's event correlator would have folded the repeats into
one Event with a `count`. `series` folds them the same way for display: same
involved object, type, reason, message and source.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from shared.api.names import DEFAULT_NAMESPACE
from shared.tools.cli.tables import age, parse_time

EVENT_COLUMNS = ("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")


def _involved(event: dict[str, Any]) -> dict[str, Any]:
    return event.get("involvedObject") or {}


def _when(event: dict[str, Any], key: str) -> str:
    return str(event.get(key) or event.get("eventTime") or "")


def series(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Repeats folded into one event with `count`, `firstTimestamp` of the first and
    `lastTimestamp` of the last, ordered by when they were last seen."""
    folded: dict[tuple[str, ...], dict[str, Any]] = {}
    for event in events:
        inv = _involved(event)
        key = (
            str(inv.get("namespace") or ""),
            str(inv.get("name") or ""),
            str(inv.get("uid") or ""),
            str(event.get("type") or ""),
            str(event.get("reason") or ""),
            str(event.get("message") or ""),
            str((event.get("source") or {}).get("component") or ""),
        )
        seen = folded.get(key)
        if seen is None:
            folded[key] = {**event, "count": int(event.get("count") or 1)}
            continue
        seen["count"] += int(event.get("count") or 1)
        seen["lastTimestamp"] = max(_when(seen, "lastTimestamp"), _when(event, "lastTimestamp"))
        seen["eventTime"] = max(_when(seen, "eventTime"), _when(event, "eventTime"))
        seen["firstTimestamp"] = min(_when(seen, "firstTimestamp"), _when(event, "firstTimestamp"))
    # lastTimestamp has whole seconds; eventTime (microseconds) orders within one
    return sorted(folded.values(), key=lambda e: (_when(e, "lastTimestamp"), _when(e, "eventTime")))


def about(events: Sequence[dict[str, Any]], pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of this pod, not of an earlier pod of the same name: kubectl describe
    selects by involvedObject.uid too."""
    uid = (pod.get("metadata") or {}).get("uid") or ""
    return [e for e in events if (_involved(e).get("uid") or "") == uid]


def interval(event: dict[str, Any], now: dt.datetime) -> str:
    """describe's Age: `5s`, or `5s (x3 over 40s)` for a repeated event."""
    last = age(_when(event, "lastTimestamp"), now)
    count = int(event.get("count") or 1)
    if count > 1:
        return f"{last} (x{count} over {age(_when(event, 'firstTimestamp'), now)})"
    return last


def event_row(event: dict[str, Any], now: dt.datetime, all_namespaces: bool) -> list[str]:
    inv = _involved(event)
    row = [
        age(_when(event, "lastTimestamp"), now),
        str(event.get("type") or ""),
        str(event.get("reason") or ""),
        f"{str(inv.get('kind') or '').lower()}/{inv.get('name') or ''}",
        str(event.get("message") or ""),
    ]
    namespace = (event.get("metadata") or {}).get("namespace") or DEFAULT_NAMESPACE
    return ([namespace] if all_namespaces else []) + row


def event_columns(all_namespaces: bool) -> list[str]:
    return (["NAMESPACE"] if all_namespaces else []) + list(EVENT_COLUMNS)


def last_seen(event: dict[str, Any]) -> dt.datetime | None:
    return parse_time(_when(event, "lastTimestamp"))
