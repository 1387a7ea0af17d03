"""Leader election for the single-instance services (watcher, queue, cache), without I/O.

kube-scheduler's leader election (client-go leaderelection), as a state machine fed
with what each try at the lease saw; the Redis side is runtime/elector.py.

    STANDBY --acquired--> LEADING --renewed--> LEADING
       ^                     |
       |                     +--held by another / lapsed / renew deadline passed--> LOST
       |                     +--stalled at two renewals in a row (gives it up)----> LOST
       +-- (a LOST process exits; restarted, it stands by again)

- lease duration: how long a lease lasts after its last renewal; a standby takes
  over only once it has lapsed (Redis expires it: one clock decides).
- renew deadline: a leader that has not renewed for this long steps down, before
  its lease can lapse and a standby take over (renew deadline < lease duration).
- retry period: how often a leader renews and a standby tries (a standby also
  tries as soon as the holder's lease is due to lapse).

- progress: before each renewal the leader checks that its service makes progress
  (runtime/progress.py); a leader found stalled at two renewals in a row releases
  its lease, so that a standby takes over, instead of holding it while wedged.

Every acquisition hands out a new epoch; the leader's writes carry it and are
refused once a newer epoch exists (fencing), so even a leader that has not yet
noticed its loss cannot overwrite its successor.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

# Services that run one active replica; the others stand by.
LEADER_ELECTED = frozenset({"watcher", "queue", "cache"})
# A standby tries this long after the holder's lease is due to lapse (Redis expiry
# granularity), so that its try finds the lease gone.
LAPSE_MARGIN_SECONDS = 0.05


class Role(Enum):
    STANDBY = "standby"
    LEADING = "leading"
    LOST = "lost"


@dataclass(frozen=True)
class LeaseConfig:
    """kube-scheduler's defaults: --leader-elect-lease-duration 15s, renew-deadline 10s,
    retry-period 2s."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs 0 < retry period < renew deadline < lease duration, "
                f"got {self.retry_period} / {self.renew_deadline} / {self.lease_duration}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> LeaseConfig:
        values = {}
        for field, var in (
            ("lease_duration", "KSCHED_LEADER_ELECT_LEASE_DURATION"),
            ("renew_deadline", "KSCHED_LEADER_ELECT_RENEW_DEADLINE"),
            ("retry_period", "KSCHED_LEADER_ELECT_RETRY_PERIOD"),
        ):
            value = seconds(env, var)
            if value is not None:
                values[field] = value
        return cls(**values)


def seconds(env: Mapping[str, str], var: str) -> float | None:
    """A duration setting, `"15"` or `"15s"`; None when unset."""
    raw = env.get(var, "")
    if not raw:
        return None
    try:
        return float(raw.removesuffix("s"))
    except ValueError:
        raise ValueError(f"{var} must be a number of seconds, got {raw!r}") from None


def identity(env: Mapping[str, str] | None = None) -> str:
    """Who holds the lease: unique per process (kube: hostname + "_" + a UUID)."""
    env = os.environ if env is None else env
    return env.get("KSCHED_LEADER_ELECT_IDENTITY") or (
        f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"
    )


@dataclass(frozen=True)
class Observed:
    """What one try at the lease saw."""

    acquired: bool  # the try acquired or renewed the lease for us
    epoch: int  # the lease's epoch (ours when acquired)
    holder: str  # who holds it ("" when nobody does)
    remaining: float  # seconds until the holder's lease lapses


class Lease:
    """One candidate's view of its lease."""

    def __init__(self, config: LeaseConfig, identity: str) -> None:
        self.config = config
        self.identity = identity
        self.role = Role.STANDBY
        self.epoch = 0  # ours while LEADING
        self.holder = ""
        self.renewed_at = 0.0
        self._remaining = 0.0
        self._stall_seen = False

    @property
    def leading(self) -> bool:
        return self.role is Role.LEADING

    def observe(self, now: float, seen: Observed) -> None:
        if self.role is Role.LOST:
            return  # final: a deposed leader never leads again in this process
        self.holder, self._remaining = seen.holder, seen.remaining
        if seen.acquired:
            if self.role is Role.STANDBY:
                self.role, self.epoch = Role.LEADING, seen.epoch
            self.renewed_at = now
        elif self.role is Role.LEADING:
            self.role = Role.LOST  # another holder, or our lease lapsed
        self.failed(now)

    def stalled(self, reason: str | None) -> bool:
        """What the progress check before a renewal found (None: progress). True when
        this leader must give its lease up: stalled at this renewal and at the one
        before (a retry period apart), so that probes see the stall first and a unit
        of work that ends just past the limit costs no failover."""
        give_up = reason is not None and self._stall_seen and self.role is Role.LEADING
        self._stall_seen = reason is not None
        return give_up

    def give_up(self) -> None:
        """Released for want of progress: final, like any loss."""
        self.role, self.holder = Role.LOST, ""

    def failed(self, now: float) -> None:
        """A try that reached no verdict (Redis unreachable): a leader keeps its role
        until the renew deadline passes."""
        if self.role is Role.LEADING and now - self.renewed_at >= self.config.renew_deadline:
            self.role = Role.LOST

    def budget(self, now: float) -> float:
        """How long the next try may take: a leader must know before its renew deadline."""
        if self.role is Role.LEADING:
            return max(self.config.renew_deadline - (now - self.renewed_at), 0.0)
        return self.config.retry_period

    def next_try_in(self, now: float) -> float:
        if self.role is Role.LEADING:
            return min(self.config.retry_period, self.budget(now))
        if self.holder and self._remaining >= 0:
            return min(self.config.retry_period, self._remaining + LAPSE_MARGIN_SECONDS)
        return self.config.retry_period
