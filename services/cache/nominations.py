"""The nominations the cache holds (kube's nominator, at the serialization point), pure.

Why here too, when the queue has a nominator and workers filter with it: workers learn
nominations from the queue, by version, at their next pop. A worker that popped a pod
before the queue heard of a nomination, and refreshes its snapshot after the victims'
deletions reached the cache, sees free room and nothing reserving it: it would place
a lower-priority pod there, and the preemptor, finding its room gone, would preempt
again. The cache learns the nomination from the log (the watcher routes the
preemptor's status write, `status.nominatedNodeName`, here), and the act phase deletes
the victims only after that write: in stream order the nomination comes before the
room it reserves. So `assume` counts the nominated pods of equal or higher priority on
the node (RunFilterPluginsWithNominatedPods), and a pod that would eat into reserved
room is refused like any conflict: its worker retries it elsewhere.

Kube's semantics: a nomination reserves room only against pods of lower or equal
priority, never against the nominated pod itself; it lapses when the pod is assumed
or bound (anywhere), deleted, or its nomination is cleared or moved. As a safety net
against a clearing the cache never hears of (a watcher that took over after it),
a nomination also lapses after `ttl`; workers keep honouring it from the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.framework.types import PodInfo

NOMINATION_TTL = 300.0  # seconds; a nominated preemptor normally binds within seconds
# A preemption's room reserved before its nomination is written (cache.py
# reserve_nomination): the watcher brings the written nomination within moments, which
# holds it for NOMINATION_TTL; one never written (its worker died, or the write lost to
# a newer version of the pod) stops holding the room after this.
RESERVATION_TTL = 30.0


@dataclass
class Nomination:
    node: str
    pod: PodInfo
    deadline: float

    def to_record(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "pod": self.pod.slim_bytes,
            "seq": self.pod.version,
            "deadline": self.deadline,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Nomination:
        return cls(rec["node"], PodInfo.of_slim(rec["pod"], rec["seq"]), rec["deadline"])


class Nominations:
    """Pod key -> its nomination, and node -> the nominated pods (what Filter reads)."""

    def __init__(self) -> None:
        self.by_key: dict[str, Nomination] = {}
        # What the frameworks' handles read (HandleProviders.nominated); rebuilt on a
        # change, which is rare: only preemption nominates.
        self.by_node: dict[str, list[PodInfo]] = {}
        self.dirty: set[str] = set()  # keys changed since the last write

    def __len__(self) -> int:
        return len(self.by_key)

    def nominate(self, key: str, node: str, pod: PodInfo, deadline: float) -> None:
        """Nominate the pod to `node`; the empty name clears its nomination. An older
        version than the one held changes nothing (a replayed event)."""
        current = self.by_key.get(key)
        if current is not None and pod.version < current.pod.version:
            return
        if not node:
            self.drop(key)
            return
        self.by_key[key] = Nomination(node, pod, deadline)
        self._changed(key)

    def release(self, key: str, version: int) -> bool:
        """Drop the nomination reserved at `version` (one never written); a newer one,
        the watcher's, stays."""
        current = self.by_key.get(key)
        return current is not None and current.pod.version == version and self.drop(key)

    def drop(self, key: str) -> bool:
        if self.by_key.pop(key, None) is None:
            return False
        self._changed(key)
        return True

    def has(self, node: str) -> bool:
        return node in self.by_node

    def expire(self, now: float) -> list[str]:
        gone = [k for k, n in self.by_key.items() if n.deadline <= now]
        for key in gone:
            self.drop(key)
        return gone

    def restore(self, records: dict[str, Nomination]) -> None:
        self.by_key = dict(records)
        self._index()
        self.dirty.clear()

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def _changed(self, key: str) -> None:
        self.dirty.add(key)
        self._index()

    def _index(self) -> None:
        by_node: dict[str, list[PodInfo]] = {}
        for n in self.by_key.values():
            by_node.setdefault(n.node, []).append(n.pod)
        self.by_node = by_node
