"""Internal batches split to fit the server's max payload (shared.wire.pack_chunks)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.wire import TooLarge, pack, pack_chunks, pack_with, unpack


def test_items_are_split_in_order_and_every_message_fits() -> None:
    items = [
        {"op": "upsert", "key": f"default/p-{i}", "pod": "x" * (i * 37 % 900)} for i in range(200)
    ]
    chunks = pack_chunks([pack(i) for i in items], "events", 4096, {"epoch": 7})
    assert len(chunks) > 1
    assert all(len(c.data) <= 4096 for c in chunks)
    decoded = [unpack(c.data) for c in chunks]
    assert all(d["epoch"] == 7 for d in decoded)
    assert [c.items for c in chunks] == [len(d["events"]) for d in decoded]
    assert [e for d in decoded for e in d["events"]] == items


def test_one_message_when_everything_fits_and_none_for_nothing() -> None:
    (chunk,) = pack_chunks([pack(1), pack(2)], "reports", 1 << 20, {"move": "NodeAdd"})
    assert (unpack(chunk.data), chunk.items) == ({"move": "NodeAdd", "reports": [1, 2]}, 2)
    assert pack_chunks([], "reports", 1 << 20, {"move": "NodeAdd"}) == []


def test_an_item_larger_than_any_message_is_refused() -> None:
    with pytest.raises(TooLarge, match="exceeds the 1000-byte message limit"):
        pack_chunks([pack("a"), pack("b" * 2000)], "events", 1000)


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3000), max_size=60),
    limit=st.integers(min_value=3100, max_value=20_000),
)
def test_any_mix_of_sizes_fits_and_round_trips(sizes: list[int], limit: int) -> None:
    items = [b"y" * n for n in sizes]
    chunks = pack_chunks([pack(i) for i in items], "requests", limit, {"epoch": 2**40})
    assert all(len(c.data) <= limit for c in chunks)
    assert [i for c in chunks for i in unpack(c.data)["requests"]] == items
    assert sum(c.items for c in chunks) == len(items)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=5),
        st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
        min_size=1,
        max_size=20,
    ),
    st.data(),
)
def test_an_item_packed_around_its_packed_object_reads_as_packed_whole(
    item: dict[str, object], data: st.DataObject
) -> None:
    field = data.draw(st.sampled_from(sorted(item)))
    obj = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    whole = {**item, field: obj}
    assert unpack(pack_with(whole, field, pack(obj))) == whole
