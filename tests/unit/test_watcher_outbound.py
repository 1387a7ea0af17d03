"""The watcher's outbound batch: items packed one by one, refused alone, sized to fit."""

from __future__ import annotations

import pytest

from services.watcher.outbound import OBJECT_ROOM, Outbound, object_limit, too_large
from shared.api.events import decode_cluster_event
from shared.framework.events import EVENT_NODE_ADD
from shared.routing import move
from shared.tools.synthetic import make_pod
from shared.wire import dump_json, pack, unpack


def test_published_json_stands_for_the_object_unless_it_may_grow() -> None:
    raw = {"metadata": {"name": "p", "labels": {"a": "b"}}}
    data = dump_json({"type": "ADDED", "object": raw})
    assert too_large(data, False, raw, len(data)) is None
    reason = too_large(data, False, raw, len(data) - 1)
    assert reason is not None and reason.startswith("Request entity too large")
    assert f"the object is {len(data)} bytes, limit is {len(data) - 1}" in reason
    # non-ASCII text is escaped by ksched's JSON: six bytes for each of these characters
    wide = {"metadata": {"name": "p", "annotations": {"a": "雪" * 1000}}}
    published = json_utf8({"type": "ADDED", "object": wide})
    assert too_large(published, False, wide, 5000) is not None
    assert too_large(published, False, wide, 7000) is None


def json_utf8(obj: object) -> bytes:
    import json

    return json.dumps(obj, ensure_ascii=False).encode()


def test_msgpack_input_is_measured_as_json_and_binary_values_are_refused() -> None:
    raw = {"metadata": {"name": "p"}, "blob": b"\x00\x01"}
    reason = too_large(pack({"object": raw}), True, raw, 1 << 20)
    assert reason is not None and "cannot be written as JSON" in reason


def test_the_object_limit_leaves_room_for_ksched_s_own_fields() -> None:
    assert object_limit(1 << 20) == (1 << 20) - OBJECT_ROOM


def test_an_unencodable_event_is_refused_alone() -> None:
    out = Outbound(1 << 20)
    out.add(0, [{"op": "upsert", "key": "default/a", "pod": {"x": 1}}], [])
    with pytest.raises(ValueError, match="cannot be encoded"):
        out.add(1, [{"op": "upsert", "key": "default/b", "pod": {"x": 2**64}}], [])
    out.add(2, [], [{"op": "pod_upsert", "name": "default/c", "pod": {"y": 1}}])
    assert (out.queue_from, out.cache_from) == ([0], [2])


def test_an_item_too_large_for_any_message_is_refused() -> None:
    out = Outbound(10_000)
    with pytest.raises(ValueError, match="too large"):
        out.add(0, [], [{"op": "node_upsert", "name": "n", "node": {"x": "y" * 20_000}}])
    assert out.cache == []


def test_a_move_too_large_with_both_versions_travels_without_them() -> None:
    big = {"metadata": {"name": "n"}, "status": {"images": ["i" * 6_000]}}
    out = Outbound(10_000)
    out.add(0, [move(EVENT_NODE_ADD, old=big, new=big)], [])
    (chunk,) = out.queue_chunks({"epoch": 1}, 7)
    (event,) = unpack(chunk.data)["events"]
    assert (event["old"], event["new"], event["resource"]) == (None, None, "Node")


def test_chunks_map_back_to_the_events_they_came_from() -> None:
    out = Outbound(8_000)
    for i in range(30):
        out.add(i, [{"op": "upsert", "key": f"k{i}", "pod": {"p": "z" * 1000}}], [])
    chunks = out.queue_chunks({"epoch": 3}, 99)
    assert len(chunks) > 1 and all(len(c.data) <= 8_000 for c in chunks)
    offset = 0
    for c in chunks:
        keys = [e["key"] for e in unpack(c.data)["events"]]
        assert keys == [f"k{out.queue_from[offset + j]}" for j in range(c.items)]
        offset += c.items
    assert offset == 30


@pytest.mark.parametrize("pods", [0, 1, 7, 30])
def test_only_a_batch_s_last_message_names_where_it_ends(pods: int) -> None:
    """A receiver applies `through` once it applied the message: only the last one may
    say the whole batch is in; a receiver with no item still hears it."""
    out = Outbound(8_000)
    for i in range(pods):
        out.add(i, [{"op": "upsert", "key": f"k{i}", "pod": {"p": "z" * 1000}}], [])
    bodies = [unpack(c.data) for c in out.queue_chunks({"epoch": 3}, 4711)]
    assert [b.get("through") for b in bodies] == [None] * (len(bodies) - 1) + [4711]
    assert sum(len(b["events"]) for b in bodies) == pods
    assert all(b["epoch"] == 3 for b in bodies)


def test_an_item_carrying_the_event_s_object_carries_its_packing() -> None:
    """The door packed the object already (ClusterEvent.packed): the items carry those
    bytes; an item with another object (admission replaced it) is packed whole."""
    raw = make_pod("p", node="n1")
    ev = decode_cluster_event(
        "ksched.cluster.pods.default.p", dump_json({"type": "ADDED", "object": raw}), None, 7
    )
    assert ev.packed is not None and ev.packed == (ev.raw, pack(ev.raw))
    marked = (ev.raw, ev.packed[1].replace(b"n1", b"n2"))  # to see which bytes travel
    admitted = {**ev.raw, "spec": {**ev.raw["spec"], "priority": 0}}
    out = Outbound(1 << 20)
    out.add(
        0,
        [{"op": "upsert", "key": "default/p", "pod": ev.raw}],
        [{"op": "pod_upsert", "name": "default/p", "pod": admitted}],
        marked,
    )
    assert unpack(out.queue[0]) == {"op": "upsert", "key": "default/p", "pod": unpack(marked[1])}
    assert unpack(out.cache[0])["pod"] == admitted
