"""The scheduling queue: kube-scheduler's PriorityQueue as a pure data structure.

Modelled on pkg/scheduler/backend/queue/scheduling_queue.go. No I/O and no
asyncio: time comes from an injected clock, and every change to a pod's record
adds its key to `dirty`, so the queue service can persist exactly what changed.

Sub-queues (QueuedPodInfo.where):
  active         kube's activeQ, PrioritySort order (priority, then timestamp)
  backoff        kube's podBackoffQ, ordered by backoff expiry
  unschedulable  kube's unschedulablePods, waiting for a cluster event
  gated          pods blocked by spec.schedulingGates (kube's PreEnqueue gate)
  inflight       popped by a worker; lease-protected in case the worker dies
  binding        assumed and handed to a binder; lease-protected likewise

active, backoff, unschedulable and the leases (inflight + binding) are heaps
with lazy deletion: every placement of a pod takes a fresh token, and a heap
entry is live only while its token is the pod's current one. Stale entries are
skipped when they reach the top and compacted away when they outnumber the
live ones, so every operation is O(log n) amortised.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
INFLIGHT = "inflight"
BINDING = "binding"
WHERES = (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED, INFLIGHT, BINDING)

_LEASE = "lease"  # the heap shared by inflight and binding pods, ordered by lease deadline
_HEAP_OF = {
    ACTIVE: ACTIVE,
    BACKOFF: BACKOFF,
    UNSCHEDULABLE: UNSCHEDULABLE,
    INFLIGHT: _LEASE,
    BINDING: _LEASE,
}
_WHERES_IN_HEAP = {
    heap: tuple(w for w, h in _HEAP_OF.items() if h == heap) for heap in set(_HEAP_OF.values())
}
_COMPACT_SLACK = 64

# Metadata that changes without the pod changing for scheduling; kube's isPodUpdated
# blanks these (and the whole status) before comparing old and new pod.
_IGNORED_METADATA = frozenset({"resourceVersion", "generation", "managedFields", "finalizers"})

Clock = Callable[[], float]
_Entry = tuple[tuple[float, ...], int, str]  # (sort key, token, pod key)


@dataclass
class QueuedPodInfo:
    key: str  # "namespace/name"
    uid: str
    raw: dict[str, Any]  # the pod object (Kubernetes JSON shape: metadata/spec/status)
    seq: int  # stream sequence of this pod version (its resourceVersion)
    priority: int  # spec.priority (0 if missing)
    timestamp: float  # when it (re-)entered the queue; PrioritySort tie-breaker
    initial_attempt_timestamp: float | None = None  # first pop
    attempts: int = 0
    where: str = ACTIVE
    backoff_expiry: float = 0.0
    cycle: int = 0  # scheduling cycle of the last pop
    lease_deadline: float = 0.0  # for inflight and binding
    unschedulable_plugins: list[str] = field(default_factory=list)
    message: str = ""  # last failure message
    # Sequence of the object held in `raw`. `seq` runs ahead of it after failed(seq=...):
    # ksched wrote the status but the watcher has not delivered that version yet.
    # -1 means "same as seq".
    raw_seq: int = -1

    def __post_init__(self) -> None:
        if self.raw_seq < 0:
            self.raw_seq = self.seq

    def to_record(self) -> dict[str, Any]:
        """All fields as a msgpack-able dict (raw is shared, not copied)."""
        rec = {name: getattr(self, name) for name in _RECORD_FIELDS}
        rec["unschedulable_plugins"] = list(self.unschedulable_plugins)
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> QueuedPodInfo:
        """Inverse of to_record; unknown keys are ignored, missing ones take defaults."""
        qpi = cls(**{k: v for k, v in rec.items() if k in _RECORD_FIELDS})
        qpi.unschedulable_plugins = list(qpi.unschedulable_plugins)
        return qpi


_RECORD_FIELDS = tuple(f.name for f in fields(QueuedPodInfo))


def pod_priority(raw: dict[str, Any]) -> int:
    return int((raw.get("spec") or {}).get("priority") or 0)


def is_gated(raw: dict[str, Any]) -> bool:
    """kube's SchedulingGates PreEnqueue plugin: any gate keeps the pod out of activeQ."""
    return bool((raw.get("spec") or {}).get("schedulingGates"))


def scheduling_view(raw: dict[str, Any]) -> dict[str, Any]:
    """The pod as kube's isPodUpdated compares it: no status, no bookkeeping metadata."""
    view = {k: v for k, v in raw.items() if k != "status"}
    meta = view.get("metadata")
    if isinstance(meta, dict):
        view["metadata"] = {k: v for k, v in meta.items() if k not in _IGNORED_METADATA}
    return view


def is_pod_updated(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return scheduling_view(old) != scheduling_view(new)


class SchedulingQueue:
    """kube's PriorityQueue without I/O; see the module docstring."""

    def __init__(
        self,
        clock: Clock,
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        inflight_lease: float = 15.0,
        binding_lease: float = 120.0,
        max_in_unschedulable: float = 300.0,
    ) -> None:
        self._clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.inflight_lease = inflight_lease
        self.binding_lease = binding_lease
        self.max_in_unschedulable = max_in_unschedulable
        self.scheduling_cycle = 0
        # kube's moveRequestCycle: the scheduling cycle at the last move request.
        self.move_request_cycle = -1
        self.dirty: set[str] = set()
        self._reset()

    def _reset(self) -> None:
        self._pods: dict[str, QueuedPodInfo] = {}
        self._tokens: dict[str, int] = {}  # key -> token of its one live placement
        self._next_token = itertools.count(1)
        self._counts: dict[str, int] = dict.fromkeys(WHERES, 0)
        self._heaps: dict[str, list[_Entry]] = {h: [] for h in _WHERES_IN_HEAP}

    # --- inspection -------------------------------------------------------------

    def get(self, key: str) -> QueuedPodInfo | None:
        return self._pods.get(key)

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def active_len(self) -> int:
        return self._counts[ACTIVE]

    def __len__(self) -> int:
        return len(self._pods)

    def pending(self) -> list[tuple[str, str]]:
        return [(key, qpi.where) for key, qpi in self._pods.items()]

    def take_dirty(self) -> set[str]:
        """Keys whose record changed or was removed since the last call."""
        dirty, self.dirty = self.dirty, set()
        return dirty

    def backoff_duration(self, attempts: int) -> float:
        """kube's calculateBackoffDuration: initial * 2^(attempts-1), capped at max."""
        exponent = min(max(attempts, 1) - 1, 63)  # the cap is reached long before 2^63
        return min(self.initial_backoff * 2.0**exponent, self.max_backoff)

    # --- pod events (kube's Add / Update / Delete) ------------------------------

    def add(self, key: str, uid: str, raw: dict[str, Any], seq: int) -> None:
        """A pending pod appeared; a pod we already hold is an update."""
        if key in self._pods:
            self.update(key, uid, raw, seq)
        else:
            self._add_new(key, uid, raw, seq)

    def update(self, key: str, uid: str, raw: dict[str, Any], seq: int) -> None:
        qpi = self._pods.get(key)
        if qpi is None:
            self._add_new(key, uid, raw, seq)
            return
        if seq <= qpi.raw_seq:
            return  # stale or replayed event
        if uid and qpi.uid and uid != qpi.uid:
            # Same name, different pod object (deleted and recreated): start afresh.
            self._remove(key)
            self._add_new(key, uid, raw, seq)
            return
        relevant = is_pod_updated(qpi.raw, raw)
        old_priority = qpi.priority
        qpi.uid = uid or qpi.uid
        qpi.raw, qpi.raw_seq, qpi.seq = raw, seq, max(seq, qpi.seq)
        qpi.priority = pod_priority(raw)
        self.dirty.add(key)
        if relevant:
            self._on_relevant_update(qpi, priority_changed=qpi.priority != old_priority)

    def _on_relevant_update(self, qpi: QueuedPodInfo, *, priority_changed: bool) -> None:
        # Only an isPodUpdated change may move a pod: ksched's own status writes after
        # a failure must not retry it at once (fail -> status write -> update -> retry).
        ungated = qpi.where == GATED and not is_gated(qpi.raw)
        if ungated or qpi.where == UNSCHEDULABLE:
            self._requeue(qpi, self._clock())
        elif qpi.where == ACTIVE and priority_changed:
            self._place(qpi, ACTIVE)  # re-push: its heap position depends on priority
        # backoff stays put; inflight/binding keep their place, and their next
        # attempt uses the replaced object.

    def delete(self, key: str) -> None:
        self._remove(key)

    def _add_new(self, key: str, uid: str, raw: dict[str, Any], seq: int) -> None:
        qpi = QueuedPodInfo(
            key=key,
            uid=uid,
            raw=raw,
            seq=seq,
            priority=pod_priority(raw),
            timestamp=self._clock(),
        )
        self._pods[key] = qpi
        self._place(qpi, GATED if is_gated(raw) else ACTIVE)

    # --- scheduling cycle -------------------------------------------------------

    def pop(self, n: int) -> list[QueuedPodInfo]:
        """Up to n pods from activeQ in PrioritySort order, now inflight.

        Returns the queue's own objects, not copies: callers must only read them.
        """
        now = self._clock()
        popped: list[QueuedPodInfo] = []
        while len(popped) < n and (qpi := self._peek(ACTIVE)) is not None:
            self.scheduling_cycle += 1
            qpi.cycle = self.scheduling_cycle
            qpi.attempts += 1
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = now
            qpi.lease_deadline = now + self.inflight_lease
            self._place(qpi, INFLIGHT)
            popped.append(qpi)
        return popped

    def assumed(self, key: str, cycle: int) -> bool:
        """The pod popped in `cycle` was assumed and handed to a binder."""
        qpi = self._pods.get(key)
        if qpi is None or qpi.where != INFLIGHT or qpi.cycle != cycle:
            return False  # stale report: deleted, re-popped or taken back by lease expiry
        qpi.lease_deadline = self._clock() + self.binding_lease
        self._place(qpi, BINDING)
        return True

    def failed(
        self,
        key: str,
        cycle: int,
        *,
        unschedulable: bool,
        message: str,
        plugins: list[str],
        seq: int | None = None,
    ) -> bool:
        """The scheduling or binding attempt of `cycle` failed: kube's
        AddUnschedulableIfNotPresent."""
        qpi = self._pods.get(key)
        if qpi is None or qpi.where not in (INFLIGHT, BINDING) or qpi.cycle != cycle:
            return False
        now = self._clock()
        if seq is not None and seq > qpi.seq:
            qpi.seq = seq  # ksched wrote the pod's status; the next attempt uses that version
        qpi.message = message
        qpi.unschedulable_plugins = list(plugins)
        qpi.timestamp = now
        qpi.lease_deadline = 0.0
        qpi.backoff_expiry = now + self.backoff_duration(qpi.attempts)
        if unschedulable and self.move_request_cycle < cycle:
            self._place(qpi, UNSCHEDULABLE)
        else:
            # An Error, or a move request arrived during/after this pod's cycle so the
            # event that makes it schedulable may already have passed: retry after backoff.
            self._requeue(qpi, now)
        return True

    # --- moves and flushes ------------------------------------------------------

    def move_all_to_active_or_backoff(self, event: str) -> int:
        """kube's MoveAllToActiveOrBackoffQueue (no queueing hints yet)."""
        now = self._clock()
        moved = 0
        for qpi in self._live(UNSCHEDULABLE):
            if self._pod_matches_event(qpi, event):
                self._requeue(qpi, now)
                moved += 1
        self.move_request_cycle = self.scheduling_cycle
        self._maybe_compact(UNSCHEDULABLE)
        return moved

    def _pod_matches_event(self, qpi: QueuedPodInfo, event: str) -> bool:
        """Seam for kube's QueueingHints (isPodWorthRequeuing): every event moves every pod
        for now; later, match `event` against the plugins in qpi.unschedulable_plugins."""
        return True

    def flush_backoff_completed(self) -> int:
        """kube's flushBackoffQCompleted: pods whose backoff expired go to activeQ."""
        now = self._clock()
        moved = 0
        while (qpi := self._peek(BACKOFF)) is not None and qpi.backoff_expiry <= now:
            self._place(qpi, ACTIVE)
            moved += 1
        return moved

    def flush_unschedulable_leftover(self) -> int:
        """kube's flushUnschedulablePodsLeftover: pods unschedulable for longer than
        max_in_unschedulable get another try even without a cluster event."""
        now = self._clock()
        moved = 0
        while (qpi := self._peek(UNSCHEDULABLE)) is not None and (
            now - qpi.timestamp > self.max_in_unschedulable
        ):
            self._requeue(qpi, now)
            moved += 1
        return moved

    def expire_leases(self) -> list[QueuedPodInfo]:
        """Inflight and binding pods whose worker or binder vanished go back to activeQ."""
        now = self._clock()
        expired: list[QueuedPodInfo] = []
        while (qpi := self._peek(_LEASE)) is not None and qpi.lease_deadline < now:
            qpi.timestamp = now
            qpi.lease_deadline = 0.0
            self._place(qpi, ACTIVE)
            expired.append(qpi)
        return expired

    # --- persistence ------------------------------------------------------------

    def restore(self, records: Iterable[dict[str, Any]]) -> None:
        """Rebuild from persisted records, replacing the current content.

        Inflight pods go back to activeQ (their original timestamp keeps their turn): the
        worker's report, if it ever comes, is stale. Binding pods keep their lease, since
        the binder may still report; every other pod keeps its place.
        """
        self._reset()
        for rec in records:
            qpi = QueuedPodInfo.from_record(rec)
            where = qpi.where if qpi.where in WHERES else ACTIVE
            if where == INFLIGHT:
                where, qpi.lease_deadline = ACTIVE, 0.0
            self._remove(qpi.key)
            self._pods[qpi.key] = qpi
            self._place(qpi, where)

    def restore_meta(self, scheduling_cycle: int, move_request_cycle: int) -> None:
        self.scheduling_cycle = scheduling_cycle
        self.move_request_cycle = move_request_cycle

    # --- placement and lazy-deletion heaps --------------------------------------

    def _requeue(self, qpi: QueuedPodInfo, now: float) -> None:
        """kube's requeue: backoffQ while the pod is still backing off, else activeQ."""
        self._place(qpi, BACKOFF if now < qpi.backoff_expiry else ACTIVE)

    def _place(self, qpi: QueuedPodInfo, where: str) -> None:
        """Put a pod held in _pods into `where`; any previous heap entry goes stale."""
        if qpi.key in self._tokens:
            self._counts[qpi.where] -= 1
        qpi.where = where
        self._counts[where] += 1
        token = next(self._next_token)
        self._tokens[qpi.key] = token
        heap_name = _HEAP_OF.get(where)
        if heap_name is not None:
            heapq.heappush(self._heaps[heap_name], (self._sort_key(qpi), token, qpi.key))
            self._maybe_compact(heap_name)
        self.dirty.add(qpi.key)

    @staticmethod
    def _sort_key(qpi: QueuedPodInfo) -> tuple[float, ...]:
        if qpi.where == ACTIVE:
            return (-qpi.priority, qpi.timestamp)  # PrioritySort's Less
        if qpi.where == BACKOFF:
            return (qpi.backoff_expiry,)
        if qpi.where == UNSCHEDULABLE:
            return (qpi.timestamp,)
        return (qpi.lease_deadline,)

    def _remove(self, key: str) -> None:
        qpi = self._pods.pop(key, None)
        if qpi is None:
            return
        del self._tokens[key]  # its heap entry, if any, is now stale
        self._counts[qpi.where] -= 1
        self.dirty.add(key)
        heap_name = _HEAP_OF.get(qpi.where)
        if heap_name is not None:
            self._maybe_compact(heap_name)  # mass deletes must not pin memory

    def _is_live(self, entry: _Entry) -> bool:
        return self._tokens.get(entry[2]) == entry[1]

    def _peek(self, heap_name: str) -> QueuedPodInfo | None:
        """The pod at the top of a heap, dropping stale entries on the way."""
        heap = self._heaps[heap_name]
        while heap:
            if self._is_live(heap[0]):
                return self._pods[heap[0][2]]
            heapq.heappop(heap)
        return None

    def _live(self, heap_name: str) -> list[QueuedPodInfo]:
        return [self._pods[e[2]] for e in self._heaps[heap_name] if self._is_live(e)]

    def _maybe_compact(self, heap_name: str) -> None:
        """Drop stale entries once they outnumber the live ones (amortised O(1))."""
        heap = self._heaps[heap_name]
        live = sum(self._counts[w] for w in _WHERES_IN_HEAP[heap_name])
        if len(heap) > 2 * live + _COMPACT_SLACK:
            heap[:] = [e for e in heap if self._is_live(e)]
            heapq.heapify(heap)
