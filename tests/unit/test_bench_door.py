"""`python -m shared.tools.bench.door`: the watcher's handler fed without NATS."""

from __future__ import annotations

from collections import Counter

from shared.tools.bench.door import events, handle, watcher


def test_every_event_of_the_door_bench_is_accepted_and_routed() -> None:
    w, msgs = watcher(), events(3)
    handle(w, msgs, batch=2)  # raises on a refused event
    counted: Counter[tuple[str, str]] = Counter()
    w2 = watcher()
    routed = [w2._decode_and_route(m, 1 << 20, counted) for m in events(2)]
    assert counted == {("pod", "ADDED"): 2, ("pod", "MODIFIED"): 2}
    pending, bound = routed[0], routed[2]
    assert not isinstance(pending, str) and not isinstance(bound, str)
    assert [e["op"] for e in pending[0]] == ["upsert"] and pending[1] == []
    assert [e["op"] for e in bound[1]] == ["pod_upsert"]
