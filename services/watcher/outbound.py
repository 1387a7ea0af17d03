"""What one batch of watch events sends on, packed item by item and sized to fit.

Each routed queue or cache item is packed once, as it is taken in, so that:
- an event that cannot be encoded (the door should have refused it) is refused
  alone, with its reason, instead of failing the whole batch's delivery forever;
- an object too large to travel inside any internal message, or to be written
  back by ksched (the bound pod, a status), is refused at the door;
- the batch goes out in as many messages as the server's max payload needs
  (shared.wire.pack_chunks), and a receiver's per-item failure points back to the
  watch event it came from;
- the last message to each receiver names the stream sequence the batch ends at
  (`through`), an empty one if the batch has no item for it: once it is applied, so
  is every event up to there (the state marker's `applied`, runtime/watermark.py);
- with queue shards (shared/sharding.py), a pod's items go to its own queue shard (its
  gang's for a gang's pod: `queue_owner`) and the moves (cluster events) to every
  shard; `through` to the shard whose pods this watcher handles, and to the others
  only a message when it carries moves or another partition's gang pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.framework.events import ASSIGNED_POD, DELETE
from shared.messages import CacheEvent, QueueEvent
from shared.sharding import queue_owner
from shared.subjects import OWN_WRITE_HEADER
from shared.wire import Chunk, dump_json, item_limit, pack, pack_chunks, pack_with

# An object and its msgpack (shared.api.events.ClusterEvent.packed).
PackedObject = tuple[dict[str, Any], bytes]

# Room left in a message beside the largest object: an internal item's own fields, and
# what ksched adds when it writes the object back (spec.nodeName and the PodScheduled
# condition of a binding, or a FailedScheduling message in the status).
OBJECT_ROOM = 64 * 1024
# Room the `through` field takes in the head of a batch's last message.
THROUGH_ROOM = 32


# How far past object_limit the door lets one of ksched's own writes of an object go
# (OWN_WRITE_HEADER): the binding, a status or a victim's deletion of an object accepted
# at the limit adds a few hundred bytes to it, and refusing that (as the door did) undid
# the binding, so the pod was bound again and again, a binding lease apart. Half the room:
# a publisher that sets the header itself gets no more than this, and what ksched adds
# later still fits in the other half.
OWN_WRITE_GROWTH = OBJECT_ROOM // 2


def object_limit(body_limit: int) -> int:
    """The largest object (its JSON, as ksched writes it) that ksched accepts."""
    return body_limit - OBJECT_ROOM


def door_limit(limit: int, headers: dict[str, str] | None) -> int:
    """The size limit (`limit`: object_limit) for an event with these headers: more
    for ksched's own writes (OWN_WRITE_GROWTH)."""
    return limit + OWN_WRITE_GROWTH if OWN_WRITE_HEADER in (headers or {}) else limit


def too_large(data: bytes, msgpack: bool, raw: dict[str, Any], limit: int) -> str | None:
    """The API server's 'request entity too large', for an object ksched could not
    carry or write back. Published JSON stands for ksched's JSON of it, unless its
    non-ASCII text may grow when escaped; msgpack input is measured as JSON (which
    also refuses what JSON cannot hold, such as binary values)."""
    size = len(data)
    if msgpack or (size * 6 > limit and not data.isascii()):
        try:
            size = max(size, len(dump_json(raw)))
        except (TypeError, ValueError) as err:
            return f"the object cannot be written as JSON: {err}"
    if size <= limit:
        return None
    return (
        f"Request entity too large: the object is {size} bytes, limit is {limit} "
        f"(the NATS server's max_payload less {OBJECT_ROOM} bytes for ksched's own writes)"
    )


@dataclass
class Outbound:
    """Packed queue and cache items of one batch, each with the index of its event."""

    limit: int  # the largest message body
    queue_shards: int = 1
    queue: list[bytes] = field(default_factory=list)
    queue_from: list[int] = field(default_factory=list)
    queue_to: list[int | None] = field(default_factory=list)  # its shard; None: every one
    cache: list[bytes] = field(default_factory=list)
    cache_from: list[int] = field(default_factory=list)
    assigned_pod_deletes: int = 0

    def add(
        self,
        source: int,
        to_queue: list[QueueEvent],
        to_cache: list[CacheEvent],
        packed: PackedObject | None = None,
    ) -> None:
        """Take one event's items; ValueError (with the reason) if they cannot travel.
        `packed` is the event's object with its packing (ClusterEvent.packed): an item
        carrying that object carries those bytes, packed once."""
        try:
            queue = [self._pack_queue_item(e, packed) for e in to_queue]
            cache = [_pack(e, packed) for e in to_cache]
        except (TypeError, ValueError, OverflowError) as err:  # msgpack raises these
            raise ValueError(f"cannot be encoded for ksched's internal messages: {err}") from None
        room = item_limit(self.limit)
        for item in queue:
            if len(item) > room:
                raise ValueError(f"too large for ksched's internal messages ({self.limit} bytes)")
        for item in cache:
            if len(item) > room:
                raise ValueError(f"too large for ksched's internal messages ({self.limit} bytes)")
        self.queue += queue
        self.queue_from += [source] * len(queue)
        if self.queue_shards == 1:
            self.queue_to += [0] * len(queue)  # _queue_shard's answer for every item
        else:
            self.queue_to += [self._queue_shard(e) for e in to_queue]
        if cache:
            self.cache += cache
            self.cache_from += [source] * len(cache)
        for e in to_queue:
            if _is_assigned_pod_delete(e):
                self.assigned_pod_deletes += 1

    def _pack_queue_item(self, event: QueueEvent, packed: PackedObject | None) -> bytes:
        data = _pack(event, packed)
        if len(data) > item_limit(self.limit) and event.get("op") == "move":
            # A large node's old and new versions together may not fit where either
            # alone does: the hints then judge the event without its objects.
            data = pack({**event, "old": None, "new": None})
        return data

    def _queue_shard(self, event: QueueEvent) -> int | None:
        """A pod's own queue shard; None for a move, which every shard applies."""
        if self.queue_shards == 1:
            return 0
        if event.get("op") == "move" or "key" not in event:
            return None
        return queue_owner(self.queue_shards, event["key"], event.get("gang", ""))

    def queue_for(self, shard: int) -> tuple[list[bytes], list[int]]:
        """The items queue shard `shard` gets, and the index of each one's event."""
        if self.queue_shards == 1:
            return self.queue, self.queue_from
        picked = [i for i, to in enumerate(self.queue_to) if to is None or to == shard]
        return [self.queue[i] for i in picked], [self.queue_from[i] for i in picked]

    def queue_chunks(
        self, head: dict[str, Any], through: int | None, shard: int = 0
    ) -> list[Chunk]:
        """Queue shard `shard`'s messages; none when it gets neither an item nor
        `through` (None: not its lane's to hear)."""
        return self.queue_messages(head, through, shard)[0]

    def queue_messages(
        self, head: dict[str, Any], through: int | None, shard: int = 0
    ) -> tuple[list[Chunk], list[int]]:
        """`queue_chunks`, with the index of each item's event (`queue_for`)."""
        items, sources = self.queue_for(shard)
        if through is None:
            return pack_chunks(items, "events", self.limit, head), sources
        return _chunks(items, self.limit, head, through), sources

    def cache_chunks(self, head: dict[str, Any], through: int) -> list[Chunk]:
        return _chunks(self.cache, self.limit, head, through)


def _chunks(items: list[bytes], limit: int, head: dict[str, Any], through: int) -> list[Chunk]:
    """The items' messages, the last naming `through` (one without items, if none)."""
    last_head = {**head, "through": through}
    chunks = pack_chunks(items, "events", limit - THROUGH_ROOM, head)
    if not chunks:
        return [Chunk(pack({**last_head, "events": []}), 0)]
    tail = items[len(items) - chunks[-1].items :]
    return chunks[:-1] + pack_chunks(tail, "events", limit, last_head)


def _pack(item: QueueEvent | CacheEvent, packed: PackedObject | None) -> bytes:
    """The item packed, the event's object inside it as packed already."""
    if packed is not None:
        obj, data = packed
        for key, value in item.items():
            if value is obj:
                return pack_with(item, key, data)
    return pack(item)


def _is_assigned_pod_delete(e: QueueEvent) -> bool:
    return e["op"] == "move" and e.get("resource") == ASSIGNED_POD and e.get("action") == DELETE
