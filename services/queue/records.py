"""The queue's encodings on its per-pod path, built from each pod packed once per
version (QueuedPodInfo.packed_raw) rather than packed again at every change:

- a pod's Redis record (`pack_record`): a msgpack array, the packed pod first (as
  bytes) and then the state fields in RECORD_ORDER. A pod's record is written at
  each change of its state (added, popped, assumed, failed...), its object only at a
  new version: written as bytes, the object costs a copy, not a walk. `record_of`
  reads it back as QueuedPodInfo.from_record's dict, and reads the dict records
  written before (their pod object inline) as they are.
- the pop reply (`pop_reply`): each QueuedPod packed without its pod, the packed pod
  spliced in as the map's last entry. The worker unpacks the same message as before.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import msgpack

from services.queue.podinfo import QueuedPodInfo
from shared.wire import Packed, pack, unpack

# The state fields of a record, after the packed pod, in this order. New fields go at
# the end: a reader zips what it knows and leaves the rest at their defaults.
RECORD_ORDER = (
    "key",
    "uid",
    "seq",
    "priority",
    "timestamp",
    "initial_attempt_timestamp",
    "attempts",
    "where",
    "backoff_expiry",
    "cycle",
    "lease_deadline",
    "unschedulable_plugins",
    "message",
    "raw_seq",
    "nominated_node",
    "victims",
    "size",
)
_STATE = operator.attrgetter(*RECORD_ORDER)
_POD = pack("pod")
_FIXMAP = 0x80  # msgpack's map of up to 15 entries: one header byte, 0x80 | count
_FIXMAP_MAX = 15


def pack_record(qpi: QueuedPodInfo) -> bytes:
    """The pod's Redis record (see the module docstring)."""
    return pack((qpi.packed_raw(), *_STATE(qpi)))


def record_of(data: bytes | str) -> dict[str, Any]:
    """A record as QueuedPodInfo.from_record reads it, from either form."""
    rec = unpack(data)
    if isinstance(rec, dict):  # written before records carried the pod packed
        return rec
    if not isinstance(rec, list) or not rec or not isinstance(rec[0], bytes):
        raise ValueError(f"not a queue record: {type(rec).__name__}")
    state = dict(zip(RECORD_ORDER, rec[1:], strict=False))
    return {**state, "raw": unpack(rec[0])}


def wire_pod(qpi: QueuedPodInfo, wired: dict[str, Any]) -> bytes:
    """`wired` (a QueuedPod but for its "pod") packed, with the pod spliced in."""
    head = pack(wired)
    count = head[0] - _FIXMAP
    if not 0 <= count < _FIXMAP_MAX:  # a QueuedPod has about ten fields
        return pack({**wired, "pod": qpi.raw})
    return bytes((head[0] + 1,)) + head[1:] + _POD + qpi.packed_raw()


def pop_reply(pods: Iterable[bytes], count: int, rest: dict[str, Any]) -> Packed:
    """{"pods": [...the `count` packed pods...], **rest}, packed."""
    packer = msgpack.Packer(use_bin_type=True)
    parts = [packer.pack_map_header(len(rest) + 1), pack("pods"), packer.pack_array_header(count)]
    parts += pods
    for key, value in rest.items():
        parts += (pack(key), pack(value))
    return Packed(b"".join(parts))
