"""Where each queued pod is, and the heaps that order the sub-queues.

active, backoff, unschedulable and the leases (inflight + binding) are heaps with lazy
deletion: every placement of a pod takes a fresh token, and a heap entry is live only
while its token is the pod's current one. Stale entries are skipped when they reach
the top and compacted away when they outnumber the live ones, so every operation is
O(log n) amortised. Unschedulable pods are also indexed by the plugins that rejected
them, so that a cluster event looks only at the pods an interested plugin rejected.

scheduler_unschedulable_pods{plugin,profile} is kept here too, as kube's queue keeps it:
a pod counts for each plugin that rejected it in its last attempt (or that gates it)
while it waits in a sub-queue, and stops counting when popped or gone.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Iterable
from typing import Any

from services.queue.podinfo import (
    ACTIVE,
    BACKOFF,
    BINDING,
    GATED,
    INFLIGHT,
    UNSCHEDULABLE,
    WHERES,
    QueuedPodInfo,
    SortKey,
)
from shared.api.podstatus import scheduler_name

LEASE = "lease"  # the heap shared by inflight and binding pods, ordered by lease deadline
_HEAP_OF = {
    ACTIVE: ACTIVE,
    BACKOFF: BACKOFF,
    UNSCHEDULABLE: UNSCHEDULABLE,
    INFLIGHT: LEASE,
    BINDING: LEASE,
}
_WHERES_IN_HEAP = {
    heap: tuple(w for w, h in _HEAP_OF.items() if h == heap) for heap in set(_HEAP_OF.values())
}
_COMPACT_SLACK = 64
# The queue label of scheduler_queue_incoming_pods_total: kube counts gated pods as
# entering unschedulablePods, where it keeps them.
_INCOMING_QUEUE = {
    ACTIVE: "active",
    BACKOFF: "backoff",
    UNSCHEDULABLE: "unschedulable",
    GATED: "unschedulable",
}
_Entry = tuple[tuple[Any, ...], int, str]  # (sort key, token, pod key)
# Where a pod waits for its next attempt: kube counts its rejecting plugins until the pop.
_WAITING = frozenset({ACTIVE, BACKOFF, UNSCHEDULABLE, GATED})


class Placements:
    """The sub-queue of each pod in `pods` (the queue's own dict), its heaps and counts."""

    def __init__(self, pods: dict[str, QueuedPodInfo], active_key: SortKey) -> None:
        self._pods = pods
        self._active_key = active_key
        self._next_token = itertools.count(1)
        # (queue, event) -> pods that entered that queue on that event, until taken
        self.incoming: Counter[tuple[str, str]] = Counter()
        # (plugin, profile) -> waiting pods it rejected; kept at 0 once seen, for the gauge
        self.unschedulable_pods: Counter[tuple[str, str]] = Counter()
        self.clear()

    def clear(self) -> None:
        """Forget every placement (the queue emptied `pods`); counts not yet taken stay."""
        self._tokens: dict[str, int] = {}  # key -> token of its one live placement
        self.counts: dict[str, int] = dict.fromkeys(WHERES, 0)
        self._heaps: dict[str, list[_Entry]] = {h: [] for h in _WHERES_IN_HEAP}
        # unschedulable pods by rejecting plugin ("" for none)
        self.rejected_by: dict[str, dict[str, None]] = {}
        # key -> what it counts for in unschedulable_pods: (its plugins, its profile)
        self._counted: dict[str, tuple[tuple[str, ...], str]] = {}
        for label in self.unschedulable_pods:
            self.unschedulable_pods[label] = 0

    def place(self, qpi: QueuedPodInfo, where: str, event: str = "") -> None:
        """Put a pod into `where`; any previous heap entry goes stale. `event` names
        why, for scheduler_queue_incoming_pods_total."""
        if event and where in _INCOMING_QUEUE:
            self.incoming[(_INCOMING_QUEUE[where], event)] += 1
        if qpi.key in self._tokens:
            self.counts[qpi.where] -= 1
            if qpi.where == UNSCHEDULABLE:
                self._unindex(qpi)
        qpi.where = where
        self.counts[where] += 1
        token = next(self._next_token)
        self._tokens[qpi.key] = token
        heap_name = _HEAP_OF.get(where)
        if heap_name is not None:
            heapq.heappush(self._heaps[heap_name], (self.sort_key(qpi), token, qpi.key))
            self._maybe_compact(heap_name)
        if where == UNSCHEDULABLE:
            for plugin in qpi.unschedulable_plugins or [""]:
                self.rejected_by.setdefault(plugin, {})[qpi.key] = None
        self.recount(qpi)

    def remove(self, qpi: QueuedPodInfo) -> None:
        """The pod left the queue (already popped from `pods`)."""
        del self._tokens[qpi.key]  # its heap entry, if any, is now stale
        self._uncount(qpi.key)
        self.counts[qpi.where] -= 1
        if qpi.where == UNSCHEDULABLE:
            self._unindex(qpi)
        heap_name = _HEAP_OF.get(qpi.where)
        if heap_name is not None:
            self._maybe_compact(heap_name)  # mass deletes must not pin memory

    def peek(self, heap_name: str) -> QueuedPodInfo | None:
        """The pod at the top of a heap, dropping stale entries on the way."""
        heap = self._heaps[heap_name]
        while heap:
            if self._is_live(heap[0]):
                return self._pods[heap[0][2]]
            heapq.heappop(heap)
        return None

    def live(self, heap_name: str) -> list[QueuedPodInfo]:
        return [self._pods[e[2]] for e in self._heaps[heap_name] if self._is_live(e)]

    def take_incoming(self) -> Counter[tuple[str, str]]:
        """scheduler_queue_incoming_pods_total increments since the last call."""
        incoming, self.incoming = self.incoming, Counter()
        return incoming

    def pending(self, wheres: Iterable[str]) -> list[QueuedPodInfo]:
        """kube's PendingPods: sub-queue by sub-queue, each in its own order."""
        by_where: dict[str, list[QueuedPodInfo]] = {w: [] for w in wheres}
        for qpi in self._pods.values():
            if qpi.where in by_where:
                by_where[qpi.where].append(qpi)
        return [
            qpi
            for pods in by_where.values()
            for qpi in sorted(pods, key=lambda p: (self.sort_key(p), p.key))
        ]

    def rejected_by_any(self, plugins: Iterable[str] | None) -> list[QueuedPodInfo]:
        """Unschedulable pods some of `plugins` rejected, or no plugin did (None: all)."""
        index = self.rejected_by
        groups = (
            index.values() if plugins is None else (index[p] for p in ("", *plugins) if p in index)
        )
        seen: dict[str, None] = {}
        for keys in groups:
            seen.update(keys)
        return [self._pods[k] for k in seen]

    def recount(self, qpi: QueuedPodInfo) -> None:
        """Count the pod in unschedulable_pods for its current plugins if it waits (call
        again when its plugins change in place)."""
        self._uncount(qpi.key)
        if qpi.where in _WAITING and qpi.unschedulable_plugins:
            entry = (tuple(qpi.unschedulable_plugins), scheduler_name(qpi.raw))
            self._counted[qpi.key] = entry
            for plugin in entry[0]:
                self.unschedulable_pods[(plugin, entry[1])] += 1

    def _uncount(self, key: str) -> None:
        counted = self._counted.pop(key, None)
        if counted is not None:
            for plugin in counted[0]:
                self.unschedulable_pods[(plugin, counted[1])] -= 1

    def _unindex(self, qpi: QueuedPodInfo) -> None:
        for plugin in qpi.unschedulable_plugins or [""]:
            keys = self.rejected_by.get(plugin)
            if keys is not None:
                keys.pop(qpi.key, None)
                if not keys:
                    del self.rejected_by[plugin]

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[Any, ...]:
        """A pod's order in its sub-queue's heap."""
        if qpi.where == ACTIVE:
            return self._active_key(qpi)
        if qpi.where == BACKOFF:
            return (qpi.backoff_expiry,)
        if qpi.where == UNSCHEDULABLE:
            return (qpi.timestamp,)
        return (qpi.lease_deadline,)

    def _is_live(self, entry: _Entry) -> bool:
        return self._tokens.get(entry[2]) == entry[1]

    def _maybe_compact(self, heap_name: str) -> None:
        """Drop stale entries once they outnumber the live ones (amortised O(1))."""
        heap = self._heaps[heap_name]
        live = sum(map(self.counts.__getitem__, _WHERES_IN_HEAP[heap_name]))  # every place
        if len(heap) > 2 * live + _COMPACT_SLACK:
            heap[:] = [e for e in heap if self._is_live(e)]
            heapq.heapify(heap)
