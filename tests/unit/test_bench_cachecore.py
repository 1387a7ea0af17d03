"""`python -m shared.tools.bench.cachecore`: the cache's pure parts fed without servers."""

from __future__ import annotations

from services.cache.podstate import ADDED
from shared.tools.bench.cachecore import PHASES, Core, bound_pod, run
from shared.tools.synthetic import make_pod
from shared.wire import unpack


def test_a_round_assumes_writes_publishes_and_confirms() -> None:
    core = Core()
    raw = make_pod("a")
    core.assume(raw, "node-1", 1)
    core.write()
    (message,) = core.sink.sent  # the first write after the takeover sent nothing
    assert [entry[0] for entry in unpack(message)["n"]] == ["node-1"]
    core.bound(bound_pod(raw, "node-1"), "node-1", 2)
    assert core.cache.pods["default/a"].state == ADDED
    assert core.cache.nodes["node-1"].num_pods == 1


def test_every_phase_is_timed() -> None:
    per_pod = run(pods=120, batch=60)
    assert set(per_pod) == set(PHASES)
