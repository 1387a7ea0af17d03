"""Events seen while pods are in flight (kube's inFlightPods and inFlightEvents).

A pod's scheduling attempt works on a snapshot; an event that arrives during the
attempt may already have made it schedulable. So the queue remembers events for
as long as some pod that was popped before them is still in flight, and a pod
that then fails is checked against the events of its own attempt.

Entries carry a sequence number: a pod is marked with the number at its pop, an
event with the number at its arrival. Events older than the oldest in-flight
pod are dropped, so memory is bounded by the event rate times the longest attempt.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Generic, TypeVar

E = TypeVar("E")

_COMPACT_AT = 1024


class InFlight(Generic[E]):
    def __init__(self) -> None:
        self._seq = 0
        self._pods: dict[str, int] = {}  # pop order = sequence order (a re-pop re-inserts)
        self._seqs: list[int] = []  # event sequence numbers, ascending, from _head on
        self._events: list[E] = []
        self._head = 0

    def __len__(self) -> int:
        """Events held."""
        return len(self._events) - self._head

    @property
    def pods(self) -> int:
        return len(self._pods)

    def __contains__(self, key: str) -> bool:
        return key in self._pods

    def popped(self, key: str) -> None:
        self._pods.pop(key, None)
        self._seq += 1
        self._pods[key] = self._seq

    def add(self, event: E) -> bool:
        """addEventIfAnyInFlight: kept only while some pod is in flight."""
        if not self._pods:
            return False
        self._seq += 1
        self._seqs.append(self._seq)
        self._events.append(event)
        return True

    def add_for_pod(self, key: str, events: list[E]) -> bool:
        """addEventsIfPodInFlight: an update of a pod in flight, kept for its failure."""
        if key not in self._pods:
            return False
        for event in events:
            self.add(event)
        return True

    def events_for(self, key: str) -> list[E] | None:
        """The events since the pod's pop; None if the pod is not in flight (unknown:
        say after a restart, when nothing can be known about its attempt)."""
        since = self._pods.get(key)
        if since is None:
            return None
        start = bisect_right(self._seqs, since, lo=self._head)
        return self._events[start:]

    def done(self, key: str) -> None:
        """The attempt ended; events no remaining in-flight pod can need are dropped."""
        if self._pods.pop(key, None) is None:
            return
        oldest = next(iter(self._pods.values()), None)
        self._head = (
            len(self._events) if oldest is None else bisect_right(self._seqs, oldest, lo=self._head)
        )
        if self._head >= _COMPACT_AT and self._head * 2 >= len(self._events):
            del self._events[: self._head]
            del self._seqs[: self._head]
            self._head = 0
        elif self._head == len(self._events):
            self._events.clear()
            self._seqs.clear()
            self._head = 0

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]
