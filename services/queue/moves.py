"""Which queued pods a cluster event may help: kube's queueing hints applied to the
unschedulable pods, and the events seen while a pod was in flight, replayed against it
when its attempt fails (determineSchedulingHintForInFlightPod).

Pure: the queue hands in candidates and gets back the pods worth requeuing.
"""

from __future__ import annotations

from collections.abc import Callable

from services.queue.hints import ObservedEvent, QueueingHints
from services.queue.inflight import InFlight
from services.queue.placement import Placements
from services.queue.podinfo import QueuedPodInfo
from shared.framework.interface import ClusterEvent
from shared.framework.types import PodInfo

PreCheck = Callable[[QueuedPodInfo], bool]


class EventMoves:
    """`hints` None stands for "no hint map": every event is worth requeuing every pod."""

    def __init__(self, hints: QueueingHints | None) -> None:
        self.hints = hints
        self.inflight: InFlight[ObservedEvent] = InFlight()
        self._pod_infos: dict[str, PodInfo] = {}  # parsed pods for hints, by key

    def clear(self) -> None:
        self.inflight.clear()
        self._pod_infos.clear()

    def forget(self, key: str) -> None:
        """The pod left the queue."""
        self.inflight.done(key)
        self._pod_infos.pop(key, None)

    def interested(self, event: ClusterEvent) -> frozenset[str] | None:
        """The plugins registered for the event; None: every plugin (a wildcard event,
        or no hint map). Empty: the event is of no interest (isEventOfInterest)."""
        return None if self.hints is None else self.hints.interested_plugins(event)

    def candidates(
        self, placements: Placements, interested: frozenset[str] | None
    ) -> list[QueuedPodInfo]:
        """Unschedulable pods rejected by a plugin `interested` in the event, or by none."""
        return placements.rejected_by_any(interested)

    def select(
        self, ev: ObservedEvent, candidates: list[QueuedPodInfo], pre_check: PreCheck | None
    ) -> list[QueuedPodInfo]:
        """The candidates this event is worth requeuing. The event is also remembered for
        the pods in flight: one of them may fail later and must know it happened."""
        chosen = [
            qpi
            for qpi in candidates
            if (pre_check is None or pre_check(qpi)) and self.worth(qpi, ev)
        ]
        self.inflight.add(ev)
        return chosen

    def worth(self, qpi: QueuedPodInfo, ev: ObservedEvent) -> bool:
        if self.hints is None:
            return True
        return self.hints.worth_requeuing(
            qpi.raw, qpi.unschedulable_plugins, ev, lambda: self._pod_info(qpi)
        )

    def wait_for_event(self, qpi: QueuedPodInfo, unschedulable: bool, plugins: list[str]) -> bool:
        """The attempt of a pod in flight failed: True when it should wait in
        unschedulable for an event. An Error, a pod no plugin rejected, an attempt the
        queue knows nothing of, or an event during the attempt that may have made the
        pod schedulable: False, retry after backoff."""
        events = self.inflight.events_for(qpi.key)
        self.inflight.done(qpi.key)
        return (
            unschedulable
            and bool(plugins)
            and events is not None
            and not any(self.worth(qpi, ev) for ev in events)
        )

    def _pod_info(self, qpi: QueuedPodInfo) -> PodInfo:
        """The pod parsed for hints, once per version."""
        info = self._pod_infos.get(qpi.key)
        if info is None or info.raw is not qpi.raw:
            info = PodInfo.of(qpi.raw, qpi.raw_seq)
            self._pod_infos[qpi.key] = info
        return info
