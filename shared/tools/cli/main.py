"""`ksched`: the command-line entry point.

Starting fast is part of the interface (a kubectl user runs many short commands):
this module imports only argparse, and each verb imports what it needs when it runs
(nats for the kubectl verbs, the framework only where a decision is explained, the
benchmarks only for `bench`). Whatever fails, the user gets one line, `error: ...`,
and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from shared.tools.cli.args import (
    KschedParser,
    add_kubectl_verbs,
    add_shadow_arguments,
    add_ui_arguments,
    add_whatif_arguments,
    command_of,
)

# verb -> (module, function taking the parsed arguments): imported when it runs
KUBECTL = ("shared.tools.cli.kubectl", "run")
VERBS = {
    "apply": KUBECTL,
    "create": KUBECTL,
    "delete": KUBECTL,
    "get": KUBECTL,
    "describe": KUBECTL,
    "top": ("shared.tools.cli.top", "run"),
    "status": ("shared.tools.cli.top", "run"),
    "demo": ("shared.tools.cli.demo", "run_demo"),
    "simulate": ("shared.tools.cli.simulate", "run_simulate"),
    "whatif": ("shared.tools.cli.whatif", "run_whatif"),
    "ui": ("shared.tools.ui.app", "run_ui"),
    "shadow": ("shared.tools.cli.shadow", "run_shadow"),
    "conformance": ("shared.tools.cli.conformance", "run_conformance"),
    "bench": ("shared.tools.bench.suite", "run_bench"),
    "bench-cycle": ("shared.tools.bench.cycle", "run_bench_cycle"),
    "bench-queue": ("shared.tools.bench.queue", "run_bench_queue"),
    "bench-baseline": ("shared.tools.bench.baseline", "run_bench_baseline"),
    "bench-scale": ("shared.tools.bench.scale", "run_bench_scale"),
    "bench-replicas": ("shared.tools.bench.replicas", "run_bench_replicas"),
    "bench-latency": ("shared.tools.bench.paced", "run_bench_latency"),
}


class VersionAction(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, argparse.SUPPRESS, nargs=0, help="print the version")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from shared.runtime.discovery import version

        parser._print_message(f"ksched {version()}\n", sys.stdout)
        parser.exit()


def build_parser(command: str) -> argparse.ArgumentParser:
    """Every verb's arguments; `bench`'s only when it is the command (they come with
    the benchmark modules, slow to import)."""
    parser = KschedParser(prog="ksched", description="kube-scheduler as microservices")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=KschedParser)

    demo = sub.add_parser("demo", help="run servers and services locally and schedule a demo")
    demo.add_argument("--nodes", type=int, default=50)
    demo.add_argument("--pods", type=int, default=500)
    demo.add_argument("--workers", type=int, default=2)
    demo.add_argument("--binders", type=int, default=2)
    demo.add_argument("--workdir", default=".ksched-run")
    demo.add_argument("--exit", action="store_true", help="stop after the summary")

    conf = sub.add_parser("conformance", help="replay kube-scheduler plugin test vectors")
    conf.add_argument("dir", help="a directory laid out like ../shared/conformance")
    conf.add_argument("-v", "--verbose", action="store_true", help="also list skipped cases")

    sim = sub.add_parser("simulate", help="explain the scheduling decision for one pod")
    sim.add_argument("--cluster", required=True, help="nodes and existing pods (YAML/JSON)")
    sim.add_argument("--pod", required=True, help="the pod to schedule (YAML/JSON)")
    sim.add_argument("--config", help="a KubeSchedulerConfiguration file")
    sim.add_argument("-o", "--output", choices=("table", "json"), default="table")
    sim.add_argument("--seed", type=int, default=0, help="seed for breaking score ties")

    wi = sub.add_parser(
        "whatif", help="where a pod or workload would go now, and why (writes nothing)"
    )
    add_whatif_arguments(wi)
    add_ui_arguments(sub.add_parser("ui", help="a web page: node heat map, pending pods, what-if"))

    sh = sub.add_parser(
        "shadow", help="replay the cluster's history through another configuration (no binding)"
    )
    add_shadow_arguments(sh)

    bench = sub.add_parser("bench-cycle", help="time one scheduling cycle (pure framework)")
    bench.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    bench.add_argument(
        "--kinds",
        nargs="+",
        default=["default", "anti-affinity", "topology-spread", "node-affinity"],
    )
    bench.add_argument("--pods", type=int, default=50, help="measured cycles per case")
    bench.add_argument("--json", action="store_true")
    bench.add_argument(
        "--metrics", action="store_true", help="record durations to Prometheus, as services do"
    )
    bench.add_argument(
        "--no-batching", action="store_true", help="turn opportunistic batching off (KEP-5598)"
    )
    bench.add_argument(
        "--adaptive",
        action="store_true",
        help="kube-scheduler's adaptive percentageOfNodesToScore (as the worker) instead of 100",
    )

    bq = sub.add_parser("bench-queue", help="pop latency and throughput of the queue service")
    bq.add_argument("--single", type=int, default=500, help="measured single-pod pops")
    bq.add_argument("--batch", type=int, default=64, help="pods per batched pop")
    bq.add_argument("--batches", type=int, default=200, help="measured batched pops")
    bq.add_argument("--pods", type=int, default=20_000, help="pods through the queue")
    bq.add_argument("--poppers", type=int, default=4, help="concurrent long-polling poppers")
    bq.add_argument("--json", action="store_true")

    bb = sub.add_parser(
        "bench-baseline",
        help="SchedulingBasic with the queue, framework and plugins in one process",
    )
    bb.add_argument("--nodes", type=int, default=500)
    bb.add_argument("--init-pods", type=int, default=1000)
    bb.add_argument("--pods", type=int, default=10000, help="measured pods")

    bench_parser = sub.add_parser(
        "bench", help="scheduler_perf's workloads end to end (make bench)"
    )
    if command == "bench":
        from shared.tools.bench.suite import add_arguments

        add_arguments(bench_parser)
    latency_parser = sub.add_parser(
        "bench-latency", help="publish -> bound at half the throughput, per stage"
    )
    if command == "bench-latency":
        from shared.tools.bench.paced import add_arguments as add_latency_arguments

        add_latency_arguments(latency_parser)
    replicas_parser = sub.add_parser(
        "bench-replicas", help="SchedulingBasic on NATS R1, a cluster R1, R3, R3 fsynced"
    )
    if command == "bench-replicas":
        from shared.tools.bench.replicas import add_arguments as add_replicas_arguments

        add_replicas_arguments(replicas_parser)

    bs = sub.add_parser(
        "bench-scale",
        help="pods/s, assume conflicts and invariant 3 with 1, 2 and 4 workers; refresh cost",
    )
    bs.add_argument("--nodes", type=int, default=500)
    bs.add_argument("--pods", type=int, default=5000, help="default pods (100m, 500Mi)")
    bs.add_argument("--anti-pods", type=int, default=1000, help="hostname anti-affinity pods")
    bs.add_argument("--anti-group", type=int, default=500, help="pods per anti-affinity group")
    bs.add_argument("--spread-pods", type=int, default=1000, help="zone spread pods, maxSkew 1")
    bs.add_argument("--spread-group", type=int, default=250, help="pods per spread group")
    bs.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    bs.add_argument("--binders", type=int, default=2)
    bs.add_argument("--timeout", type=float, default=600, help="seconds a run may take")
    bs.add_argument("--refresh-nodes", type=int, nargs="+", default=[500, 5000])
    bs.add_argument("--refresh-pods", type=int, default=10, help="pods per node for refresh")
    bs.add_argument("--skip-runs", action="store_true", help="only the refresh cost")
    bs.add_argument("--skip-refresh", action="store_true", help="only the scheduling runs")
    bs.add_argument("--json", action="store_true")

    add_kubectl_verbs(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """`ksched ...`: the exit code; errors are one line on stderr."""
    from shared.tools.cli.output import flush_stdout, warn

    argv = sys.argv[1:] if argv is None else argv
    try:
        return dispatch(build_parser(command_of(argv)).parse_args(argv))
    except SystemExit as done:  # --help, --version, a usage error (already printed)
        return done.code if isinstance(done.code, int) else 1
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # never a traceback: one line says what went wrong
        warn(f"error: {err}" if str(err) else f"error: {type(err).__name__}")
        return 1
    finally:
        flush_stdout()


def dispatch(args: argparse.Namespace) -> int:
    module, function = VERBS[args.command]
    return int(getattr(importlib.import_module(module), function)(args))


if __name__ == "__main__":
    sys.exit(main())
