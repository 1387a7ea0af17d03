"""`ksched top` and `ksched status`: what the scheduler is doing, read over NATS.

Pure parts (metric aggregation, quantiles, node usage, rendering) are separate from
the sampling loop; `--once` prints one frame without terminal control codes (tests,
captures), from one sample (pods/s needs two: `--once --interval S` measures it over
S seconds)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib
import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS

from shared.subjects import QUEUE_STATS
from shared.tools.cli.live import (
    CliError,
    ClusterWatch,
    Instance,
    connect,
    discover,
    queue_endpoint_subjects,
    scrape,
)
from shared.tools.cli.output import emit, flush_stdout, stdout_gone, warn
from shared.tools.cli.tables import human_duration, parse_time, percent, render_table

SERVICES = ("watcher", "queue", "cache", "worker", "binder")
ATTEMPTS = "scheduler_schedule_attempts_total"
DURATION_BUCKET = "scheduler_scheduling_attempt_duration_seconds_bucket"
CONFLICTS = "ksched_assume_conflicts_total"
BINDS = "ksched_binds_total"
QUEUE_LABELS = (
    ("active", "activeQ"),
    ("backoff", "backoffQ"),
    ("unschedulable", "unschedulablePods"),
    ("gated", "gated"),
    ("inflight", "in flight"),
    ("binding", "binding"),
)
CLEAR = "\x1b[H\x1b[2J"
STATUS_COLUMNS = (
    "SERVICE",
    "INSTANCE",
    "VERSION",
    "HOST",
    "PID",
    "READY",
    "AGE",
    "CONFIG",
    "PROFILES",
    "MESSAGE",
)
DEFAULT_INTERVAL_SECONDS = 2.0

Labels = frozenset[tuple[str, str]]
Metrics = dict[tuple[str, Labels], float]  # (sample name, labels) -> value


def parse_metrics(texts: Iterable[str]) -> Metrics:
    """Samples summed over instances (the same counter on two workers adds up)."""
    from prometheus_client.parser import text_string_to_metric_families

    total: Metrics = defaultdict(float)
    for text in texts:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                total[(s.name, frozenset(s.labels.items()))] += s.value
    return dict(total)


def by_label(metrics: Metrics, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for (sample, labels), value in metrics.items():
        if sample == name:
            out[dict(labels).get(label, "")] += value
    return dict(out)


def delta(cur: Metrics, prev: Metrics) -> Metrics:
    return {k: v - prev.get(k, 0.0) for k, v in cur.items()}


def histogram_quantile(q: float, buckets: Mapping[str, float]) -> float | None:
    """Prometheus's histogram_quantile over cumulative `le` buckets (linear within a
    bucket); None without observations."""
    points = sorted((math.inf if le == "+Inf" else float(le), n) for le, n in buckets.items())
    if not points or points[-1][1] <= 0:
        return None
    rank = q * points[-1][1]
    lower_le, lower_n = 0.0, 0.0
    for le, n in points:
        if n >= rank:
            if math.isinf(le):
                return lower_le
            return lower_le + (le - lower_le) * (
                (rank - lower_n) / (n - lower_n) if n > lower_n else 1
            )
        lower_le, lower_n = le, n
    return lower_le


@dataclass(frozen=True)
class NodeUse:
    name: str
    cpu: tuple[int, int]  # requested, allocatable (millicores)
    memory: tuple[int, int]
    pods: tuple[int, int]


def node_usage(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]]) -> list[NodeUse]:
    """Requests of the bound pods against each node's allocatable, busiest (cpu) first."""
    from shared.framework.types import PodResources, allocatable_of

    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            req = PodResources.of(pod).requests
            used[node]["cpu"] += req.get("cpu", 0)
            used[node]["memory"] += req.get("memory", 0)
            used[node]["pods"] += 1
    out = []
    for node in nodes:
        name = node["metadata"]["name"]
        alloc, u = allocatable_of(node), used[name]
        out.append(
            NodeUse(
                name,
                (u["cpu"], alloc.get("cpu", 0)),
                (u["memory"], alloc.get("memory", 0)),
                (u["pods"], alloc.get("pods", 0)),
            )
        )
    return sorted(out, key=lambda n: (-(n.cpu[0] / n.cpu[1] if n.cpu[1] else 0), n.name))


@dataclass
class Sample:
    at: float
    instances: list[Instance] = field(default_factory=list)
    metrics: dict[str, Metrics] = field(default_factory=dict)  # per service
    queue: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    bound: int = 0
    nodes: list[NodeUse] = field(default_factory=list)


def bar(used: int, total: int, width: int = 20) -> str:
    filled = min(width, round(width * used / total)) if total else 0
    return "[" + "#" * filled + "." * (width - filled) + "]"


def services_line(instances: Sequence[Instance]) -> str:
    parts = []
    for service in SERVICES:
        mine = [i for i in instances if i.service == service]
        ready = sum(i.ready for i in mine)
        mark = "" if mine and ready == len(mine) else " !"
        parts.append(f"{service} {ready}/{len(mine)}{mark}")
    return "   ".join(parts)


def render_frame(cur: Sample, prev: Sample | None, title: str, max_nodes: int) -> str:
    elapsed = cur.at - prev.at if prev is not None else 0.0
    rate = f"{(cur.bound - prev.bound) / elapsed:.1f}" if prev is not None and elapsed > 0 else "-"
    workers = cur.metrics.get("worker", {})
    window = delta(workers, prev.metrics.get("worker", {})) if prev is not None else workers
    attempts = by_label(workers, ATTEMPTS, "result")
    buckets = by_label(window, DURATION_BUCKET, "le")
    if not buckets or max(buckets.values(), default=0) <= 0:  # nothing this window
        buckets = by_label(workers, DURATION_BUCKET, "le")
    p99 = histogram_quantile(0.99, buckets)
    conflicts = sum(by_label(workers, CONFLICTS, "").values())
    binds = by_label(cur.metrics.get("binder", {}), BINDS, "result")
    lines = [
        title,
        "",
        f"SERVICES     {services_line(cur.instances)}   (ready/instances)",
        "QUEUE        "
        + (
            "   ".join(f"{label} {cur.queue.get(key, 0)}" for key, label in QUEUE_LABELS)
            if cur.queue
            else "no queue answers"
        ),
        f"PODS         {cur.pods} total   {cur.bound} bound   {cur.pods - cur.bound} not bound"
        f"   {rate} pods/s bound",
        "SCHEDULING   attempts "
        + (", ".join(f"{k} {int(v)}" for k, v in sorted(attempts.items())) or "none")
        + f"   p99 attempt {'-' if p99 is None else f'{p99 * 1000:.1f} ms'}"
        + f"   assume conflicts {int(conflicts)}",
        "BINDING      "
        + (", ".join(f"{k} {int(v)}" for k, v in sorted(binds.items())) or "no binds yet"),
        "",
    ]
    shown = cur.nodes[:max_nodes]
    rows = [
        [
            n.name,
            f"{bar(*n.cpu)} {percent(*n.cpu):>4}",
            f"{bar(*n.memory)} {percent(*n.memory):>4}",
            f"{n.pods[0]}/{n.pods[1]}",
        ]
        for n in shown
    ]
    lines.append(render_table(["NODE", "CPU REQUESTS", "MEMORY REQUESTS", "PODS"], rows))
    if len(cur.nodes) > len(shown):
        lines.append(f"... {len(cur.nodes) - len(shown)} more nodes (busiest shown first)")
    return "\n".join(lines)


async def take_sample(
    nc: NATS, watch: ClusterWatch, starting: Awaitable[object] | None = None
) -> Sample:
    """One sample; `starting`: what is still under way (the watch's replay, imports),
    waited for while discovery listens."""
    instances, _ = await asyncio.gather(discover(nc), starting or asyncio.sleep(0))
    texts, queue = await asyncio.gather(
        asyncio.gather(*(scrape(nc, i) for i in instances)),
        queue_counts(nc, stats_subjects(instances)),
    )
    per_service: dict[str, list[str]] = defaultdict(list)
    for inst, text in zip(instances, texts, strict=True):
        per_service[inst.service].append(text)
    pods = [e.obj for e in watch.pods.values()]
    return Sample(
        at=time.monotonic(),
        instances=instances,
        metrics={s: parse_metrics(t) for s, t in per_service.items()},
        queue=queue,
        pods=len(pods),
        bound=sum(1 for p in pods if (p.get("spec") or {}).get("nodeName")),
        nodes=node_usage([e.obj for e in watch.nodes.values()], pods),
    )


# What node_usage and parse_metrics import: ~0.15 s, loaded in a thread while the
# first sample waits on the network (discovery listens ~0.1 s for answers).
SAMPLE_MODULES = ("shared.framework.types", "prometheus_client.parser")


def stats_subjects(instances: list[Instance]) -> list[str]:
    """Where the queue's leaders answer stats: one subject, or one per queue shard
    (`ksched.internal.queue.<s>.stats`, as each leader's discovery names it); a queue
    found without it (a standby only, an older one) is asked on QUEUE_STATS."""
    queues = [i.endpoints for i in instances if i.service == "queue"]
    return queue_endpoint_subjects(queues, "stats", QUEUE_STATS) if queues else []


async def queue_counts(nc: NATS, subjects: list[str]) -> dict[str, int]:
    """The queue's sub-queue sizes, summed over its shards ({} when none answers)."""
    replies = await asyncio.gather(*(_counts(nc, s) for s in subjects))
    total: Counter[str] = Counter()
    for counts in replies:
        total.update(counts)
    return dict(total) if any(replies) else {}


async def _counts(nc: NATS, subject: str) -> dict[str, int]:
    try:
        return dict(json.loads((await nc.request(subject, b"", timeout=2)).data)["counts"])
    except Exception:
        return {}


async def top(nc: NATS, args: argparse.Namespace) -> int:
    loading = asyncio.to_thread(lambda: [importlib.import_module(m) for m in SAMPLE_MODULES])
    watch = ClusterWatch()
    first = await take_sample(nc, watch, asyncio.gather(loading, watch.start(nc.jetstream())))
    if args.once and args.interval is None:  # one sample: everything but pods/s
        title = f"ksched top   {args.nats}   {dt.datetime.now():%H:%M:%S}"
        emit(render_frame(first, None, title, args.nodes))
        return 0
    interval = DEFAULT_INTERVAL_SECONDS if args.interval is None else args.interval
    prev = first
    while True:
        await asyncio.sleep(interval)
        cur = await take_sample(nc, watch)
        title = f"ksched top   {args.nats}   {dt.datetime.now():%H:%M:%S}   every {interval:g}s"
        frame = render_frame(
            cur, prev, title + ("" if args.once else "   (Ctrl-C quits)"), args.nodes
        )
        if args.once:
            emit(frame)
            return 0
        emit(CLEAR + frame)
        flush_stdout()
        if stdout_gone():
            return 0
        prev = cur


# --- status -------------------------------------------------------------------------


def render_status(instances: Sequence[Instance], now: dt.datetime) -> tuple[str, bool]:
    """The instance table and whether every service has a ready instance."""
    rows = []
    for i in instances:
        started = parse_time(i.started)
        rows.append(
            [
                i.service,
                i.id,
                i.version,
                i.host,
                i.pid,
                "True" if i.ready else "False",
                human_duration((now - started).total_seconds()) if started else "<unknown>",
                i.config or "<unknown>",
                i.profiles or "<unknown>",
                i.reason,
            ]
        )
    missing = [s for s in SERVICES if not any(i.service == s and i.ready for i in instances)]
    lines = [render_table(STATUS_COLUMNS, rows) if rows else "No ksched service instance answered."]
    if missing:
        lines.append(f"not ready: {', '.join(missing)} (no ready instance)")
    return "\n".join(lines), not missing


async def status(nc: NATS, args: argparse.Namespace) -> int:
    instances = await discover(nc, args.wait)
    text, healthy = render_status(instances, dt.datetime.now(dt.UTC))
    emit(text)
    return 0 if healthy else 1


def run(args: argparse.Namespace) -> int:
    body = top if args.command == "top" else status

    async def main() -> int:
        nc = await connect(args.nats)
        try:
            return await body(nc, args)
        finally:
            await nc.close()

    try:
        return asyncio.run(main())
    except CliError as err:
        warn(f"error: {err}")
        return 1
    except KeyboardInterrupt:
        return 130
