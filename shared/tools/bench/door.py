"""The watcher's per-event work alone: its CPU per event without NATS.

`python -m shared.tools.bench.door [--pods N] [--batch B] [--runs R]` feeds the
watcher's own handler code (`Watcher._decode_and_route`: the door's decode and checks,
admission, routing; `Outbound`: packing the items and the batch's messages) with
SchedulingBasic's events as published, N pending pods then the same pods bound, in
batches of B, and prints the CPU time (`time.process_time`) per event of each run and
their minimum. What it leaves out is the service's I/O: nats-py receiving the batch,
the requests to queue and cache and the ack (docs/scale.md §1).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any, cast

from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry

from services.watcher.outbound import Outbound, object_limit
from services.watcher.service import Watcher
from shared.config import SchedulerConfiguration
from shared.runtime.service import Runtime, tune_gc
from shared.sharding import WatcherShard
from shared.subjects import CLUSTER_STREAM
from shared.tools.bench.workloads import default_pod
from shared.wire import body_limit

MAX_PAYLOAD = 1024 * 1024  # nats-server's default


def watcher() -> Watcher:
    """A watcher whose runtime has what the handler reads, and no connection."""
    rt = SimpleNamespace(
        config=SchedulerConfiguration(),
        settings=SimpleNamespace(watcher_shard=WatcherShard(), shards=1),
        registry=CollectorRegistry(),
    )
    return Watcher(cast(Runtime, rt))


def message(seq: int, obj: dict[str, Any], etype: str) -> Msg:
    """A pod's watch event as the watcher's pull consumer delivers it."""
    meta = obj["metadata"]
    subject = f"ksched.cluster.pods.{meta['namespace']}.{meta['name']}"
    reply = f"$JS.ACK.{CLUSTER_STREAM}.watcher.1.{seq}.{seq}.0.0"
    data = json.dumps({"type": etype, "object": obj}).encode()
    return Msg(cast(Any, None), subject=subject, reply=reply, data=data)


def events(pods: int) -> list[Msg]:
    """`pods` pending pods, then each bound (the binder's write)."""
    msgs = [message(i + 1, default_pod("default", f"p-{i}"), "ADDED") for i in range(pods)]
    for i in range(pods):
        pod = default_pod("default", f"p-{i}")
        pod["spec"]["nodeName"] = f"node-{i % 500}"
        pod["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
        msgs.append(message(pods + i + 1, pod, "MODIFIED"))
    return msgs


def handle(w: Watcher, msgs: list[Msg], batch: int) -> None:
    """What `Watcher._handle` does with each batch before sending it."""
    limit = body_limit(MAX_PAYLOAD)
    head = {"epoch": 1}
    for start in range(0, len(msgs), batch):
        out = Outbound(limit)
        counted: Counter[tuple[str, str]] = Counter()
        for index, msg in enumerate(msgs[start : start + batch]):
            routed = w._decode_and_route(msg, object_limit(limit), counted)
            if isinstance(routed, str):
                raise RuntimeError(f"refused: {routed}")
            out.add(index, *routed)
        out.cache_chunks(head, start + batch)
        out.queue_chunks(head, start + batch)


def per_event(pods: int, batch: int) -> float:
    """CPU seconds per event of one run, on a fresh watcher and fresh messages."""
    w, msgs = watcher(), events(pods)
    before = time.process_time()
    handle(w, msgs, batch)
    return (time.process_time() - before) / len(msgs)


def rounds_args(doc: str, pods: int, batch: int) -> argparse.Namespace:
    """--pods, --batch and --runs of a one-process bench of a service's own work."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=pods)
    parser.add_argument("--batch", type=int, default=batch)
    parser.add_argument("--runs", type=int, default=5)
    return parser.parse_args()


def main() -> int:
    args = rounds_args(__doc__, pods=4000, batch=100)
    tune_gc()  # the service's collector thresholds: its share of the CPU is the service's
    runs = [per_event(args.pods, args.batch) * 1e6 for _ in range(args.runs)]
    shown = ", ".join(f"{r:.1f}" for r in runs)
    print(
        f"watcher handler: {args.pods} pending + {args.pods} bound pods in batches of "
        f"{args.batch}: min {min(runs):.1f} µs of CPU per event (runs: {shown})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
