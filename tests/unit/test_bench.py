"""`ksched bench`'s pure parts: workload objects, /proc parsing, percentiles, report."""

from __future__ import annotations

import os

from shared.api.models import Pod
from shared.tools.bench.report import problems, table
from shared.tools.bench.resources import Usage, cpu_delta, parse_stat_cpu, parse_status_hwm, usage
from shared.tools.bench.runner import BenchResult, percentiles
from shared.tools.bench.workloads import (
    INIT_NAMESPACE,
    MEASURED_NAMESPACE,
    WORKLOADS,
    bench_node,
    churn_objects,
)
from shared.tools.synthetic import ZONE


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
        "PreemptionAsync": (5000, 20000, 5000, 570),
    }
    assert all(w.short.nodes == 500 for w in WORKLOADS.values())


def test_pods_parse_and_carry_their_constraints() -> None:
    anti = WORKLOADS["SchedulingPodAntiAffinity"]
    pods = anti.init_objects(anti.short) + anti.measured_objects(anti.short)
    assert {p["metadata"]["namespace"] for p in pods} == {INIT_NAMESPACE, MEASURED_NAMESPACE}
    # init + measured pods repel each other on hostname: together they fit one per node
    assert len(pods) <= anti.short.nodes
    term = pods[0]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert term["namespaces"] == [INIT_NAMESPACE, MEASURED_NAMESPACE]
    spread = WORKLOADS["TopologySpreading"].measured_objects(WORKLOADS["TopologySpreading"].short)
    constraint = spread[0]["spec"]["topologySpreadConstraints"][0]
    assert (constraint["maxSkew"], constraint["topologyKey"]) == (5, ZONE)
    for w in WORKLOADS.values():
        for pod in w.measured_objects(w.short)[:2] + w.init_objects(w.short)[:2]:
            Pod.model_validate(pod)


def test_nodes_and_churn_objects() -> None:
    node = bench_node(4)
    assert node["status"]["capacity"] == {"cpu": "4", "memory": "32Gi", "pods": "110"}
    assert node["metadata"]["labels"][ZONE] == "zone-b"
    created = churn_objects(3)
    assert [o["kind"] for o in created] == ["Node", "Pod"]
    assert created[1]["spec"]["priority"] == 10


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
    assert problems(r) == []
    assert problems(_result(unschedulable=3, bound=97)) == ["3 measured pods not bound"]
    assert "1 double bindings" in problems(_result(double_bindings=1))[0]


def test_preemption_workloads_report_victims_per_bound_preemptor() -> None:
    preempting = _result(workload="PreemptionAsync", bound=50, victims=150)
    assert preempting.victims_per_bound == 3.0
    assert preempting.as_json()["victims_per_bound"] == 3.0
    assert table([preempting]).splitlines()[-1].endswith("3.00")
    assert _result().victims_per_bound is None  # no preemption in the workload
    assert table([_result()]).splitlines()[-1].endswith("-")
