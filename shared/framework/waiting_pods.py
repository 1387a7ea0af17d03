"""waitingPods: pods a Permit plugin told to wait (kube-scheduler's waiting_pods_map.go).

A waiting pod keeps its assumed resources until every plugin it waits on has
allowed it (Success), one rejects it, or a plugin's timeout passes (a
rejection by that plugin). Deadlines are absolute wall-clock times fixed when
Permit ran, so a pod redelivered to another binder waits only what is left.

Permit signals are how plugins reach waiting pods held by other processes
(kube's IterateOverWaitingPods + Allow/Reject): "allow (or reject) every
waiting pod of this namespace whose labels match this selector, for this
plugin". They are data, so the worker and the binder can ship them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from shared.framework.status import SUCCESS, Code, Status

# kube-scheduler caps a Permit wait at 15 minutes. ksched caps it below the queue's
# binding lease (120 s): past it the queue would hand the waiting pod out again.
MAX_PERMIT_TIMEOUT = 100.0

Verdict = Literal["allow", "reject"]


@dataclass(frozen=True)
class PermitSignal:
    verdict: Verdict
    plugin: str
    namespace: str
    selector: tuple[tuple[str, str], ...]  # label key/value pairs, all must match
    message: str = ""
    gang: str = ""  # also: only pods of this gang (shared/api/workload.py gang_key)

    def matches(self, namespace: str, labels: dict[str, str], gang: str = "") -> bool:
        return (
            namespace == self.namespace
            and all(labels.get(k) == v for k, v in self.selector)
            and (not self.gang or gang == self.gang)
        )

    def to_wire(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "plugin": self.plugin,
            "namespace": self.namespace,
            "selector": [list(kv) for kv in self.selector],
            "message": self.message,
            "gang": self.gang,
        }

    @classmethod
    def from_wire(cls, rec: dict[str, Any]) -> PermitSignal:
        verdict = rec["verdict"]
        if verdict not in ("allow", "reject"):
            raise ValueError(f"unknown permit verdict {verdict!r}")
        selector = tuple((str(k), str(v)) for k, v in rec["selector"])
        plugin, namespace = str(rec["plugin"]), str(rec["namespace"])
        return cls(verdict, plugin, namespace, selector, rec["message"], str(rec.get("gang", "")))


def timeout_message(waited: float, plugin: str) -> str:
    return f"rejected due to timeout after waiting {waited:g}s at plugin {plugin}"


@dataclass
class WaitingPod:
    """One pod held at Permit: the plugins still to allow it, each with its deadline."""

    key: str
    uid: str
    cycle: int
    node: str
    pending: dict[str, float]  # plugin -> deadline (wall clock)
    started: float = 0.0  # when Permit told it to wait
    status: Status | None = None  # the decision, once taken

    @property
    def decided(self) -> bool:
        return self.status is not None

    def allow(self, plugin: str) -> None:
        """Allow on behalf of `plugin`; Success once no plugin is pending."""
        if self.decided:
            return
        self.pending.pop(plugin, None)
        if not self.pending:
            self.status = SUCCESS

    def reject(self, plugin: str, message: str) -> None:
        if self.decided:
            return
        self.status = Status(Code.UNSCHEDULABLE, [message], plugin=plugin)

    def deadline(self) -> float:
        return min(self.pending.values(), default=0.0)

    def expire(self, now: float) -> bool:
        """Reject for the first plugin whose deadline passed; True if that happened."""
        if self.decided:
            return False
        for plugin, deadline in sorted(self.pending.items(), key=lambda kv: kv[1]):
            if deadline <= now:
                self.reject(plugin, timeout_message(round(deadline - self.started, 3), plugin))
                return True
        return False


@dataclass
class WaitingPods:
    """The waiting pods of one binder replica, by pod key."""

    pods: dict[str, WaitingPod] = field(default_factory=dict)

    def add(self, wp: WaitingPod) -> None:
        self.pods[wp.key] = wp

    def get(self, key: str) -> WaitingPod | None:
        return self.pods.get(key)

    def remove(self, key: str) -> WaitingPod | None:
        return self.pods.pop(key, None)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self.pods.values()))

    def __len__(self) -> int:
        return len(self.pods)

    def expire(self, now: float) -> list[WaitingPod]:
        """Pods whose wait timed out now (rejected by the timing-out plugin)."""
        return [wp for wp in self if wp.expire(now)]

    def decided(self) -> list[WaitingPod]:
        return [wp for wp in self if wp.decided]

    def next_deadline(self) -> float | None:
        pending = [wp.deadline() for wp in self if not wp.decided]
        return min(pending) if pending else None
