"""`ksched bench` (make bench / make bench-full): scheduler_perf's workloads end to end.

Each workload gets a fresh stack (nats-server, redis-server and every service as a
separate process, as deployed) and is driven through the public subjects only
(shared/tools/bench/runner.py). Then SchedulingBasic again with other worker counts,
and the same workload in one process with no NATS or Redis (the baseline). The
machine's calibration is taken before and after (calibration.py). Prints the summary
table (ratio to kube-scheduler's threshold), the calibration and distributed /
baseline, and writes a JSON file per run (each with the run's commit, calibration
and baseline), summary.json and the charts under --out, after removing what an
earlier run wrote there: the charts are drawn from this run, of this code, only.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from shared.runtime.service import tune_gc
from shared.tools.bench.baseline import run_scheduling_basic
from shared.tools.bench.calibration import calibrate
from shared.tools.bench.costmodel import (
    CORES_PER_MACHINE,
    MACHINES,
    Sample,
    best,
    draw,
    fitted,
    report,
)
from shared.tools.bench.cycle import MODEL_NODES, cycle_growth
from shared.tools.bench.report import (
    RESULTS,
    charts,
    churn_lines,
    clear_previous,
    machine_lines,
    problems,
    ratio_text,
    resource_table,
    table,
    write_run,
    write_summary,
)
from shared.tools.bench.runner import BenchResult, run_workload
from shared.tools.bench.traffic import ops_line
from shared.tools.bench.workloads import WORKLOADS, Workload
from shared.tools.devstack import SHARDED, temporary_stack

BASIC = "SchedulingBasic"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--full", action="store_true", help="5000 nodes (default: 500)")
    parser.add_argument(
        "--workloads", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS)
    )
    # two workers by default: on this 2-core machine the fastest at 5000 nodes (docs/bench.md)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--binders", type=int, default=1)
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        help="watcher and queue shards (KSCHED_SHARDS, docs/scale.md §4); the cache stays single",
    )
    parser.add_argument(
        "--scaling",
        type=int,
        nargs="*",
        default=[1, 2, 4],
        help="worker counts for SchedulingBasic's scaling runs (none: skip)",
    )
    parser.add_argument(
        "--model-shards",
        type=int,
        nargs="*",
        default=[],
        help="SchedulingBasic again at these shard counts (--workers workers): the cost "
        "model's growth per shard (docs/scale.md §5)",
    )
    parser.add_argument(
        "--model-nodes",
        type=int,
        default=MODEL_NODES,
        help="the cost model's larger cluster: the worker's cycle is measured there too",
    )
    parser.add_argument(
        "--paced-pods",
        type=int,
        default=1000,
        help="SchedulingBasic: pods published at half the measured rate, for latency (0: skip)",
    )
    parser.add_argument(
        "--paced-rate",
        type=float,
        help="publish the paced pods at this many pods/s instead of half the measured rate",
    )
    parser.add_argument("--nodes", type=int, help="override every workload's node count")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply pod counts (tests)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per phase")
    parser.add_argument("--out", type=Path, help="default: shared/tools/bench/results/{short,full}")
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy the watcher, queue and cache over each measured phase; "
        "collapsed stacks under DIR/<workload>-<workers>w/",
    )


def _size(w: Workload, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    size = w.size(args.full)
    return replace(
        size,
        nodes=args.nodes or size.nodes,
        init_pods=int(size.init_pods * args.scale),
        measured_pods=max(1, int(size.measured_pods * args.scale)),
    )


def _run_one(
    w: Workload, args: argparse.Namespace, workers: int, paced: int, shards: int | None = None
) -> BenchResult:
    variant = "full" if args.full else "short"
    size = _size(w, args)
    shards = shards or args.shards
    print(
        f"  {w.name}: {size.nodes} nodes, {size.init_pods} init, {size.measured_pods} measured, "
        f"{workers} workers, {args.binders} binders" + (f", {shards} shards" if shards > 1 else ""),
        flush=True,
    )
    with temporary_stack(
        "ksched-bench-", workers=workers, binders=args.binders, shards=shards
    ) as stack:
        result = asyncio.run(
            run_workload(
                stack,
                w,
                variant,
                size,
                timeout=args.timeout,
                paced_pods=paced,
                paced_rate=args.paced_rate,
                progress=lambda line: print(line, flush=True),
                profile=args.profile / f"{w.name}-{workers}w" if args.profile else None,
            )
        )
    print(
        f"    -> {_throughput_text(result)}, latency p99 "
        f"{result.latency_ms.get('p99', 0):.0f} ms, {result.conflicts} conflicts, "
        f"{result.bound}/{result.measured_pods} bound",
        flush=True,
    )
    for line in churn_lines([result]):
        print(f"    {line}", flush=True)
    if shards > 1:
        for role in SHARDED:
            print(f"    {shard_line(result, role, shards)}", flush=True)
    print(f"    {ops_line(result.ops_per_pod)}", flush=True)
    return result


def shard_line(r: BenchResult, role: str, shards: int) -> str:
    """Each shard's CPU of `role` per 1000 bound pods (the role's column sums them)."""
    per = r.cpu_per_1000_pods
    cells = ", ".join(f"{s}: {per.get(f'{role}.{s}', 0):.2f}" for s in range(shards))
    return f"{role} shards, CPU s per 1000 bound pods: {cells}"


def _throughput_text(r: BenchResult) -> str:
    if "Average" not in r.throughput:  # scheduler_perf's average needs two samples
        return f"no 1-s sample (run shorter than 2 s), {r.run_rate:.0f} pods/s over the run"
    if r.ratio is None:
        return f"{r.average:.0f} pods/s average (upstream sets no threshold)"
    return f"{r.average:.0f} pods/s average ({r.ratio:.2f}x kube's {r.threshold:.0f})"


def run_bench(args: argparse.Namespace) -> int:
    tune_gc()  # the driver shares the cores with the stack: as lean as the services
    variant = "full" if args.full else "short"
    out = args.out or RESULTS / variant
    started = time.time()
    print(f"ksched bench ({variant}): workloads {' '.join(args.workloads)}", flush=True)
    if args.shards > 1:
        print(
            f"{args.shards} watcher and queue shards (a leader each); the cache stays "
            "single: its shards are not built yet (docs/scale.md §4)",
            flush=True,
        )
    before = calibrate()
    print(f"calibration: python loop of 10M additions {before:.3f} s", flush=True)
    results = [
        _run_one(WORKLOADS[name], args, args.workers, args.paced_pods if name == BASIC else 0)
        for name in args.workloads
    ]
    scaling = _scaling(args, results)
    modelled = scaling + _model_shards(args, results + scaling)
    cycle = _model_cycle(modelled, args.model_nodes)
    baseline = _baseline(args)
    after = calibrate()
    base = baseline.get("throughput_Average")
    context = {
        "commit": commit(),
        "calibration": {"before": before, "after": after},
        "baseline_average": base,
    }
    clear_previous(out)
    for r in results + [s for s in modelled if s not in results]:
        write_run(out, r, context)
    basic = next((r for r in results if r.workload == BASIC), None)
    summary = {
        "variant": variant,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        **context,
        "runs": [r.as_json() for r in results],
        "scaling": [
            {
                "workers": r.workers,
                "average": r.average,
                "conflict_rate": r.conflict_rate,
                "baseline_ratio": r.average / base if base else None,
            }
            for r in scaling
        ],
        "baseline": baseline,
        "baseline_ratio": basic.average / base if basic and base else None,
    }
    model = _cost_model(modelled, cycle)
    if model is not None:
        summary["costmodel"] = model[0]
    write_summary(out, summary)
    _print_summary(results, scaling, summary, args.paced_rate is not None)
    if model is not None:
        print("\n".join(model[1]))
    if not args.no_chart and results:
        for path in charts(out, results, scaling, base, str(context["commit"])):
            print(f"chart: {path}")
        if model is not None:
            print(f"chart: {draw(out / 'costmodel.png', MACHINES, model[2])}")
    print(f"results: {out}/")
    failures = [f"{r.workload} ({r.workers}w): {p}" for r in results + scaling for p in problems(r)]
    for line in failures:
        print(f"FAILED {line}")
    return 1 if failures else 0


def commit() -> str:
    """The checkout measured, when it is a git one (results name what they measured)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except OSError:
        return ""
    return out.stdout.strip()


def _scaling(args: argparse.Namespace, results: list[BenchResult]) -> list[BenchResult]:
    if not args.scaling:
        return []
    done = {r.workers: r for r in results if r.workload == BASIC}
    print(f"scaling: {BASIC} with {' '.join(map(str, args.scaling))} workers", flush=True)
    return [done.get(n) or _run_one(WORKLOADS[BASIC], args, n, 0) for n in args.scaling]


def _model_shards(args: argparse.Namespace, done: list[BenchResult]) -> list[BenchResult]:
    """SchedulingBasic at each of --model-shards' counts not run yet, --workers workers."""
    ran = {(r.workers, r.shards) for r in done if r.workload == BASIC}
    counts = [n for n in args.model_shards if (args.workers, n) not in ran]
    if counts:
        print(f"cost model: {BASIC} with {' '.join(map(str, counts))} shards", flush=True)
    return [_run_one(WORKLOADS[BASIC], args, args.workers, 0, shards=n) for n in counts]


def _samples(runs: list[BenchResult]) -> list[Sample]:
    return [Sample(r.workers, r.cpu_per_1000_pods, r.shards) for r in runs]


def _model_cycle(runs: list[BenchResult], larger: int) -> dict[int, float]:
    """The worker's cycle at the run's node count and at the model's, measured in this
    run when its SchedulingBasic runs can fit the cost model (two worker counts)."""
    if len({r.workers for r in runs}) < 2:
        return {}
    nodes = runs[0].nodes
    print(f"cost model: the cycle alone at {nodes} and {larger} nodes", flush=True)
    return cycle_growth(nodes, larger)


CostModel = tuple[dict[str, Any], list[str], list[tuple[str, list[float]]]]


def _cost_model(runs: list[BenchResult], cycle: dict[int, float]) -> CostModel | None:
    """docs/scale.md §5's model fitted to this run: its summary entry, its printed
    lines and its curves."""
    if not cycle:
        return None
    chosen = fitted(_samples(runs), runs[0].nodes, cycle)
    lines, curves = report(chosen)
    shards = sorted({r.shards for r in runs})
    entry = {
        "shards": shards,
        "cycle_cpu_ms": {str(n): ms for n, ms in cycle.items()},
        "scenarios": [
            {
                "label": label,
                "costs": asdict(costs),
                "ten_machines": p.rate if (p := best(costs, 10 * CORES_PER_MACHINE)) else 0.0,
            }
            for label, costs in chosen
        ],
    }
    head = (
        f"cost model (fitted to {BASIC} with {len(runs)} runs, shard counts "
        f"{', '.join(map(str, shards))}; ms of CPU per bound pod):"
    )
    return entry, [head, *lines], curves


def _baseline(args: argparse.Namespace) -> dict[str, float]:
    size = _size(WORKLOADS[BASIC], args)
    print(f"baseline: {BASIC} in one process, {size.nodes} nodes", flush=True)
    return run_scheduling_basic(size.nodes, size.init_pods, size.measured_pods)


def _print_summary(
    results: list[BenchResult], scaling: list[BenchResult], summary: dict, asked_rate: bool
) -> None:
    print()
    print(table(results))
    print()
    print(resource_table(results))
    print()
    for line in churn_lines(results):
        print(line)
    for line in machine_lines(summary):
        print(line)
    if scaling:
        print(
            "scaling (SchedulingBasic): "
            + ", ".join(
                f"{s['workers']} workers {s['average']:.0f} pods/s "
                f"({ratio_text(s['baseline_ratio'])} baseline, conflicts {s['conflict_rate']:.2%})"
                for s in summary["scaling"]
            )
        )
    paced = next((r.paced for r in results if r.paced), None)
    if paced:
        how = "as asked" if asked_rate else "half the measured rate"
        print(
            f"latency at {paced['rate']:.0f} pods/s ({how}): "
            f"p50 {paced['p50']:.1f} ms, p99 {paced['p99']:.1f} ms"
        )
