"""Failpoints: a test hook that wedges a service on purpose (etcd's gofail is the model).

`KSCHED_FAILPOINTS` names failpoints and what each does when reached, `;`-separated:

    KSCHED_FAILPOINTS="consume.handle=hang"

- `hang`: await forever (cancellable), like a handler that never finishes;
- `block`: block the event loop for good (time.sleep in a loop), like a handler
  that never yields while the process's other threads live;
- `pause:SECONDS`: await that long each time, like a process frozen and thawed.

Failpoints in the code: `consume.handle` (runtime/consume.py, before a consumer's
handler gets a batch); `worker.handed` (services/worker, after a batch's pods went to
the binders and before the worker reports them to the queue). The variable is read once, at
import; unset, a failpoint costs one dict lookup. Not for production: nothing but
tests should set it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

log = logging.getLogger("ksched.failpoints")

ACTIONS = ("hang", "block", "pause:SECONDS")


def parse(spec: str) -> dict[str, str]:
    """`name=action;name=action` -> {name: action}; a bad term raises ValueError."""
    points: dict[str, str] = {}
    for term in spec.split(";"):
        term = term.strip()
        if not term:
            continue
        name, sep, action = (part.strip() for part in term.partition("="))
        if not sep or not name:
            raise ValueError(f"KSCHED_FAILPOINTS: {term!r} is not name=action")
        if action not in ACTIONS[:2] and _pause_seconds(action) is None:
            raise ValueError(
                f"KSCHED_FAILPOINTS: {name}={action!r}: the action is one of {', '.join(ACTIONS)}"
            )
        points[name] = action
    return points


def _pause_seconds(action: str) -> float | None:
    kind, _, seconds = action.partition(":")
    try:
        return float(seconds) if kind == "pause" and float(seconds) >= 0 else None
    except ValueError:
        return None


_ACTIVE = parse(os.environ.get("KSCHED_FAILPOINTS", ""))


async def hit(name: str) -> None:
    """Reached failpoint `name`: do what KSCHED_FAILPOINTS says (usually nothing)."""
    action = _ACTIVE.get(name)
    if action is None:
        return
    log.warning("failpoint %s: %s", name, action)
    pause = _pause_seconds(action)
    if pause is not None:
        await asyncio.sleep(pause)
    elif action == "hang":
        await asyncio.Event().wait()  # never set
    else:
        while True:  # block
            time.sleep(1)
