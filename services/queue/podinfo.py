"""A pod in the scheduling queue (kube's QueuedPodInfo), as persisted, and the pod
helpers the queue needs: priority, nomination, isPodUpdated; the shape of PreEnqueue."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from shared.wire import pack

# Sub-queues (see queue.py).
ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
INFLIGHT = "inflight"
BINDING = "binding"
WHERES = (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED, INFLIGHT, BINDING)

# Metadata that changes without the pod changing for scheduling; kube's isPodUpdated
# blanks these (and the whole status) before comparing old and new pod.
_IGNORED_METADATA = frozenset({"resourceVersion", "generation", "managedFields", "finalizers"})


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
    nominated_node: str = ""  # the nominator's node for this pod, persisted with it
    victims: list[str] = field(default_factory=list)  # of the preemption that nominated it
    size: int = 0  # bytes of the pod object on the wire (0: not known yet), for pop batches
    # The stage times of the event that last put the pod in the queue (shared/stages.py),
    # passed on to workers; not persisted (a restored pod has none).
    stamps: dict[str, float] = field(default_factory=dict)
    # `raw` packed, and the object it was packed from (records.py): a pod is packed once
    # per version, not at every write of its record and every pop. Not persisted.
    _packed: bytes = field(default=b"", init=False, repr=False, compare=False)
    _packed_of: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.raw_seq < 0:
            self.raw_seq = self.seq

    def packed_raw(self) -> bytes:
        """`raw` packed; packed again only once `raw` is another object (a new version:
        the queue never changes a pod object in place)."""
        if self._packed_of is not self.raw:
            self._packed, self._packed_of = pack(self.raw), self.raw
        return self._packed

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


_RECORD_FIELDS = tuple(
    f.name for f in fields(QueuedPodInfo) if f.name != "stamps" and not f.name.startswith("_")
)

# activeQ's order: the profiles' QueueSort plugin as a key (PrioritySort by default).
SortKey = Callable[[QueuedPodInfo], tuple[Any, ...]]


class Gating(NamedTuple):
    """What keeps a pod out of activeQ: the PreEnqueue plugin that rejected it (kube's
    GatingPlugin) and its message."""

    plugin: str
    message: str


# The pod's profile's PreEnqueue plugins, as the queue runs them on a pod added or
# updated (kube's runPreEnqueuePlugins): None when it may enter activeQ.
RunPreEnqueue = Callable[[dict[str, Any]], Gating | None]


def priority_sort_key(qpi: QueuedPodInfo) -> tuple[Any, ...]:
    return (-qpi.priority, qpi.timestamp)  # PrioritySort's Less


def pod_priority(raw: dict[str, Any]) -> int:
    return int((raw.get("spec") or {}).get("priority") or 0)


def nominated_node_name(raw: dict[str, Any]) -> str:
    return str((raw.get("status") or {}).get("nominatedNodeName") or "")


def scheduling_view(raw: dict[str, Any]) -> dict[str, Any]:
    """The pod as kube's isPodUpdated compares it: no status, no bookkeeping metadata."""
    view = {k: v for k, v in raw.items() if k != "status"}
    meta = view.get("metadata")
    if isinstance(meta, dict):
        view["metadata"] = {k: v for k, v in meta.items() if k not in _IGNORED_METADATA}
    return view


def is_pod_updated(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return scheduling_view(old) != scheduling_view(new)
