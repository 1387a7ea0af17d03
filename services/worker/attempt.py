"""One pod's attempt in a worker batch, and what is built from it."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import Diagnosis, FitError
from shared.framework.interface import PostFilterResult
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler, SchedulingError
from shared.framework.status import Status
from shared.framework.types import PodInfo
from shared.messages import BindRequest, Outcome, QueuedPod, Report, report
from shared.stages import BIND_REQUESTED, Stamps


@dataclass
class Attempt:
    qp: QueuedPod
    pod: PodInfo
    scheduler: Scheduler
    node: str = ""
    state: CycleState = field(default_factory=CycleState)
    preemption: PostFilterResult | None = None  # what PostFilter decided, on a FitError
    waits: dict[str, float] = field(default_factory=dict)  # Permit said Wait: plugin -> timeout
    victims_gone: bool = False  # preemption found victims already deleted
    # The cache refused it where pods nominated to the node counted: this worker's view
    # of the nominations is behind (services/cache/nominations.py).
    reserved_room: bool = False
    # ... on its own nominated node: other nominations of equal or higher priority there
    # hold room whose victims are still going; it waits for them, preempting no more.
    waits_for_room: bool = False
    stamps: Stamps = field(default_factory=dict)  # its stage times (shared/stages.py)

    @property
    def framework(self) -> Framework:
        return self.scheduler.fw

    @property
    def cycle(self) -> int:
        return self.qp["cycle"]

    def bind_request(self, now: float) -> BindRequest:
        req: BindRequest = {
            "key": self.pod.key,
            "uid": self.qp["uid"],
            "seq": self.qp["seq"],
            "node": self.node,
            "cycle": self.cycle,
            "pod": self.qp["pod"],
            "profile": self.framework.profile,
            "assumed_at": now,
            "stamps": {**self.stamps, BIND_REQUESTED: now},
        }
        if self.waits:
            req["permit_waits"] = {p: now + t for p, t in self.waits.items()}
        return req

    def rejection(self, status: Status) -> Exception:
        """A Permit rejection is kube's FitError on the chosen node; an error stays one."""
        if not status.rejected:
            return SchedulingError(status)
        return FitError(self.pod.key, 1, Diagnosis({self.node: status}, {status.plugin}))


def queued_report(
    qp: QueuedPod, outcome: Outcome, message: str = "", plugins: list[str] | None = None
) -> Report:
    return report(qp["key"], qp["cycle"], outcome, message, plugins)
