"""Leader election for the single-instance services (watcher, queue, cache), without I/O.

kube-scheduler's leader election (client-go leaderelection), as a state machine fed
with what each try at the lease read and whether its write landed; the I/O is
runtime/elector.py, the record lives in a NATS KV bucket (runtime/leasestore.py).

    STANDBY --claim landed--> LEADING --renewal landed--> LEADING
       ^                         |
       |                         +--taken over / renew deadline passed--> LOST
       |                         +--stalled at two renewals in a row (gives it up)--> LOST
       +-- (a LOST process exits; restarted, it stands by again)

Each try reads the lease record and its revision, decides, and writes with a
compare-and-set on that revision, as client-go does with a resourceVersion: of two
candidates that read the same revision, one write lands and the other finds the
revision moved (outraced). The outraced one reads again, within the same try: the
record it reads then says whether it lost (another's term) or was outraced by a late
copy of its own write (its own term, renewed as usual).

- lease duration: a standby takes over once the record has not changed for this long
  by its OWN clock, counted from when it first saw that revision (client-go's
  observedTime): no clock is ever compared with another machine's.
- renew deadline: a leader that has not renewed for this long steps down, before a
  standby can take over (renew deadline < lease duration; its clock runs from when
  its last landed renewal was sent, so a standby's count starts later still).
- retry period: how often a leader renews and a standby tries (a standby also tries
  as soon as the holder's lease is due to lapse by its clock).

- a silent store: a leader whose tries the bucket leaves unanswered (no answer, no
  responder, 503: e.g. the bucket electing its Raft leader, 4-9 s) keeps its lease
  past the renew deadline for as long as it keeps asking, each unanswered ask made
  while current keeping it current for a renew deadline more; a standby that met the
  silence too gives the holder the margin between renew deadline and lease duration
  to renew once the store answers again, whether the record it reads then is the one
  it saw before or a renewal that landed meanwhile. Nobody can be handed a new term while the
  store has no leader; a holder that is only cut off from a store that answers others
  may overlap its successor, whose writes fencing keeps apart (docs/reliability.md,
  "A silent lease store").

- progress: before each renewal the leader checks that its service makes progress
  (runtime/progress.py); a leader found stalled at two renewals in a row releases
  its lease, so that a standby takes over, instead of holding it while wedged.

Every takeover writes a new epoch in the same compare-and-set (one above the record's,
and above any epoch the fenced store has seen): the store's compare-and-set is the
only source of epochs, so one is never handed out twice while the store keeps its
guarantees (a Raft-replicated KV bucket). The leader's writes carry it and are refused
once a newer epoch exists (fencing, runtime/fencing.py), so even a leader that has not
yet noticed its loss cannot overwrite its successor.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import Enum
from typing import Any

# Services that run one active replica; the others stand by.
LEADER_ELECTED = frozenset({"watcher", "queue", "cache"})
# A standby tries this long after the holder's lease is due to lapse by its clock, so
# that its try finds the lease duration passed (sleeps may end a tick early).
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


def micro_time(wall: float) -> str:
    """A wall-clock time as Kubernetes writes a MicroTime (RFC 3339, microseconds)."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseRecord:
    """What the lease key holds: client-go's LeaderElectionRecord, plus the epoch.

    Only holder and epoch decide anything; the times and the renew count are for
    people reading the bucket (`nats kv get`): no candidate compares another
    machine's clock with its own."""

    holder: str  # holderIdentity ("" once released)
    epoch: int  # the fencing token of the holder's term
    lease_duration: float  # leaseDurationSeconds the holder uses
    acquire_time: str = ""  # when this term began (MicroTime)
    renew_time: str = ""  # the holder's last renewal (MicroTime)
    renew_count: int = 0  # renewals in this term

    def encode(self) -> bytes:
        return json.dumps(
            {
                "holderIdentity": self.holder,
                "epoch": self.epoch,
                "leaseDurationSeconds": self.lease_duration,
                "acquireTime": self.acquire_time,
                "renewTime": self.renew_time,
                "renewCount": self.renew_count,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> LeaseRecord:
        """The record, or ValueError when it is not one of ours."""
        try:
            obj: Any = json.loads(raw)
        except ValueError:
            raise ValueError(f"lease record is not JSON: {raw[:80]!r}") from None
        if not isinstance(obj, dict):
            raise ValueError(f"lease record is not an object: {raw[:80]!r}")
        holder, epoch = obj.get("holderIdentity"), obj.get("epoch")
        if not isinstance(holder, str) or not _count(epoch):
            raise ValueError(f"lease record without holderIdentity and epoch: {raw[:80]!r}")
        assert isinstance(epoch, int)
        duration = obj.get("leaseDurationSeconds", 0)
        renewals = obj.get("renewCount", 0)
        return cls(
            holder=holder,
            epoch=epoch,
            lease_duration=float(duration) if isinstance(duration, int | float) else 0.0,
            acquire_time=str(obj.get("acquireTime", "")),
            renew_time=str(obj.get("renewTime", "")),
            renew_count=renewals if _count(renewals) else 0,
        )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Lease:
    """One candidate's view of its lease."""

    def __init__(self, config: LeaseConfig, identity: str) -> None:
        self.config = config
        self.identity = identity
        self.role = Role.STANDBY
        self.epoch = 0  # ours while LEADING
        self.holder = ""
        self.record: LeaseRecord | None = None  # as last read or written
        self.revision = 0  # the record's revision in the bucket (0: no record)
        self.observed_at = 0.0  # when this revision was first seen (own monotonic clock)
        self.renewed_at = 0.0  # when our last landed write was sent (own monotonic clock)
        # When the last try the store left unanswered was sent, while this lease was
        # current: it keeps the lease current as a renewal would (a silent store).
        self.silent_at = 0.0
        self._met_silence = False  # a standby's try went unanswered since its last read
        # Why this leader lost, for its last log line: the holder it read says nothing
        # when its tries went unanswered (still itself).
        self.lost_because = ""
        self._stall_seen = False

    @property
    def leading(self) -> bool:
        return self.role is Role.LEADING

    def read(self, now: float, record: LeaseRecord | None, revision: int) -> bool:
        """A try read `record` at `revision` (None, 0: no record yet) at `now`. True when
        this candidate writes the lease now: a leader renews what is still its own, a
        standby takes over a lease that is free, released, or unchanged for a lease
        duration."""
        if self._met_silence:
            # The holder may have been asking the silent store as we were, unable to
            # renew: it gets the renew deadline's margin to do so from now on. So does a
            # revision first seen now: it landed at some point before or during the
            # silence (a renewal sent just before the store's leader died, after our
            # last read), and counting a whole lease duration from now made a killed
            # host's standbys wait 3 s more after the store came back (chaos-hosts).
            since = now - self.config.renew_deadline
            seen = self.observed_at if revision == self.revision else since
            self.observed_at = max(seen, since)
        elif revision != self.revision:
            self.observed_at = now
        self.revision = revision
        self._met_silence = False
        self.record = record
        self.holder = record.holder if record is not None else ""
        if self.role is Role.LOST:
            return False  # final: a deposed leader never leads again in this process
        if self.role is Role.LEADING:
            if record is not None and (record.holder, record.epoch) == (self.identity, self.epoch):
                return True
            self._lose(f"taken over by {self.holder or 'nobody'} (epoch {self._read_epoch()})")
            return False
        if record is None or record.holder in ("", self.identity):
            # nobody's, released, or held by an earlier process of our identity (a
            # fixed KSCHED_LEADER_ELECT_IDENTITY restarted), as client-go allows
            return True
        return now - self.observed_at >= self.config.lease_duration

    def claim(self, wall: float, floor: int = 0) -> LeaseRecord:
        """The record this candidate writes once `read` said so: a leader's renewal, or a
        new term whose epoch is above the record's and above `floor` (the newest epoch
        the fenced store has seen, so that a bucket that lost its record, or a store
        that had epochs before the bucket, never sees one go backwards)."""
        stamp = micro_time(wall)
        record = self.record
        if self.role is Role.LEADING and record is not None:
            return replace(record, renew_time=stamp, renew_count=record.renew_count + 1)
        epoch = max(record.epoch if record is not None else 0, floor) + 1
        return LeaseRecord(self.identity, epoch, self.config.lease_duration, stamp, stamp)

    def wrote(self, started: float, record: LeaseRecord, revision: int) -> None:
        """The claim `record` landed at `revision`; the try was sent at `started` (the
        renew deadline counts from there: the write took effect at some point after)."""
        if self.role is Role.LOST:
            return
        self.role, self.epoch, self.renewed_at = Role.LEADING, record.epoch, started
        self.record, self.revision, self.holder = record, revision, record.holder

    def released(self, wall: float) -> LeaseRecord | None:
        """What a leader that stops writes (client-go's ReleaseOnCancel): its record
        without a holder, so a standby takes over at its next try. The epoch stays:
        the next term's is above it. None when there is nothing of ours to release."""
        if self.role is not Role.LEADING or self.record is None:
            return None
        return replace(self.record, holder="", renew_time=micro_time(wall))

    def current(self, now: float) -> bool:
        """Whether this leader may still write: leading, and renewed within the renew
        deadline by its own clock (a leader frozen past it has possibly been
        succeeded, whatever its lease thread has not noticed yet)."""
        return self.role is Role.LEADING and now - self._kept_at() < self.config.renew_deadline

    def _kept_at(self) -> float:
        """Since when the renew deadline counts: the last renewal that landed, or a later
        try that the store left unanswered while this lease was current."""
        return max(self.renewed_at, self.silent_at)

    def stalled(self, reason: str | None) -> bool:
        """What the progress check before a renewal found (None: progress). True when
        this leader must give its lease up: stalled at this renewal and at the one
        before (a retry period apart), so that probes see the stall first and a unit
        of work that ends just past the limit costs no failover."""
        give_up = reason is not None and self._stall_seen and self.role is Role.LEADING
        self._stall_seen = reason is not None
        return give_up

    def give_up(self, because: str = "given up for want of progress") -> None:
        """Released (for want of progress, or at shutdown): final, like any loss."""
        self._lose(because)
        self.holder = ""

    def failed(
        self,
        now: float,
        unanswered_since: float | None = None,
        unanswered_until: float | None = None,
    ) -> None:
        """A try that reached no verdict: a leader keeps its role until the renew
        deadline passes. `unanswered_since` .. `unanswered_until`: when the store left
        the try unanswered (no answer, no responder, 503) rather than failing otherwise,
        from when it was sent until when it was given up (the elector says `until` only
        for a try that ran no longer than its budget: a thread frozen mid-try gives its
        last ask). Sent while this lease was current, it keeps the lease current for a
        renew deadline from `until`: while the store does not answer, nobody is handed
        a new term. (Not from the try's start: a try may last until its deadline, and
        the next one, a retry period later, must find the lease current.)"""
        if unanswered_since is not None:
            self._met_silence = True
            if self.current(unanswered_since):
                heard = unanswered_since if unanswered_until is None else unanswered_until
                self.silent_at = max(self.silent_at, heard)
        if self.role is Role.LEADING and not self.current(now):
            # e.g. the lease bucket without a Raft leader (its server died): nats-server
            # elects the next one 4-9 s later, past a renew deadline shorter than that
            self._lose(
                f"not renewed within the renew deadline ({self.config.renew_deadline:g} s): "
                "the lease bucket did not answer"
            )

    def fenced(self) -> None:
        """A write of this leader's was refused: a newer epoch exists."""
        self._lose("fenced: a write was refused for a newer epoch")

    def _lose(self, because: str) -> None:
        self.role, self.lost_because = Role.LOST, because

    def _read_epoch(self) -> int:
        return self.record.epoch if self.record is not None else 0

    def budget(self, now: float) -> float:
        """How long the next try may take: a leader must know before its renew deadline."""
        if self.role is Role.LEADING:
            return max(self.config.renew_deadline - (now - self._kept_at()), 0.0)
        return self.config.retry_period

    def next_try_in(self, now: float) -> float:
        if self.role is Role.LEADING:
            return min(self.config.retry_period, self.budget(now))
        if self.holder and self.holder != self.identity:
            lapses_in = self.observed_at + self.config.lease_duration - now
            return min(self.config.retry_period, max(lapses_in, 0.0) + LAPSE_MARGIN_SECONDS)
        return self.config.retry_period
