"""`ksched bench-scale` end to end, on a tiny cluster: it runs, audits, and reports."""

from __future__ import annotations

import json

import pytest

from shared.tools.cli.main import main

pytestmark = pytest.mark.e2e


def test_bench_scale_reports_every_run_and_the_refresh_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = "--nodes 6 --pods 40 --anti-pods 8 --anti-group 4 --spread-pods 9 --spread-group 3"
    code = main(["bench-scale", *args.split(), "--workers", "2", "--refresh-nodes", "10", "--json"])
    out = capsys.readouterr().out
    report = json.loads(out[out.index("\n{") :])
    assert code == 0, out
    runs = {r["run"]: r for r in report["runs"]}
    assert set(runs) == {"default", "anti-affinity", "spread"}
    for run in runs.values():
        assert run["bound"] + run["unschedulable"] == run["pods"]
        assert run["overcommitted_nodes"] == run["violated_constraints"] == 0
        assert run["double_bindings"] == 0
    assert runs["default"]["bound"] == 40
    assert [r["case"] for r in report["refresh"]] == ["delta 1", "delta 10 (all)", "cold (all)"]
    assert "pods/s" in out and "refresh p50" in out
