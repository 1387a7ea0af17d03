"""`make burst`: backpressure. 100 000 pod events published as fast as JetStream acks
them, absorbed and all scheduled, with no slow-consumer drop anywhere and each
service's memory sampled throughout.

Why nothing overflows: publishers wait for JetStream's ack (the stream is the
buffer, on disk); the watcher pulls batches of 1000 from its durable consumer
(max_ack_pending 20 000) and acks a batch only once queue and cache accepted it; the
queue hands pods out by pop (long poll, at most 1000 per request); workers pull the
bind work queue in batches. No core-NATS fan-out carries pods, so no subscriber
buffer can fill up with them.

    python -m shared.tools.burst    # 100 000 pods on 1000 nodes
    python -m shared.tools.burst --pods 20000 --nodes 200
    python -m shared.tools.burst --pods 10000 --pod-bytes 3000   # docs-style pods of 3 KB
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats

from shared.runtime.connections import connect_redis
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack, ServiceProc, running
from shared.tools.observe import settle
from shared.tools.realistic import docs_pod
from shared.tools.synthetic import make_node, make_pod

SLOW_CONSUMER_MARKS = ("slow consumer", "Slow Consumer")


@dataclass
class BurstReport:
    pods: int
    published_seconds: float = 0.0
    scheduled_seconds: float = 0.0
    bound: int = 0
    pending: int = 0
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    slow_consumer_lines: list[str] = field(default_factory=list)

    @property
    def bind_rate(self) -> float:
        """Pods bound per second, from the first publish to the last decision."""
        return self.bound / self.scheduled_seconds if self.scheduled_seconds else 0.0

    @property
    def ok(self) -> bool:
        return self.bound + self.pending == self.pods and not self.slow_consumer_lines

    def lines(self) -> list[str]:
        rss = ", ".join(f"{k} {v:.0f} MB" for k, v in sorted(self.peak_rss_mb.items()))
        return [
            f"burst: {self.pods} pod events",
            f"  published in     {self.published_seconds:.1f} s (JetStream acks, no drops)",
            f"  all decided in   {self.scheduled_seconds:.1f} s from the first publish",
            f"  bound / pending  {self.bound} / {self.pending} ({self.bind_rate:.0f} pods/s bound)",
            f"  slow consumers   {len(self.slow_consumer_lines)} {self.slow_consumer_lines[:3]}",
            f"  peak RSS         {rss}",
            f"  result           {'PASS' if self.ok else 'FAIL'}",
        ]


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def _sample_rss(services: list[ServiceProc], peaks: dict[str, float]) -> None:
    while True:
        for svc in services:
            label = f"{svc.name}:{svc.proc.pid}"
            peaks[label] = max(peaks.get(label, 0.0), _rss_mb(svc.proc.pid))
        await asyncio.sleep(1)


def _slow_consumers(stack: LocalStack) -> list[str]:
    paths = [s.log_path for s in stack.services]
    if stack.nats is not None:
        paths.append(stack.nats.log_path)
    return [
        line.strip()[:200]
        for path in paths
        for line in path.read_text(errors="replace").splitlines()
        if any(mark in line for mark in SLOW_CONSUMER_MARKS)
    ]


async def run_burst(stack: LocalStack, pods: int, nodes: int, pod_bytes: int = 0) -> BurstReport:
    report = BurstReport(pods)
    nc = await nats.connect(stack.nats_url)
    redis = connect_redis(stack.redis_url)
    sampler = asyncio.create_task(_sample_rss(list(stack.services), report.peak_rss_mb))
    try:
        tracker = PodTracker()
        await tracker.start(nc)
        js = nc.jetstream(timeout=30)
        await publish_all(
            js, [make_node(f"n{i:04d}", cpu="64", memory="256Gi") for i in range(nodes)]
        )
        objs = [_pod(f"burst-{i:06d}", pod_bytes) for i in range(pods)]
        started = time.monotonic()
        await publish_all(js, objs)
        report.published_seconds = time.monotonic() - started
        keys = [f"default/{p['metadata']['name']}" for p in objs]
        await settle(tracker, redis, keys, timeout=3600)
        report.scheduled_seconds = time.monotonic() - started
        report.bound = sum(1 for k in keys if tracker.pods[k].node)
        report.pending = len(keys) - report.bound
    finally:
        sampler.cancel()
        await redis.aclose()
        await nc.close()
    report.slow_consumer_lines = _slow_consumers(stack)
    return report


def _pod(name: str, size: int) -> dict[str, Any]:
    """A minimal pod, or with `size` a docs-style one of that many bytes (at least ~3 KB)."""
    if size:
        return docs_pod(name, size=size, cpu="10m")
    return make_pod(name, cpu="10m", memory="16Mi")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.tools.burst", description=__doc__)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--binders", type=int, default=2)
    parser.add_argument(
        "--pod-bytes", type=int, default=0, help="docs-style pods of this size (0: minimal)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ksched-burst-") as tmp:
        stack = LocalStack(
            Path(tmp), workers=args.workers, binders=args.binders, env={"KSCHED_LOG_LEVEL": "info"}
        )
        with running(stack):
            report = asyncio.run(run_burst(stack, args.pods, args.nodes, args.pod_bytes))
    print("\n".join(report.lines()), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
