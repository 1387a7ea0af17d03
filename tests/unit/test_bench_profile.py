"""The bench's profile summary (py-spy's collapsed stacks) and its per-pod counters."""

from __future__ import annotations

import pytest

from shared.tools.bench.limits import Limit
from shared.tools.bench.profile import categories, category, top_self_frames
from shared.tools.bench.traffic import per_pod

# Three stacks as py-spy writes them (root first, leaf last, then a count).
COLLAPSED = "\n".join(
    [
        "<module> (services/queue/__main__.py:3);run (asyncio/runners.py:190);"
        "EpollSelector.select (selectors.py:468) 50",
        "<module> (services/queue/__main__.py:3);on_pop (services/queue/service.py:80);"
        "execute (redis/asyncio/client.py:10);write (asyncio/selector_events.py:1033) 30",
        "<module> (services/queue/__main__.py:3);on_pop (services/queue/service.py:81);"
        "unpack (shared/wire.py:40) 15",
        "<module> (services/queue/__main__.py:3);on_pop (services/queue/service.py:82) 5",
        "not a stack line",
    ]
)


def test_idle_samples_are_left_out_and_self_time_is_per_function() -> None:
    top = top_self_frames(COLLAPSED)
    assert [(f.frame, f.samples) for f in top] == [
        ("write (asyncio/selector_events.py)", 30),
        ("unpack (shared/wire.py)", 15),
        ("on_pop (services/queue/service.py)", 5),
    ]
    assert top[0].share == pytest.approx(0.6)


def test_socket_writes_count_for_the_client_that_asked() -> None:
    frames = ["on_pop (services/queue/service.py)", "execute (redis/asyncio/client.py)"]
    assert category([*frames, "write (asyncio/selector_events.py)"]).startswith("redis-py")
    assert category(["Handle._run (asyncio/events.py)"]) == "event loop"
    assert categories(COLLAPSED) == pytest.approx(
        {"redis-py (incl. its socket writes)": 0.6, "msgpack": 0.3, "ksched code": 0.1}
    )


def test_per_pod_counts_only_what_moved() -> None:
    before = {"redis evalsha": 10, "js KSCHED_CLUSTER": 100, "redis ping": 3}
    after = {"redis evalsha": 30, "js KSCHED_CLUSTER": 300, "redis ping": 3, "redis get": 50}
    assert per_pod(before, after, 100) == {
        "js KSCHED_CLUSTER": 2.0,
        "redis evalsha": 0.2,
        "redis get": 0.5,
    }


def test_a_servers_ceiling_per_core_is_the_inverse_of_its_cpu_per_op() -> None:
    limit = Limit("x", ops=200_000, seconds=10.0, server_cpu=2.0)
    assert limit.rate == 20_000
    assert limit.server_us_per_op == pytest.approx(10.0)
    assert limit.per_core == pytest.approx(100_000)
