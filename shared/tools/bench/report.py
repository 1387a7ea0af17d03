"""What `ksched bench` prints and writes: the summary table, JSON per run, PNG charts."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shared.tools.bench.runner import BenchResult

# Where `ksched bench` writes by default, beside this code: results/short and
# results/full; git keeps results/full (JSON and run.txt), the reference run.
RESULTS = Path(__file__).resolve().parent / "results"

ROLES = ("watcher", "queue", "cache", "worker", "binder", "nats-server", "redis-server", "driver")


CHARTS = ("throughput.png", "scaling.png", "costmodel.png")
RUN_FILE = re.compile(r"\w+-\d+w\d+b(\d+s)?\.json")  # run_file_name's shape
SUMMARY = "summary.json"


def run_file_name(r: BenchResult) -> str:
    """e.g. SchedulingBasic-2w1b.json, and SchedulingBasic-2w1b2s.json with 2 shards."""
    shards = f"{r.shards}s" if r.shards > 1 else ""
    return f"{r.workload}-{r.workers}w{r.binders}b{shards}.json"


def clear_previous(out_dir: Path) -> list[Path]:
    """Remove what an earlier `ksched bench` wrote in `out_dir` (run files, summary,
    charts): a directory then holds one run, of one commit, never figures of older code
    beside new ones. Other files (a saved run.txt) stay."""
    if not out_dir.is_dir():
        return []
    removed = []
    for path in sorted(out_dir.iterdir()):
        ours = path.name in (SUMMARY, *CHARTS) or RUN_FILE.fullmatch(path.name)
        if path.is_file() and ours:
            path.unlink()
            removed.append(path)
    return removed


def write_run(out_dir: Path, r: BenchResult, context: dict[str, Any]) -> Path:
    """One run's JSON, with the run's context (commit, calibration, baseline) beside its
    figures, so that a file read alone still says what machine and code it measured."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / run_file_name(r)
    path.write_text(json.dumps({**r.as_json(), **context}, indent=1, sort_keys=True) + "\n")
    return path


def write_summary(out_dir: Path, summary: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / SUMMARY
    path.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return path


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def table(results: Sequence[BenchResult]) -> str:
    head = (
        f"{'workload':<26} {'nodes':>5} {'init':>5} {'pods':>6} {'w':>2} {'b':>2} "
        f"{'avg/s':>6} {'p50/s':>6} {'p99/s':>6} {'run/s':>6} {'lat p50':>8} {'lat p99':>8} "
        f"{'confl%':>6} {'kube/s':>6} {'ratio':>6} {'vict/p':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        t, lat = r.throughput, r.latency_ms
        lines.append(
            f"{r.workload:<26} {r.nodes:>5} {r.init_pods:>5} {r.measured_pods:>6} "
            f"{r.workers:>2} {r.binders:>2} {_fmt(t.get('Average')):>6} "
            f"{_fmt(t.get('Perc50')):>6} {_fmt(t.get('Perc99')):>6} {_fmt(r.run_rate):>6} "
            f"{_fmt(lat.get('p50'), '.0f'):>6}ms {_fmt(lat.get('p99'), '.0f'):>6}ms "
            f"{r.conflict_rate * 100:>6.2f} {_fmt(r.threshold or None):>6} "
            f"{ratio_text(r.ratio):>6} {_fmt(r.victims_per_bound, '.2f'):>6}"
        )
    return "\n".join(lines)


def resource_table(results: Sequence[BenchResult]) -> str:
    head = f"{'workload (workers)':<30} " + " ".join(f"{role:>12}" for role in ROLES)
    lines = ["CPU seconds per 1000 bound pods / peak RSS MB, per role:", head]
    for r in results:
        per = r.cpu_per_1000_pods
        cells = " ".join(
            f"{_fmt(per.get(role), '.2f'):>5}/{_fmt(r.peak_rss_mb.get(role), '.0f'):>6}"
            for role in ROLES
        )
        lines.append(f"{r.workload + f' ({r.workers})':<30} {cells}")
    return "\n".join(lines)


def churn_lines(results: Sequence[BenchResult]) -> list[str]:
    """The churn's own pods (for PreemptionAsync the preemptors' rate, the second figure),
    the measured pods that preemptors evicted after their binding, and the victims."""
    lines = []
    for r in results:
        if r.churn:
            c = r.churn
            lines.append(
                f"{r.workload}: churn created {c['created']:.0f} pods, {c['bound']:.0f} bound by "
                f"the last measured binding ({c['bound_per_s']:.1f}/s); {r.preempted} measured "
                f"pods preempted after their binding"
            )
        if r.victims is not None:
            lines.append(
                f"{r.workload}: {r.victims} victims, {r.victims_of_bound} of them evicted by "
                f"the {r.preemptors_bound} preemptors bound (the rest by preemptors still "
                f"unbound at the end); {r.preempted_again} bound preemptors preempted on more "
                f"than one node"
            )
    return lines


def machine_lines(summary: dict[str, Any]) -> list[str]:
    """The run's calibration and one-process baseline, and the ratio to quote."""
    cal = summary["calibration"]
    base = summary["baseline"].get("throughput_Average")
    ratio = summary.get("baseline_ratio")
    return [
        f"calibration: python loop of 10M additions {cal['before']:.3f} s before the run, "
        f"{cal['after']:.3f} s after it; commit {summary['commit'][:12] or '-'}",
        f"baseline (SchedulingBasic in one process): {_fmt(base)} pods/s; "
        f"distributed / baseline = {_fmt(ratio, '.2f')}",
    ]


def problems(r: BenchResult) -> list[str]:
    """What makes a run fail: an unscheduled measured pod or a broken invariant."""
    out = []
    if r.unschedulable:
        out.append(f"{r.unschedulable} measured pods not bound")
    if r.overcommitted_nodes or r.violated_constraints or r.double_bindings:
        out.append(
            f"invariants: {r.overcommitted_nodes} overcommitted nodes, "
            f"{r.violated_constraints} violated constraints, {r.double_bindings} double bindings"
        )
    return out


def charts(
    out_dir: Path,
    results: Sequence[BenchResult],
    scaling: Sequence[BenchResult],
    baseline: float | None,
    commit: str = "",
) -> list[Path]:
    """throughput.png: pods/s over time per workload; scaling.png: by worker count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(9, 5))
    for r in results:
        xs, ys = _rates([(0.0, 0), *r.timeline])  # from the first measured publish
        ax.plot(xs, ys, marker=".", label=f"{r.workload} ({r.workers}w)")
    ax.set(
        xlabel="seconds since the first measured pod",
        ylabel="pods bound per second",
        title=f"ksched throughput over time ({results[0].nodes if results else 0} nodes)"
        + (f", {commit[:12]}" if commit else ""),
    )
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    paths.append(save_chart(fig, out_dir / "throughput.png"))
    if scaling:
        fig, ax = plt.subplots(figsize=(6, 4))
        workers = [str(r.workers) for r in scaling]
        ax.bar(workers, [r.average for r in scaling], label="ksched (average pods/s)")
        ax.axhline(
            scaling[0].threshold,
            color="red",
            linestyle="--",
            label=f"kube-scheduler threshold {scaling[0].threshold:.0f}",
        )
        if baseline:
            ax.axhline(
                baseline, color="green", linestyle=":", label=f"in-process baseline {baseline:.0f}"
            )
        ax.set(
            xlabel="workers", ylabel="pods/s", title=f"{scaling[0].workload}: scaling with workers"
        )
        ax.legend(fontsize=8)
        paths.append(save_chart(fig, out_dir / "scaling.png"))
    return paths


def _rates(
    timeline: list[list[float]] | list[tuple[float, int]],
) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for (t0, n0), (t1, n1) in itertools.pairwise(timeline):
        if t1 > t0:
            xs.append(t1)
            ys.append((n1 - n0) / (t1 - t0))
    return xs, ys


def save_chart(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
