"""A pod as the cache holds it (assumed or added; the state machine is drawn in
cache.py) and its Redis record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.framework.types import PodInfo

ASSUMED = "assumed"
ADDED = "added"


@dataclass
class PodState:
    key: str
    uid: str
    node: str
    state: str  # ASSUMED | ADDED
    pod: PodInfo
    seq: int = 0
    binding_finished: bool = False
    deadline: float | None = None  # expiry of an assumed pod
    # The cache generation at which the pod was placed on `node` (assumed, or added
    # without an assumption); confirmations and updates keep it. Sorting by it gives
    # the serial order in which the cache committed the placements.
    placed_at: int = 0
    cycle: int = 0  # the scheduling cycle of the attempt that assumed it
    allowed: list[str] = field(default_factory=list)  # Permit plugins that allowed it
    rejected: list[str] | None = None  # [plugin, message] of a Permit rejection

    def to_record(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "uid": self.uid,
            "node": self.node,
            "state": self.state,
            "pod": self.pod.slim_bytes,
            "seq": self.seq,
            "finished": self.binding_finished,
            "deadline": self.deadline,
            "placed_at": self.placed_at,
            "cycle": self.cycle,
            "allowed": self.allowed,
            "rejected": self.rejected,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> PodState:
        return cls(
            rec["key"],
            rec["uid"],
            rec["node"],
            rec["state"],
            _pod_of_record(rec["pod"], rec["seq"]),
            rec["seq"],
            rec["finished"],
            rec["deadline"],
            rec.get("placed_at", 0),
            rec.get("cycle", 0),
            list(rec.get("allowed") or []),
            rec.get("rejected"),
        )


def _pod_of_record(pod: bytes | dict[str, Any], seq: int) -> PodInfo:
    if isinstance(pod, bytes):
        return PodInfo.of_slim(pod, seq)
    return PodInfo.of(pod, seq)  # records written before the pod was stored packed
