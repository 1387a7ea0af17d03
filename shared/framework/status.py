"""Status: the outcome of a plugin at an extension point (kube-scheduler's framework.Status)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    # An internal error: the pod goes to backoffQ and is retried, whatever the cluster does.
    ERROR = 1
    # The pod does not fit now; a cluster event (or preemption) may change that.
    UNSCHEDULABLE = 2
    # Does not fit on this node and preemption there would not help.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    # Permit: hold the pod until allowed or rejected.
    WAIT = 4
    # The plugin has nothing to do for this pod; its later phases are skipped.
    SKIP = 5
    # Waiting on something outside the scheduler (e.g. a gate); not a failure of the cycle.
    PENDING = 6


# kube's Code.String(): how statuses are named in metrics labels and messages.
CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


@dataclass
class Status:
    code: Code = Code.SUCCESS
    reasons: list[str] = field(default_factory=list)
    plugin: str = ""  # set by the framework, not the plugin

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)


SUCCESS = Status()


def plugin_error(plugin: str, point: str, err: Exception) -> Status:
    """An exception a plugin raised at `point`, as the Error status the framework gives."""
    return Status(Code.ERROR, [f"running {point} plugin {plugin!r}: {err}"], plugin=plugin)


def unschedulable(*reasons: str, resolvable: bool = True) -> Status:
    code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return Status(code, list(reasons))
