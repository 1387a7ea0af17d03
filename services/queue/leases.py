"""Attempts whose lease lapsed: the worker or binder holding a pod vanished or froze.

A lapsed attempt's pod stays inflight or binding until the queue service has fenced
the attempt (fence.py): a frozen binder thawing later must find its bind refused, so
the pod may not be scheduled again before that.
"""

from __future__ import annotations

from collections.abc import Callable

from services.queue.moves import EventMoves
from services.queue.placement import LEASE, Placements
from services.queue.podinfo import ACTIVE, BINDING, INFLIGHT, QueuedPodInfo

LEASE_EXPIRED = "LeaseExpired"  # ksched's own move label: a worker or binder vanished


class LapsedAttempts:
    """The lease side of SchedulingQueue (queue.py), which provides these attributes."""

    _clock: Callable[[], float]
    _pods: dict[str, QueuedPodInfo]
    _placements: Placements
    _moves: EventMoves
    inflight_lease: float
    binding_lease: float

    def _place(self, qpi: QueuedPodInfo, where: str, event: str = "") -> None:
        raise NotImplementedError

    def expire_leases(self) -> list[QueuedPodInfo]:
        """Inflight and binding pods whose worker or binder vanished (or froze): their
        attempts lapsed. They stay where they are until the service has fenced each
        lapsed attempt (`requeue_lapsed`): a frozen binder thawing later must find its
        bind refused, so the pod may not be scheduled again before that. Should the
        fence never complete (the service died), the lease lapses again."""
        now = self._clock()
        expired: list[QueuedPodInfo] = []
        while (qpi := self._placements.peek(LEASE)) is not None and qpi.lease_deadline < now:
            qpi.lease_deadline = now + self.inflight_lease
            self._place(qpi, qpi.where)
            expired.append(qpi)
        return expired

    def lapse_unknown_attempts(self) -> int:
        """After the queue's state was rebuilt from the log: the state Redis lost may have
        handed any pending pod out (a worker at it, a binder about to bind it). So every
        pod that could go out now is held as a lapsed attempt, of cycle 0 (none this
        state knows of), and fenced like any before it goes out again. Returns how many."""
        held = self._placements.live(ACTIVE)
        for qpi in held:
            qpi.cycle, qpi.lease_deadline = 0, 0.0
            self._place(qpi, INFLIGHT)
        return len(held)

    def requeue_lapsed(self, key: str, cycle: int, seq: int | None) -> bool:
        """The lapsed attempt `cycle` was fenced (the pod's subject is now at `seq`, past
        anything the attempt could bind): back to activeQ, keeping its turn. False when
        the attempt was resolved meanwhile (reported, re-popped, or the pod is gone)."""
        qpi = self._pods.get(key)
        if qpi is None or qpi.where not in (INFLIGHT, BINDING) or qpi.cycle != cycle:
            return False
        if seq is not None and seq > qpi.seq:
            qpi.seq = seq
        qpi.lease_deadline = 0.0
        self._moves.inflight.done(key)
        self._place(qpi, ACTIVE, LEASE_EXPIRED)
        return True

    def extend_lapsed(self, key: str, cycle: int) -> None:
        """The lapsed attempt's pod was bound or deleted meanwhile: wait (a binding lease
        more) for the watcher to deliver that."""
        qpi = self._pods.get(key)
        if qpi is not None and qpi.where in (INFLIGHT, BINDING) and qpi.cycle == cycle:
            qpi.lease_deadline = self._clock() + self.binding_lease
            self._place(qpi, qpi.where)
