"""`make chaos`, short: 1000 pods on 100 nodes under kill -9 of random replicas every
2-6 s, a Redis restart and a NATS restart; the four invariants hold afterwards. Also
with 2 watcher and queue shards (docs/scale.md §4), each with its leader and standby:
the monkey kills shards' leaders too, and the run checks that every shard ended with
a leader and that the pods went through every queue shard."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from shared.tools.chaos import ChaosConfig, chaos_stack, run_chaos
from shared.tools.devstack import running

pytestmark = pytest.mark.e2e

SHORT = ChaosConfig(pods=1000, nodes=100, workers=3, binders=2, duration=35, settle_timeout=90)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("shards", [1, 2], ids=lambda n: f"{n}-shards")
async def test_invariants_hold_under_chaos(tmp_path: Path, shards: int) -> None:
    cfg = replace(SHORT, shards=shards)
    with running(chaos_stack(tmp_path / "stack", cfg)) as stack:
        report = await run_chaos(stack, cfg)
    print("\n".join(report.lines()))
    assert sum(report.kills.values()) >= 5
    assert len(report.server_restarts) == 2
    assert not report.lost, report.lost[:10]
    assert not report.double_bound, report.double_bound[:10]
    assert report.audit.ok, report.audit.lines()[:10]
    assert report.bound + report.pending == cfg.pods
    assert report.after_chaos == (20, 20)
    if shards > 1:
        assert report.shards is not None and report.shards.ok, report.shards
