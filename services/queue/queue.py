"""The scheduling queue: kube-scheduler's PriorityQueue as a pure data structure.

Modelled on pkg/scheduler/backend/queue/scheduling_queue.go with queueing hints
enabled (kube's default). No I/O and no asyncio: time comes from an injected
clock, and every change to a pod's record adds its key to `dirty`, so the queue
service can persist exactly what changed.

Sub-queues (QueuedPodInfo.where):
  active         kube's activeQ, PrioritySort order (priority, then timestamp)
  backoff        kube's podBackoffQ, ordered by backoff expiry
  unschedulable  kube's unschedulablePods, waiting for a cluster event
  gated          pods a PreEnqueue plugin of their profile rejected (kube keeps them
                 in unschedulablePods, flagged gated); SchedulingGates holds those
                 with spec.schedulingGates
  inflight       popped by a worker; lease-protected in case the worker dies
  binding        assumed and handed to a binder; lease-protected likewise

The profile's PreEnqueue plugins, injected as `pre_enqueue`, run when a pod is added
and when an update may move it (kube's runPreEnqueuePlugins before moveToActiveQ); a
gated pod leaves `gated` only on an update they let pass.

A pod leaves `unschedulable` on a cluster event only if one of the plugins that
rejected it registered the event and that plugin's queueing hint says Queue
(hints.py, applied by moves.py); events that arrive while a pod is in flight are replayed against it
when it fails (inflight.py). Nominated pods are tracked per node (nominator.py).

Where each pod is, and the heaps behind the sub-queues, live in placement.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from services.queue.hints import ObservedEvent, QueueingHints
from services.queue.leases import LapsedAttempts
from services.queue.moves import EventMoves, PreCheck
from services.queue.nominator import Nominator
from services.queue.placement import Placements
from services.queue.podinfo import (
    ACTIVE,
    BACKOFF,
    BINDING,
    GATED,
    INFLIGHT,
    UNSCHEDULABLE,
    WHERES,
    Gating,
    QueuedPodInfo,
    RunPreEnqueue,
    SortKey,
    is_pod_updated,
    nominated_node_name,
    pod_priority,
    priority_sort_key,
)
from shared.api.workload import gang_of
from shared.framework.events import (
    BACKOFF_COMPLETE,
    EVENT_ASSIGNED_POD_ADD,
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    EVENT_UNSCHEDULED_POD_ADD,
    EVENT_UNSCHEDULED_POD_UPDATE,
    SCHEDULE_ATTEMPT_FAILURE,
    event_from_label,
    event_label,
    pod_scheduling_properties_change,
)
from shared.framework.interface import ClusterEvent
from shared.podgroups import pod_group_of

__all__ = ["WHERES", "QueuedPodInfo", "SchedulingQueue"]


Clock = Callable[[], float]


def _no_pre_enqueue(raw: dict[str, Any]) -> Gating | None:
    return None


class SchedulingQueue(LapsedAttempts):
    """kube's PriorityQueue without I/O; see the module docstring.

    `hints` None stands for "no hint map": every event is worth requeuing every pod.
    `pre_enqueue` None stands for profiles without PreEnqueue plugins: nothing is gated.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        hints: QueueingHints | None = None,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        inflight_lease: float = 15.0,
        binding_lease: float = 120.0,
        max_in_unschedulable: float = 300.0,
        sort_key: SortKey = priority_sort_key,
        pre_enqueue: RunPreEnqueue | None = None,
    ) -> None:
        self._clock = clock
        self._pre_enqueue = pre_enqueue or _no_pre_enqueue
        self._pods: dict[str, QueuedPodInfo] = {}
        self._placements = Placements(self._pods, sort_key)
        self._moves = EventMoves(hints)
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.inflight_lease = inflight_lease
        self.binding_lease = binding_lease
        self.max_in_unschedulable = max_in_unschedulable
        self.scheduling_cycle = 0
        # kube's moveRequestCycle: the scheduling cycle at the last move request. With
        # queueing hints it no longer decides anything; kept for inspection.
        self.move_request_cycle = -1
        self.dirty: set[str] = set()
        # Pods a PreEnqueue plugin rejected since the last take, told why (notready.py).
        self.pre_enqueue_rejected: set[str] = set()
        self.nominator = Nominator()

    def _reset(self) -> None:
        self._pods.clear()
        self._placements.clear()
        self._moves.clear()
        self.nominator.clear()

    # --- inspection -------------------------------------------------------------

    @property
    def hints(self) -> QueueingHints | None:
        return self._moves.hints

    def get(self, key: str) -> QueuedPodInfo | None:
        return self._pods.get(key)

    def counts(self) -> dict[str, int]:
        return dict(self._placements.counts)

    def active_len(self) -> int:
        return self._placements.counts[ACTIVE]

    def __len__(self) -> int:
        return len(self._pods)

    def pending(self) -> list[tuple[str, str]]:
        return [(key, qpi.where) for key, qpi in self._pods.items()]

    def pending_pods(self, where: str | None = None) -> list[QueuedPodInfo]:
        """kube's PendingPods: sub-queue by sub-queue, each in its own order."""
        return self._placements.pending(WHERES if where is None else (where,))

    @property
    def inflight_events(self) -> int:
        return len(self._moves.inflight)

    def nominated_pods(self, node: str | None = None) -> list[QueuedPodInfo]:
        """Pods nominated to `node` (or to any node), for RunFilterPluginsWithNominatedPods."""
        if node is not None:
            keys = self.nominator.pods_for(node)
        else:
            keys = [key for key, _ in self.nominator.items()]
        return [self._pods[k] for k in keys if k in self._pods]

    def take_pre_enqueue_rejected(self) -> list[QueuedPodInfo]:
        """Pods a PreEnqueue plugin rejected since the last call, still gated."""
        keys, self.pre_enqueue_rejected = self.pre_enqueue_rejected, set()
        return [q for k in keys if (q := self._pods.get(k)) is not None and q.where == GATED]

    def take_dirty(self) -> set[str]:
        """Keys whose record changed or was removed since the last call."""
        dirty, self.dirty = self.dirty, set()
        return dirty

    def unschedulable_pods(self) -> dict[tuple[str, str], int]:
        """scheduler_unschedulable_pods: (plugin, profile) -> waiting pods it rejected."""
        return dict(self._placements.unschedulable_pods)

    def take_incoming(self) -> Counter[tuple[str, str]]:
        """scheduler_queue_incoming_pods_total increments since the last call."""
        return self._placements.take_incoming()

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
            self._add_new(key, uid, raw, seq, event_label(EVENT_UNSCHEDULED_POD_ADD))

    def update(self, key: str, uid: str, raw: dict[str, Any], seq: int) -> None:
        qpi = self._pods.get(key)
        if qpi is None:
            self._add_new(key, uid, raw, seq, event_label(EVENT_UNSCHEDULED_POD_UPDATE))
            return
        if seq <= qpi.raw_seq:
            return  # stale or replayed event
        if uid and qpi.uid and uid != qpi.uid:
            # Same name, different pod object (deleted and recreated): start afresh.
            self._remove(key)
            self._add_new(key, uid, raw, seq, event_label(EVENT_UNSCHEDULED_POD_ADD))
            return
        old, old_priority = qpi.raw, qpi.priority
        qpi.uid = uid or qpi.uid
        qpi.raw, qpi.raw_seq, qpi.seq = raw, seq, max(seq, qpi.seq)
        qpi.priority = pod_priority(raw)
        self.dirty.add(key)
        # Only an isPodUpdated change may move a pod: ksched's own status writes after
        # a failure must not retry it at once (fail -> status write -> update -> retry).
        if is_pod_updated(old, raw):
            self._on_relevant_update(qpi, old, old_priority)
        self._update_nomination(qpi, old, old_priority)

    def _on_relevant_update(
        self, qpi: QueuedPodInfo, old: dict[str, Any], old_priority: int
    ) -> None:
        events = [
            ObservedEvent(e, old, qpi.raw) for e in pod_scheduling_properties_change(qpi.raw, old)
        ]
        if qpi.where in (INFLIGHT, BINDING):
            # The attempt uses the old object; its failure is checked against this update.
            self._moves.inflight.add_for_pod(qpi.key, events)
        elif qpi.where == GATED:
            self._requeue_if_admitted(qpi, events[-1].label)
        elif qpi.where == ACTIVE:
            if qpi.priority != old_priority:
                self._place(qpi, ACTIVE)  # re-push: its heap position depends on priority
        elif qpi.where == UNSCHEDULABLE:
            for ev in events:
                if self._moves.worth(qpi, ev):
                    self._requeue_if_admitted(qpi, ev.label)
                    break
        # backoff stays put, as upstream.

    def _requeue_if_admitted(self, qpi: QueuedPodInfo, event: str) -> None:
        """kube's moveToActiveQ for an updated pod: its PreEnqueue plugins run first; a
        pod they reject waits in gated, any other is requeued."""
        gating = self._pre_enqueue(qpi.raw)
        if gating is not None:
            self._gate(qpi, gating)
            return
        if qpi.where == GATED:  # what rejected it no longer does
            qpi.unschedulable_plugins, qpi.message = [], ""
        self._requeue(qpi, self._clock(), event)

    def _gate(self, qpi: QueuedPodInfo, gating: Gating, event: str = "") -> None:
        """Into gated (kube: unschedulablePods, gated), naming the plugin that rejected
        the pod as kube's UnschedulablePlugins does. A gated pod stays put."""
        if qpi.where != GATED:
            self._place(qpi, GATED, event)
        qpi.unschedulable_plugins, qpi.message = [gating.plugin], gating.message
        self._placements.recount(qpi)  # the gating plugin may have changed in place
        self.dirty.add(qpi.key)
        self.pre_enqueue_rejected.add(qpi.key)

    def _update_nomination(
        self, qpi: QueuedPodInfo, old: dict[str, Any], old_priority: int
    ) -> None:
        """kube's UpdateNominatedPod, and the move on a changed nomination: lower or
        equal priority pods may use the room the old nomination held."""
        old_node, new_node = nominated_node_name(old), nominated_node_name(qpi.raw)
        if qpi.where == BINDING:
            return  # assumed: upstream leaves assumed pods out of the queue's updates
        if old_node or new_node or not qpi.nominated_node:
            # else: an update without nominations keeps the in-memory one
            self._nominate(qpi, new_node if qpi.where != GATED else "")
        if old_node and old_node != new_node:
            self._move_freed_nomination(old, old_priority)

    def delete(self, key: str, *, bound: bool = False) -> None:
        """The pod is gone from the queue: deleted, finished, or bound (`bound`)."""
        qpi = self._pods.get(key)
        if qpi is None:
            return
        self._remove(key)
        if not bound and nominated_node_name(qpi.raw):
            self._move_freed_nomination(qpi.raw, qpi.priority)

    def _move_freed_nomination(self, pod: dict[str, Any], priority: int) -> None:
        # As upstream, a nominated pod deleted or renominated counts as an assigned pod
        # deleted, for the pods that yield to it (getLEPriorityPreCheck).
        self._move(
            ObservedEvent(EVENT_ASSIGNED_POD_DELETE, pod),
            lambda p: p.priority <= priority,
        )

    def _add_new(self, key: str, uid: str, raw: dict[str, Any], seq: int, event: str) -> None:
        gating = self._pre_enqueue(raw)
        qpi = QueuedPodInfo(
            key=key,
            uid=uid,
            raw=raw,
            seq=seq,
            priority=pod_priority(raw),
            timestamp=self._clock(),
        )
        self._pods[key] = qpi
        if gating is not None:
            self._gate(qpi, gating, event)
        else:
            self._place(qpi, ACTIVE, event)
            self._nominate(qpi, nominated_node_name(raw))
        if pod_group_of(raw) or _names_a_gang(raw):
            # A new member may complete a gang that Coscheduling rejected or that
            # GangScheduling's PreEnqueue holds. Only for gang pods: every other pod add
            # would make the queue look at all its unschedulable pods for nothing.
            self.move_all_to_active_or_backoff(EVENT_UNSCHEDULED_POD_ADD, None, raw)

    def _nominate(self, qpi: QueuedPodInfo, node: str) -> None:
        self.nominator.set(qpi.key, node)
        if qpi.nominated_node != node:
            qpi.nominated_node = node
            self.dirty.add(qpi.key)

    # --- scheduling cycle -------------------------------------------------------

    def pop(self, n: int, fits: PreCheck | None = None) -> list[QueuedPodInfo]:
        """Up to n pods from activeQ in PrioritySort order, now inflight; after the first,
        only while `fits` admits the next (the reply's size budget).

        Returns the queue's own objects, not copies: callers must only read them.
        """
        now = self._clock()
        popped: list[QueuedPodInfo] = []
        while len(popped) < n and (qpi := self._placements.peek(ACTIVE)) is not None:
            if fits is not None and not fits(qpi) and popped:
                break
            self.scheduling_cycle += 1
            qpi.cycle = self.scheduling_cycle
            qpi.attempts += 1
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = now
            qpi.lease_deadline = now + self.inflight_lease
            self._place(qpi, INFLIGHT)
            self._moves.inflight.popped(qpi.key)
            popped.append(qpi)
        return popped

    def unpop(self, attempts: list[tuple[str, int]]) -> int:
        """The pods of a pop whose reply never went out (writing their in-flight state
        failed), as (key, cycle): back to activeQ as they were before it, keeping their
        turn, so the next pop hands them out. Kept in flight, they would wait for their
        attempt's lease to lapse although no worker ever saw them. A pod deleted,
        updated or taken back meanwhile is left as it is. Returns how many went back."""
        back = 0
        for key, cycle in attempts:
            qpi = self._pods.get(key)
            if qpi is None or qpi.where != INFLIGHT or qpi.cycle != cycle:
                continue
            qpi.attempts = max(0, qpi.attempts - 1)
            if qpi.attempts == 0:
                qpi.initial_attempt_timestamp = None
            qpi.lease_deadline = 0.0
            self._moves.inflight.done(key)
            self._place(qpi, ACTIVE)
            back += 1
        return back

    def assumed(self, key: str, cycle: int) -> bool:
        """The pod popped in `cycle` was assumed and handed to a binder."""
        qpi = self._pods.get(key)
        if qpi is None or qpi.where != INFLIGHT or qpi.cycle != cycle:
            return False  # stale report: deleted, re-popped or taken back by lease expiry
        qpi.lease_deadline = self._clock() + self.binding_lease
        self._place(qpi, BINDING)
        self._nominate(qpi, "")  # an assumed pod is no longer merely nominated
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
        nominated_node: str | None = None,
        victims: list[str] | None = None,
    ) -> bool:
        """The scheduling or binding attempt of `cycle` failed: kube's
        AddUnschedulableIfNotPresent with queueing hints."""
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
        if nominated_node is not None:
            self._nominate(qpi, nominated_node)  # preemption's ModeOverride
            if list(victims or []) != qpi.victims:
                qpi.victims = list(victims or [])
                self.nominator.version += 1  # workers learn the victims with the nomination
        if self._moves.wait_for_event(qpi, unschedulable, plugins):
            self._place(qpi, UNSCHEDULABLE, SCHEDULE_ATTEMPT_FAILURE)
        else:
            self._requeue(qpi, now, SCHEDULE_ATTEMPT_FAILURE)
        return True

    # --- cluster events ---------------------------------------------------------

    def move_all_to_active_or_backoff(
        self,
        event: ClusterEvent | str,
        old: dict[str, Any] | None = None,
        new: dict[str, Any] | None = None,
        *,
        pre_check: PreCheck | None = None,
    ) -> int:
        """kube's MoveAllToActiveOrBackoffQueue: the unschedulable pods this event may
        help go to activeQ (or backoffQ while backing off). Returns how many moved."""
        if isinstance(event, str):
            event = event_from_label(event)
        return self._move(ObservedEvent(event, old, new), pre_check)

    def assigned_pod_added(self, pod: dict[str, Any]) -> int:
        """An assigned pod appeared (bound, or listed): InterPodAffinity's and
        PodTopologySpread's hints move the pods whose terms it satisfies."""
        return self.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD, None, pod)

    def assigned_pod_updated(self, old: dict[str, Any], new: dict[str, Any]) -> int:
        return sum(
            self.move_all_to_active_or_backoff(ev, old, new)
            for ev in pod_scheduling_properties_change(new, old)
        )

    def _move(self, ev: ObservedEvent, pre_check: PreCheck | None = None) -> int:
        """movePodsToActiveOrBackoffQueue over the candidates of the event."""
        interested = self._moves.interested(ev.event)  # once: every bound pod brings a move
        if interested is not None and not interested:
            return 0  # no plugin registered this event: nothing to do, nothing to remember
        candidates = self._moves.candidates(self._placements, interested)
        moved = self._move_pods(ev, candidates, pre_check)
        return moved + self._recheck_gated(ev, interested)

    def _recheck_gated(self, ev: ObservedEvent, interested: frozenset[str] | None) -> int:
        """kube moves gated pods on cluster events too, and its moveToActiveQ runs their
        PreEnqueue plugins again (a gang's new member, its Workload). Only the gated pods
        whose gating plugin registered the event and whose hint says Queue: with none
        registered (SchedulingGates registers updates only) nothing is scanned."""
        if not interested or not self._placements.counts.get(GATED):
            return 0
        gated = [
            qpi
            for qpi in self._pods.values()
            if qpi.where == GATED
            and interested.intersection(qpi.unschedulable_plugins)
            and self._moves.worth(qpi, ev)
        ]
        for qpi in gated:
            self._requeue_if_admitted(qpi, ev.label)
        return sum(1 for qpi in gated if qpi.where != GATED)

    def _move_pods(
        self, ev: ObservedEvent, candidates: list[QueuedPodInfo], pre_check: PreCheck | None
    ) -> int:
        now = self._clock()
        chosen = self._moves.select(ev, candidates, pre_check)
        for qpi in chosen:
            self._requeue(qpi, now, ev.label)
        self.move_request_cycle = self.scheduling_cycle
        return len(chosen)

    # --- flushes (lapsed leases: leases.py) ------------------------------------

    def flush_backoff_completed(self) -> int:
        """kube's flushBackoffQCompleted: pods whose backoff expired go to activeQ."""
        now = self._clock()
        moved = 0
        while (qpi := self._placements.peek(BACKOFF)) is not None and qpi.backoff_expiry <= now:
            self._place(qpi, ACTIVE, BACKOFF_COMPLETE)
            moved += 1
        return moved

    def flush_unschedulable_leftover(self) -> int:
        """kube's flushUnschedulablePodsLeftover: pods unschedulable for longer than
        max_in_unschedulable get another try even without a cluster event."""
        now = self._clock()
        stale = [
            qpi
            for qpi in self._placements.live(UNSCHEDULABLE)
            if now - qpi.timestamp > self.max_in_unschedulable
        ]
        if not stale:
            return 0
        return self._move_pods(ObservedEvent(EVENT_UNSCHEDULABLE_TIMEOUT), stale, None)

    # --- persistence ------------------------------------------------------------

    def restore(self, records: Iterable[dict[str, Any]]) -> None:
        """Rebuild from persisted records, replacing the current content.

        Inflight pods' leases lapse at once (the worker may still be at work on them, so
        they are fenced before they go back to activeQ, where their original timestamp
        keeps their turn). Binding pods keep their lease, since the binder may still
        report; every other pod keeps its place. In-flight events are not persisted: a
        binding pod that fails later is retried after backoff.
        """
        self._reset()
        for rec in records:
            qpi = QueuedPodInfo.from_record(rec)
            where = qpi.where if qpi.where in WHERES else ACTIVE
            if where == INFLIGHT:
                qpi.lease_deadline = 0.0
            self._remove(qpi.key)
            self._pods[qpi.key] = qpi
            self._place(qpi, where)
            self.nominator.set(qpi.key, qpi.nominated_node)

    def restore_meta(self, scheduling_cycle: int, move_request_cycle: int) -> None:
        self.scheduling_cycle = scheduling_cycle
        self.move_request_cycle = move_request_cycle

    # --- placement -------------------------------------------------------------

    def _requeue(self, qpi: QueuedPodInfo, now: float, event: str) -> None:
        """kube's requeue: backoffQ while the pod is still backing off, else activeQ."""
        self._place(qpi, BACKOFF if now < qpi.backoff_expiry else ACTIVE, event)

    def _place(self, qpi: QueuedPodInfo, where: str, event: str = "") -> None:
        """Put a pod held in _pods into `where` (placement.py). `event` names why, for
        scheduler_queue_incoming_pods_total."""
        self._placements.place(qpi, where, event)
        self.dirty.add(qpi.key)

    def _remove(self, key: str) -> None:
        qpi = self._pods.pop(key, None)
        if qpi is None:
            return
        self._placements.remove(qpi)
        self._moves.forget(key)
        self.nominator.delete(key)
        self.dirty.add(key)


def _names_a_gang(raw: dict[str, Any]) -> bool:
    """gang_of(raw) != "", looked up only when the spec has a field naming a gang: a
    plain pod, most added, has neither."""
    spec = raw.get("spec") or {}
    return ("schedulingGroup" in spec or "workloadRef" in spec) and bool(gang_of(raw))
