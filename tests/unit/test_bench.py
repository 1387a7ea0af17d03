"""`ksched bench`'s pure parts: workload objects, /proc parsing, percentiles, report."""

from __future__ import annotations

import os
from pathlib import Path

from shared.api.models import Node, Pod
from shared.api.quantity import parse_quantity
from shared.tools.bench.report import clear_previous, machine_lines, problems, table
from shared.tools.bench.resources import Usage, cpu_delta, parse_stat_cpu, parse_status_hwm, usage
from shared.tools.bench.runner import BenchResult, percentiles
from shared.tools.bench.workloads import (
    INIT_NAMESPACE,
    MEASURED_NAMESPACE,
    WORKLOADS,
    bench_node,
)
from shared.tools.synthetic import HOSTNAME, ZONE


def test_every_workload_is_sized_as_the_issue_states() -> None:
    full = {
        name: (w.full.nodes, w.full.init_pods, w.full.measured_pods, w.threshold)
        for name, w in WORKLOADS.items()
    }
    assert full == {
        "SchedulingBasic": (5000, 1000, 10000, 680),
        "SchedulingPodAntiAffinity": (5000, 1000, 2000, 60),
        "TopologySpreading": (5000, 5000, 5000, 460),
        "SchedulingNodeAffinity": (5000, 5000, 10000, 220),
        "Unschedulable": (5000, 100, 10000, 590),
        "SchedulingWithMixedChurn": (5000, 0, 10000, 710),
        "PreemptionBasic": (1000, 4000, 1000, 0),  # upstream's largest; it sets no threshold
        "PreemptionAsync": (5000, 20000, 5000, 570),
    }
    assert all(w.short.nodes == 500 for w in WORKLOADS.values())


def _cpu(pod: dict) -> float:
    return float(parse_quantity(pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]))


def test_preemption_async_measures_default_pods_while_preemptors_arrive() -> None:
    """scheduler_perf's PreemptionAsync: four 900m low-priority pods per node, then 100m
    default pods measured while 3-cpu priority-10 preemptors are created every 200 ms."""
    w = WORKLOADS["PreemptionAsync"]
    for size in (w.full, w.short):
        assert size.init_pods == 4 * size.nodes
    (low,) = w.init_objects(type(w.full)(1, 1, 0))
    assert (_cpu(low), low["spec"].get("priority")) == (0.9, None)
    assert 4 * _cpu(low) <= 4 < 5 * _cpu(low)  # four fill a 4-cpu node, a fifth does not fit
    (measured,) = w.measured_objects(type(w.full)(1, 0, 1))
    assert (_cpu(measured), measured["spec"].get("priority")) == (0.1, None)
    assert w.churn is not None and (w.churn.mode, w.churn.interval) == ("create", 0.2)
    preemptors = w.churn.objects(0) + w.churn.objects(1)
    assert [(p["kind"], _cpu(p), p["spec"]["priority"]) for p in preemptors] == [
        ("Pod", 3.0, 10),
        ("Pod", 3.0, 10),
    ]
    assert preemptors[0]["metadata"]["name"] != preemptors[1]["metadata"]["name"]
    # a preemptor fits next to one low pod only: it must evict three of the four
    assert _cpu(low) + 3 <= 4 < 2 * _cpu(low) + 3
    assert not w.measured_bind_late


def test_preemption_basic_measures_the_preemptors() -> None:
    w = WORKLOADS["PreemptionBasic"]
    assert (w.full.nodes, w.full.init_pods, w.full.measured_pods) == (1000, 4000, 1000)
    assert w.short.init_pods == 4 * w.short.nodes
    (pod,) = w.measured_objects(type(w.full)(1, 0, 1))
    assert (_cpu(pod), pod["spec"]["priority"]) == (3.0, 10)
    assert _cpu(w.init_objects(type(w.full)(1, 1, 0))[0]) == 0.9
    assert w.churn is None and w.measured_bind_late


def test_unschedulable_and_churn_follow_upstream() -> None:
    """Unschedulable: default init pods, 9-cpu priority-10 pods every 200 ms (they try
    preemption and fail); MixedChurn: a node of capacity pods 0 and such a pod recreated
    every second."""
    w = WORKLOADS["Unschedulable"]
    assert _cpu(w.init_objects(w.short)[0]) == 0.1
    assert w.churn is not None and (w.churn.mode, w.churn.interval) == ("create", 0.2)
    (pod,) = w.churn.objects(3)
    assert (_cpu(pod), pod["spec"]["priority"]) == (9.0, 10)
    churn = WORKLOADS["SchedulingWithMixedChurn"].churn
    assert churn is not None and (churn.mode, churn.interval) == ("recreate", 1.0)
    node, pod = churn.objects(3)
    assert node["status"]["capacity"] == {"pods": "0"}
    Node.model_validate(node)
    assert (pod["kind"], _cpu(pod), pod["spec"]["priority"]) == ("Pod", 9.0, 10)


def test_templates_carry_upstream_labels_only() -> None:
    basic = WORKLOADS["SchedulingBasic"]
    assert basic.measured_objects(basic.short)[0]["metadata"]["labels"] == {}
    anti = WORKLOADS["SchedulingPodAntiAffinity"]
    assert anti.measured_objects(anti.short)[0]["metadata"]["labels"] == {"color": "green"}
    spread = WORKLOADS["TopologySpreading"]
    assert spread.measured_objects(spread.short)[0]["metadata"]["labels"] == {"color": "blue"}


def test_pods_parse_and_carry_their_constraints() -> None:
    anti = WORKLOADS["SchedulingPodAntiAffinity"]
    pods = anti.init_objects(anti.short) + anti.measured_objects(anti.short)
    assert {p["metadata"]["namespace"] for p in pods} == {INIT_NAMESPACE, MEASURED_NAMESPACE}
    # init + measured pods repel each other on hostname: together they fit one per node
    assert len(pods) <= anti.short.nodes
    term = pods[0]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert term["namespaces"] == [MEASURED_NAMESPACE, INIT_NAMESPACE]  # as upstream lists them
    spread = WORKLOADS["TopologySpreading"].measured_objects(WORKLOADS["TopologySpreading"].short)
    constraint = spread[0]["spec"]["topologySpreadConstraints"][0]
    assert (constraint["maxSkew"], constraint["topologyKey"]) == (5, ZONE)
    for w in WORKLOADS.values():
        for pod in w.measured_objects(w.short)[:2] + w.init_objects(w.short)[:2]:
            Pod.model_validate(pod)


def test_nodes_are_labelled_as_each_config_prepares_them() -> None:
    node = bench_node(4)
    assert node["status"]["capacity"] == {"cpu": "4", "memory": "32Gi", "pods": "110"}
    assert node["metadata"]["labels"] == {HOSTNAME: "node-00004"}

    def zones(name: str) -> set[str]:
        w = WORKLOADS[name]
        return {n["metadata"]["labels"].get(ZONE, "") for n in w.node_objects(w.short)}

    assert zones("SchedulingBasic") == {""}
    assert zones("SchedulingNodeAffinity") == {"zone1"}  # In [zone1, zone2] keeps every node
    assert zones("TopologySpreading") == {"moon-1", "moon-2", "moon-3"}


def test_proc_parsing_reads_this_process() -> None:
    stat = "1234 (a (weird) name) S " + " ".join(["0"] * 10) + " 250 150 0 0"
    assert parse_stat_cpu(stat) == 400 / os.sysconf("SC_CLK_TCK")
    assert parse_status_hwm("Name:\tx\nVmHWM:\t  2048 kB\n") == 2 * 2**20
    mine = usage(os.getpid())
    assert mine is not None and mine.cpu_seconds > 0 and mine.peak_rss_bytes > 2**20
    assert usage(2**22 + 7) is None
    before = {"w": [Usage(1.0, 0), Usage(2.0, 0)]}
    after = {"w": [Usage(1.5, 0), Usage(4.0, 0)]}
    assert cpu_delta(before, after) == {"w": 2.5}


def test_percentiles_follow_scheduler_perf() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentiles(values) == {"p50": 50.0, "p90": 90.0, "p99": 99.0, "max": 100.0}
    assert percentiles([]) == {}


def _result(**overrides: object) -> BenchResult:
    base = dict(
        workload="SchedulingBasic",
        variant="short",
        nodes=500,
        init_pods=500,
        measured_pods=100,
        workers=2,
        binders=1,
        threshold=680,
        seconds=1.0,
        bound=100,
        unschedulable=0,
        throughput={"Average": 1360.0, "Perc50": 1300.0, "Perc99": 1500.0},
        latency_ms={"p50": 5.0, "p99": 9.0},
        conflicts=1,
        assumes_tried=100,
        scheduler_errors=0,
        cpu_seconds={"worker": 0.5},
        peak_rss_mb={"worker": 90.0},
        overcommitted_nodes=0,
        violated_constraints=0,
        double_bindings=0,
    )
    base.update(overrides)
    return BenchResult(**base)  # type: ignore[arg-type]


def test_report_ratio_and_failures() -> None:
    r = _result()
    assert r.ratio == 2.0 and r.conflict_rate == 0.01
    assert r.cpu_per_1000_pods == {"worker": 5.0}
    assert "2.00x" in table([r])
    no_threshold = _result(workload="PreemptionBasic", threshold=0)
    assert no_threshold.ratio is None and table([no_threshold]).endswith("-")
    assert _result(throughput={}).ratio is None  # too short for a sample: no ratio either
    assert problems(r) == []
    assert problems(_result(unschedulable=3, bound=97)) == ["3 measured pods not bound"]
    assert "1 double bindings" in problems(_result(double_bindings=1))[0]


def test_machine_lines_quote_calibration_and_the_baseline_ratio() -> None:
    summary = {
        "commit": "0123456789abcdef",
        "calibration": {"before": 0.31, "after": 0.35},
        "baseline": {"throughput_Average": 4000.0},
        "baseline_ratio": 0.4,
    }
    cal, base = machine_lines(summary)
    assert "0.310 s before" in cal and "0.350 s after" in cal and "0123456789ab" in cal
    assert "4000 pods/s" in base and "distributed / baseline = 0.40" in base


def test_a_new_run_removes_the_previous_runs_files(tmp_path: Path) -> None:
    old = [
        "SchedulingBasic-2w1b.json",
        "SchedulingBasic-2w1b3s.json",  # 3 shards (--model-shards)
        "PreemptionAsync-1w2b.json",
        "summary.json",
    ]
    for name in [*old, "throughput.png", "costmodel.png", "run.txt", "notes.json"]:
        (tmp_path / name).write_text("x")
    removed = {p.name for p in clear_previous(tmp_path)}
    assert removed == {*old, "throughput.png", "costmodel.png"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.json", "run.txt"]


def test_preemption_workloads_report_victims_per_bound_preemptor() -> None:
    preempting = _result(
        workload="PreemptionAsync", preemptors_bound=50, victims=170, victims_of_bound=150
    )
    assert preempting.victims_per_bound == 3.0  # the bound preemptors' victims only
    assert preempting.as_json()["victims_per_bound"] == 3.0
    assert table([preempting]).splitlines()[-1].endswith("3.00")
    assert _result().victims_per_bound is None  # no preemption in the workload
    assert table([_result()]).splitlines()[-1].endswith("-")
