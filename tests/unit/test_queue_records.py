"""The queue's per-pod encodings (services/queue/records.py): Redis records and the pop
reply carry each pod object packed once per version, and read back as before."""

from __future__ import annotations

import msgpack
import pytest

from services.queue.podinfo import BINDING, QueuedPodInfo
from services.queue.records import RECORD_ORDER, pack_record, pop_reply, record_of, wire_pod
from shared.wire import Packed, pack, unpack
from tests.unit.test_queue import pod


def queued(name: str = "a") -> QueuedPodInfo:
    qpi = QueuedPodInfo(f"default/{name}", f"uid-{name}", pod(name, priority=3), 7, 3, 1000.0)
    qpi.attempts, qpi.cycle, qpi.where = 2, 41, BINDING
    qpi.initial_attempt_timestamp, qpi.lease_deadline = 999.5, 1120.0
    qpi.unschedulable_plugins, qpi.message = ["NodeResourcesFit"], "0/3 nodes"
    qpi.nominated_node, qpi.victims, qpi.size = "n1", ["default/v"], 321
    return qpi


def test_every_persisted_field_is_in_the_record() -> None:
    persisted = set(queued().to_record()) - {"raw"}
    assert set(RECORD_ORDER) == persisted


def test_record_reads_back_as_the_dict_record() -> None:
    qpi = queued()
    rec = record_of(pack_record(qpi))
    assert rec == unpack(pack(qpi.to_record()))
    assert QueuedPodInfo.from_record(rec) == qpi


def test_records_written_before_read_as_they_are() -> None:
    qpi = queued()
    assert QueuedPodInfo.from_record(record_of(pack(qpi.to_record()))) == qpi


def test_a_record_with_fields_added_later_or_missing_reads() -> None:
    qpi = queued()
    longer = [*unpack(pack_record(qpi)), "a future field"]
    assert QueuedPodInfo.from_record(record_of(pack(longer))) == qpi
    shorter = unpack(pack_record(qpi))[: 1 + RECORD_ORDER.index("timestamp") + 1]
    back = QueuedPodInfo.from_record(record_of(pack(shorter)))
    assert (back.key, back.timestamp, back.attempts, back.where) == (qpi.key, 1000.0, 0, "active")


def test_not_a_record_is_refused() -> None:
    with pytest.raises(ValueError):
        record_of(pack([1, 2]))


def test_the_pod_is_packed_once_per_version() -> None:
    qpi = queued()
    first = qpi.packed_raw()
    assert qpi.packed_raw() is first
    qpi.raw = pod("a", priority=4)  # a new version: another object
    assert qpi.packed_raw() is not first
    assert unpack(qpi.packed_raw()) == qpi.raw


def test_pop_reply_unpacks_as_the_dict_reply() -> None:
    pods = [queued("a"), queued("b")]
    wired = [{"key": p.key, "uid": p.uid, "seq": p.seq, "stamps": {"queued": 1.5}} for p in pods]
    data = pop_reply(
        (wire_pod(p, w) for p, w in zip(pods, wired, strict=True)),
        len(pods),
        {"nominated_version": 3, "popped": 12.5},
    )
    assert isinstance(data, Packed)
    expected = {
        "pods": [{**w, "pod": p.raw} for p, w in zip(pods, wired, strict=True)],
        "nominated_version": 3,
        "popped": 12.5,
    }
    assert msgpack.unpackb(data) == expected
    assert data == pack(expected)  # byte for byte what packing the dict gives
    assert unpack(pop_reply([], 0, {"nominated_version": 0})) == {
        "pods": [],
        "nominated_version": 0,
    }


def test_a_wide_pod_entry_is_packed_whole() -> None:
    qpi = queued()
    wide = {f"f{i}": i for i in range(15)}
    assert unpack(wire_pod(qpi, wide)) == {**wide, "pod": qpi.raw}
