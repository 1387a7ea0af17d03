"""`ksched bench` end to end on a tiny cluster: every workload runs, is audited, and
leaves its JSON, the summary and the charts, with the run's calibration and baseline
beside the figures and nothing of an earlier run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.tools.bench.workloads import WORKLOADS
from shared.tools.cli.main import main

pytestmark = pytest.mark.e2e


# ten stacks one after the other (eight workloads, a scaling run and a 2-shard run), two
# calibrations, the cycle alone and the baseline: longer than the default 120 s when
# other work shares the cores
@pytest.mark.timeout(600)
def test_bench_runs_every_workload_and_writes_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "SchedulingPodAffinity-3w1b.json"  # an earlier run's, other code
    stale.write_text("{}")
    args = (
        f"--nodes 12 --scale 0.01 --scaling 1 2 --model-shards 2 --model-nodes 24 "
        f"--paced-pods 20 --timeout 60 --out {tmp_path}"
    )
    code = main(["bench", *args.split()])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out + captured.err  # the CLI's one-line error is on stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    runs = {r["workload"]: r for r in summary["runs"]}
    assert set(runs) == set(WORKLOADS)
    for name, run in runs.items():
        assert run["bound"] == run["measured_pods"], name
        assert run["overcommitted_nodes"] == run["violated_constraints"] == 0, name
        assert run["double_bindings"] == 0, name
        roles = {"watcher", "queue", "cache", "worker", "binder", "nats-server", "redis-server"}
        assert roles < set(run["cpu_seconds"]) and min(run["cpu_seconds"].values()) >= 0, name
        assert min(run["peak_rss_mb"][role] for role in roles) > 1, name
        assert run["latency_ms"]["p99"] >= run["latency_ms"]["p50"] > 0, name
        assert (tmp_path / f"{name}-2w1b.json").exists()
    assert sum(runs["SchedulingBasic"]["cpu_seconds"].values()) > 0
    assert runs["SchedulingBasic"]["paced"]["pods"] == 20
    assert [s["workers"] for s in summary["scaling"]] == [1, 2]
    assert summary["baseline"]["bound"] == runs["SchedulingBasic"]["measured_pods"]
    assert summary["calibration"]["before"] > 0 and summary["calibration"]["after"] > 0
    assert not stale.exists()
    for name in runs:
        written = json.loads((tmp_path / f"{name}-2w1b.json").read_text())
        assert written["calibration"] == summary["calibration"], name
        assert written["baseline_average"] == summary["baseline"].get("throughput_Average")
    # PreemptionAsync: the preemptors, created every 200 ms beside the measured pods, are
    # reported as a second figure; PreemptionBasic measures the preemptors themselves
    churn = runs["PreemptionAsync"]["churn"]
    assert churn["created"] >= 1 and 0 <= churn["bound"] <= churn["created"]
    assert runs["PreemptionBasic"]["threshold"] == 0 and runs["PreemptionBasic"]["ratio"] is None
    assert "distributed / baseline" in out and "calibration" in out
    assert (tmp_path / "throughput.png").stat().st_size > 1000
    assert (tmp_path / "scaling.png").exists()
    assert "ratio" in out and "CPU seconds per 1000 bound pods" in out
    # the cost model, fitted to the scaling runs and a 2-shard run, projected to 24 nodes
    model = summary["costmodel"]
    assert model["shards"] == [1, 2] and set(model["cycle_cpu_ms"]) == {"12", "24"}
    assert [s["label"].split(" nodes")[0] for s in model["scenarios"]] == ["12", "24"]
    assert all(s["ten_machines"] > 0 for s in model["scenarios"]), model
    assert (tmp_path / "SchedulingBasic-2w1b2s.json").exists()
    assert (tmp_path / "costmodel.png").exists() and "cost model (fitted to" in out
