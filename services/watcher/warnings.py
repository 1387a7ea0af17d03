"""Warnings about fields the Kubernetes API schema does not know (docs/api.md,
Validation).

An event published straight on NATS is like a request from a client that did not ask
for strict validation: the API server takes the object and warns about each unknown
field (`Warning: unknown field "spec.nodeSelecter"`); so does the watcher, once per
event, with every path. ksched's own writes to a pod (its binding, its status) publish
the whole object again, unknown fields and all: an object's unknown fields are warned
about when they first appear on it (same uid), not again on each of those echoes.
"""

from __future__ import annotations

from shared.api.events import ClusterEvent
from shared.api.schema import unknown_field_error

MAX_REMEMBERED = 16384  # objects with unknown fields whose warning is remembered


class FieldWarnings:
    """Which objects were warned about, and for which fields (by subject)."""

    def __init__(self) -> None:
        self._warned: dict[str, tuple[str, tuple[str, ...]]] = {}

    def to_warn(self, ev: ClusterEvent) -> str | None:
        """The warning for an accepted event, or None: no unknown field, or the same
        ones as the object's last warning."""
        if ev.type == "DELETED" or not ev.unknown:
            self._warned.pop(ev.subject, None)
            return None
        mark = (ev.obj.metadata.uid, tuple(ev.unknown))
        if self._warned.get(ev.subject) == mark:
            return None
        if ev.subject not in self._warned and len(self._warned) >= MAX_REMEMBERED:
            del self._warned[next(iter(self._warned))]
        self._warned[ev.subject] = mark
        return ", ".join(unknown_field_error(p) for p in ev.unknown)

    def __len__(self) -> int:
        return len(self._warned)
