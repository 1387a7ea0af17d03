"""`ksched bench-latency` (make bench-latency): publish -> bound at half the throughput.

SchedulingBasic's shape (upstream's node-default and pod-default templates, 500 nodes
by default) on a fresh stack: the burst first, for the throughput (runner.py, as
`ksched bench` measures it), then `--pods` more pods published one at a time at an
even pace, half that throughput (or `--rate`). Reports publish -> bound over the
paced pods twice (to the binding's JetStream timestamp, and to the moment the driver
saw it) and the stages of each pod (latency.py, from the stamps ksched's services
put on the binding), with the machine's calibration before and after. Writes the
JSON to --out (default results/latency/latency.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from shared.runtime.service import tune_gc
from shared.tools.bench.calibration import calibrate
from shared.tools.bench.latency import TOTAL, format_stage_table
from shared.tools.bench.report import RESULTS
from shared.tools.bench.runner import BenchResult, run_workload
from shared.tools.bench.suite import BASIC, commit
from shared.tools.bench.workloads import WORKLOADS
from shared.tools.devstack import temporary_stack

# The 500-node burst of `ksched bench` (4000 pods) is longer than a rate needs.
BURST_PODS = 2000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--init-pods", type=int, default=500, help="placed before the burst")
    parser.add_argument(
        "--burst-pods", type=int, default=BURST_PODS, help="published at once, for the rate"
    )
    parser.add_argument("--pods", type=int, default=2000, help="paced pods, measured")
    parser.add_argument("--rate", type=float, help="pods/s for the paced pods (default: half)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--binders", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per phase")
    parser.add_argument("--out", type=Path, help="default: shared/tools/bench/results/latency")


def run_bench_latency(args: argparse.Namespace) -> int:
    tune_gc()  # the driver shares the cores with the stack: as lean as the services
    workload = WORKLOADS[BASIC]
    size = replace(
        workload.size(False),
        nodes=args.nodes,
        init_pods=args.init_pods,
        measured_pods=args.burst_pods,
    )
    before = calibrate()
    print(f"calibration: python loop of 10M additions {before:.3f} s", flush=True)
    print(
        f"{BASIC}: {size.nodes} nodes, {size.init_pods} init, a burst of {size.measured_pods}, "
        f"then {args.pods} paced; {args.workers} workers, {args.binders} binders",
        flush=True,
    )
    with temporary_stack("ksched-latency-", workers=args.workers, binders=args.binders) as stack:
        result = asyncio.run(
            run_workload(
                stack,
                workload,
                "short",
                size,
                timeout=args.timeout,
                paced_pods=args.pods,
                paced_rate=args.rate,
                progress=lambda line: print(line, flush=True),
            )
        )
    after = calibrate()
    report = latency_report(result, {"before": before, "after": after}, commit())
    out = (args.out or RESULTS / "latency") / "latency.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")  # stages in pipeline order
    for line in summary_lines(report):
        print(line)
    print(f"results: {out}")
    unbound = result.paced.get("pods", 0) - result.paced_stages.get(TOTAL, {}).get("pods", 0)
    if unbound or result.bound < result.measured_pods:
        print(f"FAILED: {unbound:.0f} paced pods and {result.unschedulable} burst pods unbound")
        return 1
    return 0


def latency_report(r: BenchResult, calibration: dict[str, float], code: str) -> dict[str, Any]:
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": code,
        "calibration": calibration,
        "nodes": r.nodes,
        "workers": r.workers,
        "binders": r.binders,
        "burst": {
            "pods": r.measured_pods,
            "throughput": r.throughput,
            "run_rate": r.run_rate,
            "latency_ms": r.latency_ms,
        },
        "paced": r.paced,  # publish -> seen by the driver (its subscription)
        "stages": r.paced_stages,  # publish -> stored binding, and each stage
        "conflicts": r.conflicts,
        "double_bindings": r.double_bindings,
        "overcommitted_nodes": r.overcommitted_nodes,
    }


def summary_lines(report: dict[str, Any]) -> list[str]:
    burst, paced, stages = report["burst"], report["paced"], report["stages"]
    rate = burst["throughput"].get("Average") or burst["run_rate"]
    total = stages.get(TOTAL, {})
    cal = report["calibration"]
    return [
        "",
        f"burst: {burst['pods']} pods, {rate:.0f} pods/s",
        f"paced: {paced.get('pods', 0):.0f} pods at {paced.get('rate', 0):.0f} pods/s",
        "publish -> binding stored (stream timestamp): "
        + ", ".join(f"{p} {total.get(p, 0):.1f} ms" for p in ("p50", "p90", "p99", "max")),
        "publish -> binding seen by the driver: "
        + ", ".join(f"{p} {paced.get(p, 0):.1f} ms" for p in ("p50", "p90", "p99", "max")),
        "",
        format_stage_table(stages),
        "",
        f"calibration: {cal['before']:.3f} s before, {cal['after']:.3f} s after",
    ]
