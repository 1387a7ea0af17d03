"""Whether the state queue and cache keep in Redis is whole: the state marker.

The JetStream log is the source of truth; what queue and cache keep in Redis is
derived from it. Redis can lose data without anyone being told: a failover to a
replica that lagged, a restart from an append-only file that missed its last
second, a restart without persistence, FLUSHALL. Redis keeps a prefix of its
writes in every such case, or nothing. So each of queue and cache writes, with
every batch of its state (one fenced script call, all or nothing), a marker
(`ksched:<service>:state`):

- `incarnation`: the number of this incarnation of the state, set when the whole
  state is written (at takeover, or again after a loss). Incarnations are numbered
  by the sequence of a message on KSCHED_STATE: durable, only growing, whatever
  Redis forgets. Workers re-read the whole cache when it changes.
- `applied`: the cluster stream sequence through which watch events are applied.
  The watcher acks a batch only once queue and cache applied it (and its last
  message to each says where the batch ends), so its consumer's ack floor, durable
  in JetStream, can be ahead of `applied` only if Redis lost writes.
- `applied:watcher.<s>`, one per watcher shard (shared/sharding.py): with N shards the
  events come in N interleaved streams, each acked by its own consumer, so each
  shard's progress is its own number; `applied` is then a floor under all of them
  (a rebuild's cut: every event up to it is in the state).
- `writes`: the batches written in this incarnation.
- `layout` (queue shards): the sequence of the shard count's record on KSCHED_STATE
  under which the state was written (`current_layout`). A queue started with another
  shard count deals the pods differently: a shard's state kept from an earlier count
  holds pods it no longer owns and lacks pods it now owns, so it is rebuilt.

Every batch a leader writes first expects the marker to hold its incarnation and the
count of batches it wrote (`Watermark.guard`): over a Redis that lost any of them
(or all: no marker), nothing is written and the leader hears of it at once; it then
writes its whole state again, from memory, as a new incarnation (`StateWrites`). A
leader that writes nothing for a while reads the marker every second instead
(`lost_while_leading`). A new leader checks the marker against the watcher's ack
floor before it trusts Redis (`lost_at_takeover`), and rebuilds from the log when it
may not (shared/relist.py). The numbers an incarnation hands out that must never
repeat (the queue's scheduling cycles, the cache's pod-groups version) start at
`incarnation_base(incarnation)`, above any an earlier incarnation used.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo
from nats.js.errors import APIError, NotFoundError

from shared import keys
from shared.runtime.fencing import FencedBatch
from shared.runtime.publish import WRONG_LAST_SEQUENCE
from shared.sharding import WATCHER, consumer_lane
from shared.subjects import (
    CLUSTER_STREAM,
    EXPECTED_LAST_SUBJECT_SEQ,
    LAYOUT_SUBJECT,
    STATE_STREAM,
    WATCHER_CONSUMER,
    incarnation_subject,
)
from shared.wire import text

INCARNATION = "incarnation"
APPLIED = "applied"
LANE_APPLIED = f"{APPLIED}:"  # + a watcher shard's lane: that shard's `applied`
WRITES = "writes"
LAYOUT = "layout"
# Numbers one incarnation may hand out: incarnation n starts at n << 32, so that a
# rebuilt queue never reuses a scheduling cycle a worker or binder still holds.
INCARNATION_BITS = 32
CHECK_SECONDS = 1.0  # how often a leader reads its marker (lost_while_leading)


@dataclass(frozen=True)
class Marker:
    """The state marker as read from Redis."""

    incarnation: int = 0  # 0: none (wiped, never written, or written over a wipe)
    applied: int = 0
    writes: int = 0
    lanes: Mapping[str, int] = field(default_factory=dict)  # watcher shards' `applied`
    layout: int = 0  # the shard layout it was written under (0: none recorded)

    @classmethod
    def of(cls, raw: Mapping[Any, Any]) -> Marker:
        fields = {text(k): int(v) for k, v in raw.items()}
        lanes = {k[len(LANE_APPLIED) :]: v for k, v in fields.items() if k.startswith(LANE_APPLIED)}
        return cls(
            fields.get(INCARNATION, 0),
            fields.get(APPLIED, 0),
            fields.get(WRITES, 0),
            lanes,
            fields.get(LAYOUT, 0),
        )

    def applied_by(self, lane: str) -> int:
        """Through which sequence the events of watcher lane `lane` are applied."""
        if lane == WATCHER:
            return self.applied
        return max(self.applied, self.lanes.get(lane, 0))


def lost_at_takeover(marker: Marker, acked: Mapping[str, int], layout: int = 0) -> str | None:
    """Why a new leader may not trust the state in Redis (None: it is whole), given
    the last cluster stream sequence each watcher lane (shard) acknowledged and the
    shard layout it runs under (0: unsharded state, none checked)."""
    if not marker.incarnation:
        return "no state marker: Redis was wiped, restarted empty, or never held this state"
    if layout and marker.layout != layout:
        return (
            f"written under shard layout {marker.layout or 'unrecorded'}, not {layout}: "
            "the shard count changed, and the pods are dealt anew"
        )
    for lane, seq in sorted(acked.items()):
        if marker.applied_by(lane) < seq:
            return (
                f"events applied through sequence {marker.applied_by(lane)}, but {lane} "
                f"acknowledged {seq}: Redis lost writes"
            )
    return None


def only_lanes(acked: Mapping[str, int], lanes: Container[str] | None) -> dict[str, int]:
    """The ack floors of the watcher lanes whose events make a state (None: every lane):
    a queue shard's pods come from its own watcher shard, the others send it moves only,
    with no `through`, so their floors say nothing of what it applied."""
    return {lane: seq for lane, seq in acked.items() if lanes is None or lane in lanes}


def lost_while_leading(marker: Marker, incarnation: int, writes: int) -> str | None:
    """Why the leader's state in Redis is no longer what it wrote (None: it is)."""
    if not marker.incarnation:
        return "the state marker is gone: Redis was wiped or restarted empty"
    if marker.incarnation > incarnation:
        return None  # a successor's: this leader is deposed, and fenced
    if marker.incarnation < incarnation:
        return f"Redis holds incarnation {marker.incarnation}, not {incarnation}: it went back"
    if marker.writes < writes:
        return f"Redis holds {marker.writes} of the {writes} writes made: it lost the last ones"
    return None


def incarnation_base(incarnation: int) -> int:
    return incarnation << INCARNATION_BITS


def is_lost(err: Exception) -> bool:
    """A batch refused because the marker was not as its writer left it (`guard`)."""
    return "EXPECTED" in str(err)


class Watermark:
    """A receiver's side of the marker: what it has applied and written, and the
    sequence up to which a rebuilt state already holds every event (`cut`)."""

    def __init__(self, service: str) -> None:
        self.key = keys.state_key(service)
        self.incarnation = 0
        self.applied = 0
        self.lanes: dict[str, int] = {}  # watcher shards' `applied`, by lane
        self.writes = 0
        self.cut = 0  # events at or below it are in the state already (a rebuild's list)
        self.layout = 0  # the shard layout the state is written under (0: none)
        self._writing: tuple[int, dict[str, int]] = (0, {})  # in the batch being written
        self._saved: tuple[int, dict[str, int]] = (0, {})  # as Redis holds them

    def start(
        self, incarnation: int, applied: int, *, cut: int = 0, lanes: Mapping[str, int] = {}
    ) -> None:
        """A new incarnation of the state, holding events through `applied` (every
        lane's floor) and each watcher shard's through `lanes`."""
        self.incarnation, self.applied, self.writes = incarnation, applied, 0
        self.lanes = {lane: seq for lane, seq in lanes.items() if seq > applied}
        self.cut = max(self.cut, cut)

    def holds(self, seq: int | None) -> bool:
        """Whether the event at `seq` is in the state already (a rebuild listed it)."""
        return seq is not None and seq <= self.cut

    def through(self, seq: int | None, lane: str = WATCHER) -> None:
        """The events of a delivery from watcher `lane` are applied, through stream
        sequence `seq`."""
        if seq is None:
            return
        if lane == WATCHER:
            self.applied = max(self.applied, seq)
        elif seq > self.lanes.get(lane, self.applied):
            self.lanes[lane] = seq

    def guard(self, batch: FencedBatch) -> None:
        """First in a batch: Redis still holds every batch this incarnation wrote."""
        batch.expect(self.key, {INCARNATION: self.incarnation, WRITES: self.writes})

    def write(self, batch: FencedBatch, *, whole: bool = False) -> None:
        """Add the marker to a batch of state writes (`whole`: the batch starts the
        incarnation, and names it); `written` once the batch landed."""
        fields: dict[str, int] = {APPLIED: self.applied, WRITES: self.writes + 1}
        fields.update({f"{LANE_APPLIED}{lane}": seq for lane, seq in self.lanes.items()})
        if whole:
            fields[INCARNATION] = self.incarnation
            if self.layout:
                fields[LAYOUT] = self.layout
        batch.hset(self.key, mapping=fields)
        self._writing = (self.applied, dict(self.lanes))

    def written(self) -> None:
        self.writes += 1
        self._saved = self._writing

    @property
    def behind(self) -> bool:
        """Redis holds an older `applied` (events came that changed nothing): the
        watcher acks them once this is written."""
        return (self.applied, self.lanes) != self._saved


# Queues the changed state into a batch; returns what undoes taking those changes (the
# batch did not land), or None when nothing changed.
Changes = Callable[[FencedBatch], Callable[[], None] | None]
Everything = Callable[[FencedBatch], None]  # queues the whole state into a batch


class StateWrites:
    """How queue and cache write their state to Redis: the changes, in a batch that
    expects the marker as this leader left it; or, at takeover and after a loss, the
    whole state in place of whatever Redis holds, as a new incarnation."""

    def __init__(
        self,
        service: str,
        state_keys: tuple[str, ...],
        js: Callable[[], JetStreamContext],
        redis: aioredis.Redis,
        batch: Callable[[], FencedBatch],
    ) -> None:
        self.service = service
        self.state_keys = state_keys  # what the whole state replaces (not the marker)
        self.mark = Watermark(service)
        self.whole = False  # the next write is the whole state
        self._js = js
        self._redis = redis
        self._batch = batch
        self._log = logging.getLogger(f"ksched.{service}")

    async def write(self, changes: Changes, everything: Everything) -> None:
        if not self.mark.incarnation:
            # Not taken over yet (stopped during the takeover): what Redis holds is the
            # predecessor's, and an empty memory written "whole" would wipe it.
            return
        if self.whole:
            await self._write_whole(everything)
            return
        batch = self._batch()  # fenced: refused once a newer leader exists
        self.mark.guard(batch)  # and over a Redis that lost what this leader wrote
        undo = changes(batch)
        if undo is None:
            if not self.mark.behind:
                return
            undo = _nothing  # only the marker, for the applied events
        self.mark.write(batch)
        try:
            await batch.execute()
        except Exception as err:
            undo()
            if not is_lost(err):
                raise
            self._lost(str(err))
            await self._write_whole(everything)
            return
        self.mark.written()

    async def adopt(self) -> None:
        """A takeover found the state whole in Redis: only the marker changes, to name
        the new incarnation."""
        batch = self._batch()
        self.mark.write(batch, whole=True)
        await batch.execute()
        self.mark.written()

    async def _write_whole(self, everything: Everything) -> None:
        """In the incarnation a takeover started, or else (a loss) in a new one."""
        self.whole = True
        if self.mark.writes:
            incarnation = await new_incarnation(self._js(), self.service)
            self.mark.start(incarnation, self.mark.applied, lanes=self.mark.lanes)
        batch = self._batch()
        for key in (*self.state_keys, self.mark.key):  # the marker too: no older lanes
            batch.delete(key)
        everything(batch)
        self.mark.write(batch, whole=True)
        await batch.execute()
        self.mark.written()
        self.whole = False
        self._log.info("wrote the whole state as incarnation %d", self.mark.incarnation)

    async def check(self) -> None:
        """A leader that wrote nothing for a while learns of a loss here (every
        CHECK_SECONDS), not at its next write: the workers read its state meanwhile."""
        expected = (self.mark.incarnation, self.mark.writes)
        try:
            marker = await read_marker(self._redis, self.service)
        except Exception as err:  # Redis away: the next check (or write) tells
            self._log.debug("state marker not read: %s", err)
            return
        lost = lost_while_leading(marker, *expected)
        if lost is not None and expected == (self.mark.incarnation, self.mark.writes):
            self._lost(lost)
            self.whole = True

    def _lost(self, why: str) -> None:
        self._log.error("Redis lost the %s's state (%s): writing it all again", self.service, why)


def _nothing() -> None:
    return None


async def read_marker(redis: aioredis.Redis, service: str) -> Marker:
    return Marker.of(await redis.hgetall(keys.state_key(service)))


@dataclass(frozen=True)
class Takeover:
    incarnation: int  # the new leader's
    marker: Marker  # as it found it
    # No incarnation of this state came before: none can have been lost, nor any pod
    # handed out by one. What Redis holds then predates the marker (an upgrade).
    first: bool
    lost: str | None  # why the state in Redis cannot be trusted (None: it can)
    layout: int = 0  # the shard layout it runs under (0: none checked)

    def announce_rebuild(self, log: logging.Logger, service: str) -> None:
        if self.lost is not None:
            log.error("the %s's state in Redis is lost (%s): rebuilding it", service, self.lost)
        else:
            log.info("no %s state in Redis yet: building it from the log", service)


async def state_at_takeover(
    js: JetStreamContext,
    redis: aioredis.Redis,
    service: str,
    *,
    watcher_lanes: Container[str] | None = None,
    shards: int | None = None,
) -> Takeover:
    """What a new leader of `service` finds: a new incarnation, and whether Redis still
    holds the state its predecessor wrote. The watcher acks nothing meanwhile (this
    service does not serve), so the ack floor read stands. `watcher_lanes`: the watcher
    lanes whose events make its state (None: every lane), e.g. a queue shard's one;
    `shards`: the shard count its state is dealt by (None: not dealt)."""
    first = not await had_incarnation(js, service)
    incarnation = await new_incarnation(js, service)
    layout = 0 if shards is None else await current_layout(js, shards)
    acked = only_lanes(acked_by_lane(await watcher_consumers(js)), watcher_lanes)
    marker = await read_marker(redis, service)
    lost = None if first else lost_at_takeover(marker, acked, layout)
    return Takeover(incarnation, marker, first, lost, layout)


async def current_layout(js: JetStreamContext, shards: int) -> int:
    """The layout of `shards` queue shards: the sequence of the record of that count,
    published when the last record names another count (or none exists). Compare and
    set on the subject's last sequence, so shards starting together agree on one."""
    while True:
        try:
            last = await js.get_last_msg(STATE_STREAM, LAYOUT_SUBJECT)
        except NotFoundError:
            seq, count = 0, 0
        else:
            seq, count = int(last.seq or 0), int(last.data or b"0")
        if count == shards:
            return seq
        headers = {EXPECTED_LAST_SUBJECT_SEQ: str(seq)}
        try:
            ack = await js.publish(LAYOUT_SUBJECT, str(shards).encode(), headers=headers)
        except APIError as err:  # another shard recorded a layout first: read it
            if err.err_code != WRONG_LAST_SEQUENCE:
                raise
            continue
        return int(ack.seq)


async def had_incarnation(js: JetStreamContext, service: str) -> bool:
    try:
        await js.get_last_msg(STATE_STREAM, incarnation_subject(service))
    except NotFoundError:
        return False
    return True


async def new_incarnation(js: JetStreamContext, service: str) -> int:
    """A number no earlier incarnation of `service`'s state had: the sequence of a
    message published for it on KSCHED_STATE."""
    ack = await js.publish(incarnation_subject(service), b"")
    return int(ack.seq)


# --- the watcher's consumers: their ack floor is durable progress ---------------------


def is_watcher_consumer(info: ConsumerInfo) -> bool:
    """A watcher leader's durable ("watcher" alone: before leader election). Only
    durables count: a publisher may create ephemeral consumers, never a durable."""
    name = info.config.durable_name or ""
    return name == WATCHER_CONSUMER or name.startswith(f"{WATCHER_CONSUMER}-")


def acked_through(consumers: list[ConsumerInfo]) -> int:
    """The last stream sequence these watcher consumers fully handled (0: none)."""
    return max((c.ack_floor.stream_seq for c in consumers if c.ack_floor), default=0)


def acked_by_lane(consumers: list[ConsumerInfo]) -> dict[str, int]:
    """The last stream sequence each watcher shard's consumers fully handled, by lane
    (shared/sharding.py): each shard acks its own interleaved share of the stream."""
    acked: dict[str, int] = {}
    for info in consumers:
        lane = consumer_lane(info.name)
        if lane is not None and info.ack_floor:
            acked[lane] = max(acked.get(lane, 0), info.ack_floor.stream_seq)
    return acked


async def consumer_names(js: JetStreamContext, stream: str) -> list[str]:
    """Every consumer of `stream` by name, as the meta leader's assignments have them.
    The list of infos asks each consumer's own leader and waits on those that do not
    answer: after a server was lost, a publisher's R1 ephemeral consumer on it never
    answers again, and a takeover spent 8-9 s on that list (chaos-hosts)."""
    names: list[str] = []
    while True:
        resp = await js._api_request(
            f"{js._prefix}.CONSUMER.NAMES.{stream}",
            json.dumps({"offset": len(names)}).encode(),
            timeout=js._timeout,
        )
        page = resp.get("consumers") or []
        names += page
        if not page or len(names) >= int(resp.get("total", 0)):
            return names


async def watcher_consumers(js: JetStreamContext) -> list[ConsumerInfo]:
    """The watcher leaders' consumers of the cluster stream, each asked for its info
    (its own leader answers once elected); publishers' consumers are not asked."""
    infos: list[ConsumerInfo] = []
    for name in await consumer_names(js, CLUSTER_STREAM):
        if name != WATCHER_CONSUMER and not name.startswith(f"{WATCHER_CONSUMER}-"):
            continue
        try:
            info = await js.consumer_info(CLUSTER_STREAM, name)
        except NotFoundError:  # deleted since listed (a racing takeover)
            continue
        if is_watcher_consumer(info):
            infos.append(info)
    return infos


async def watcher_acked(js: JetStreamContext) -> int:
    """The last cluster stream sequence a watcher acknowledged: queue and cache had
    applied every event up to it."""
    return acked_through(await watcher_consumers(js))
