"""Stage times: the Ksched-Stages header, and `ksched bench-latency`'s per-pod stages,
percentiles and stage table."""

from __future__ import annotations

import pytest

from shared import stages
from shared.tools.bench.latency import (
    TOTAL,
    format_stage_table,
    percentiles,
    pod_stages,
    stage_table,
)

T0 = 1_700_000_000.0  # a wall-clock second

ALL_HOPS = {hop: T0 + (i + 1) / 1000 for i, hop in enumerate(stages.HOPS)}  # 1 ms apart


def test_the_header_round_trips_in_hop_order_at_microseconds() -> None:
    stamps = {stages.BINDING: T0 + 0.0200004, stages.WATCHED: T0 + 0.001}
    header = stages.encode(stamps)
    assert header == f"watched={T0 + 0.001:.6f},binding={T0 + 0.02:.6f}"
    assert stages.decode(header) == pytest.approx(stamps, abs=1e-6)


def test_a_malformed_or_unknown_item_is_skipped() -> None:
    header = f"watched={T0},routed=soon,nonsense={T0},queued,popped={T0 + 1}"
    assert stages.decode(header) == {stages.WATCHED: T0, stages.POPPED: T0 + 1}
    assert stages.decode("") == {}


def test_percentiles_take_scheduler_perfs_index_and_the_max() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # unsorted
    assert percentiles(values) == {"p50": 50.0, "p90": 90.0, "p99": 99.0, "max": 100.0}
    assert percentiles([7.0]) == {"p50": 7.0, "p90": 7.0, "p99": 7.0, "max": 7.0}
    assert percentiles([]) == {}


def test_a_pod_with_every_stamp_has_every_stage_and_they_add_up_to_the_total() -> None:
    bound = T0 + 0.015
    out = pod_stages(T0, ALL_HOPS, bound)
    assert list(out) == [
        "published->watched",
        "watched->routed",
        "routed->queued",
        "queued->popped",
        "popped->picked",
        "picked->scheduled",
        "scheduled->assumed",
        "assumed->bind_requested",
        "bind_requested->binding",
        "binding->bound",
        TOTAL,
    ]
    assert out["published->watched"] == pytest.approx(1.0, abs=1e-3)
    assert out["binding->bound"] == pytest.approx(15 - len(stages.HOPS), abs=1e-3)
    assert out[TOTAL] == pytest.approx(15.0, abs=1e-3)
    assert sum(v for k, v in out.items() if k != TOTAL) == pytest.approx(out[TOTAL], abs=1e-3)


def test_a_missing_stamp_merges_its_two_stages_under_their_own_name() -> None:
    stamps = {k: v for k, v in ALL_HOPS.items() if k != stages.QUEUED}  # a restored queue
    out = pod_stages(T0, stamps, T0 + 0.015)
    assert "routed->queued" not in out and "queued->popped" not in out
    assert out["routed->popped"] == pytest.approx(2.0, abs=1e-3)
    assert pod_stages(T0, {}, T0 + 0.004) == {"published->bound": pytest.approx(4.0, abs=1e-3)}


def test_the_table_counts_each_stage_over_the_pods_that_have_it_in_pipeline_order() -> None:
    late = {**ALL_HOPS, stages.POPPED: ALL_HOPS[stages.POPPED] + 0.1}  # 100 ms in activeQ
    late[stages.PICKED] += 0.1
    restored = {k: v for k, v in ALL_HOPS.items() if k != stages.QUEUED}
    pods = [pod_stages(T0, s, T0 + 0.2) for s in (ALL_HOPS, late, restored)]
    table = stage_table(pods)
    assert next(iter(table)) == "published->watched" and list(table)[-1] == TOTAL
    assert list(table).index("routed->popped") < list(table).index("popped->picked")
    assert table["queued->popped"]["pods"] == 2 and table["routed->popped"]["pods"] == 1
    assert table["queued->popped"]["max"] == pytest.approx(101.0, abs=1e-3)
    assert table["queued->popped"]["p50"] == pytest.approx(1.0, abs=1e-3)
    total = {"p50": 200.0, "p90": 200.0, "p99": 200.0, "max": 200.0, "pods": 3}
    assert table[TOTAL] == pytest.approx(total, abs=1e-3)
    printed = format_stage_table(table)
    assert "waits in activeQ for a worker's pop" in printed
    assert printed.splitlines()[-1].startswith(TOTAL)
