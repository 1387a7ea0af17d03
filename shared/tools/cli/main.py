"""`ksched`: the command-line entry point."""

from __future__ import annotations

import argparse
import os
import sys


def _nats(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--nats",
        default=os.environ.get("KSCHED_NATS_URL", "nats://127.0.0.1:4222"),
        help="NATS server(s), comma separated (env KSCHED_NATS_URL)",
    )


def _namespace(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namespace", default="default", help="the pods' namespace")


def add_kubectl_verbs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """kubectl's verbs against a running ksched (shared/tools/cli/kubectl.py, top.py)."""
    apply = sub.add_parser("apply", help="publish Pods, Nodes and workloads from manifests")
    apply.add_argument("-f", "--filename", required=True, help="a file, a directory, or -")
    _nats(apply)

    delete = sub.add_parser("delete", help="delete pods or nodes (publishes DELETED)")
    delete.add_argument("resource", help="pod or node")
    delete.add_argument("names", nargs="+")
    _namespace(delete)
    _nats(delete)

    get = sub.add_parser("get", help="list pods or nodes as kubectl does")
    get.add_argument("resource", help="pods or nodes")
    get.add_argument("names", nargs="*")
    get.add_argument("-o", "--output", choices=("wide", "json", "yaml", "name"), default="")
    get.add_argument("-w", "--watch", action="store_true", help="then print each change")
    get.add_argument("-A", "--all-namespaces", action="store_true")
    get.add_argument(
        "--request-timeout", type=float, default=0, help="stop watching after this many seconds"
    )
    _namespace(get)
    _nats(get)

    describe = sub.add_parser("describe", help="a pod or node in detail, with scheduling reasons")
    describe.add_argument("resource", help="pod or node")
    describe.add_argument("name")
    describe.add_argument(
        "--config",
        default=os.environ.get("KSCHED_CONFIG"),
        help="KubeSchedulerConfiguration for the per-node reasons (env KSCHED_CONFIG)",
    )
    _namespace(describe)
    _nats(describe)

    top = sub.add_parser("top", help="live view: queues, pods/s, p99, conflicts, nodes, health")
    top.add_argument("--interval", type=float, default=2.0, help="seconds between frames")
    top.add_argument("--once", action="store_true", help="print one frame and exit")
    top.add_argument("--nodes", type=int, default=20, help="node rows shown")
    _nats(top)

    status = sub.add_parser("status", help="every service instance (nats.micro discovery)")
    status.add_argument("--wait", type=float, default=0.5, help="seconds to collect answers")
    _nats(status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ksched", description="kube-scheduler as microservices")
    sub = parser.add_subparsers(dest="command", required=True)

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

    bench = sub.add_parser("bench-cycle", help="time one scheduling cycle (pure framework)")
    bench.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    bench.add_argument(
        "--kinds",
        nargs="+",
        default=["default", "anti-affinity", "topology-spread", "node-affinity"],
    )
    bench.add_argument("--pods", type=int, default=50, help="measured cycles per case")
    bench.add_argument("--json", action="store_true")

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

    from shared.tools.bench.replicas import add_arguments as add_replicas_arguments

    add_replicas_arguments(
        sub.add_parser(
            "bench-replicas", help="SchedulingBasic on NATS R1, a cluster R1, R3, R3 fsynced"
        )
    )

    from shared.tools.bench.suite import add_arguments

    add_arguments(
        sub.add_parser("bench", help="scheduler_perf's workloads end to end (make bench)")
    )

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

    args = parser.parse_args(argv)
    if args.command in ("apply", "delete", "get", "describe"):
        from shared.tools.cli.kubectl import run

        return run(args)
    if args.command in ("top", "status"):
        from shared.tools.cli.top import run as run_top

        return run_top(args)
    if args.command == "demo":
        from shared.tools.cli.demo import run_demo

        return run_demo(args)
    if args.command == "bench-cycle":
        from shared.tools.bench.cycle import run_bench_cycle

        return run_bench_cycle(args)
    if args.command == "bench-queue":
        from shared.tools.bench.queue import run_bench_queue

        return run_bench_queue(args)
    if args.command == "bench-baseline":
        from shared.tools.bench.baseline import run_bench_baseline

        return run_bench_baseline(args)
    if args.command == "bench-replicas":
        from shared.tools.bench.replicas import run_bench_replicas

        return run_bench_replicas(args)
    if args.command == "bench":
        from shared.tools.bench.suite import run_bench

        return run_bench(args)
    if args.command == "bench-scale":
        from shared.tools.bench.scale import run_bench_scale

        return run_bench_scale(args)
    if args.command == "simulate":
        from shared.tools.cli.simulate import run_simulate

        return run_simulate(args)
    if args.command == "conformance":
        from shared.tools.cli.conformance import run_conformance

        return run_conformance(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
