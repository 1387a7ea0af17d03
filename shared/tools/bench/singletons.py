"""The queue or the cache alone, driven with SchedulingBasic's traffic; their CPU per pod.

`python -m shared.tools.bench.singletons queue|cache [--pods N] [--batch B]` starts
nats-server, redis-server and the one service (a process, as deployed) and plays the
other services' part over NATS, in rounds of `--batch` pods, each message as they send
it: for the queue, the watcher's upserts, a worker's pop carrying its report of the
round before, then the watcher's bindings of the round before (the "assigned" and
AssignedPod/Add move of each pod); for the cache,
a worker's assumes (with the node generations it last saw), the binder's finished
bindings and the watcher's bound pods, over 500 nodes. It prints the service's CPU
(utime + stime from /proc) per pod over the measured rounds.

Without the rest of the stack on the machine's cores, its figures move far less with
the load than `ksched bench`'s per-role table; a few batch sizes split the cost into a
part per pod and a part per request (docs/scale.md).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import time
from typing import Any, cast

import nats
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS

from shared import keys
from shared.framework.events import EVENT_ASSIGNED_POD_ADD
from shared.routing import hinted_view, move
from shared.runtime.rpc import request, request_all
from shared.subjects import (
    CACHE_ASSUME,
    CACHE_BINDING,
    CACHE_EVENTS,
    QUEUE_EVENTS,
    QUEUE_POP,
)
from shared.tools.bench.resources import parse_stat_cpu
from shared.tools.devstack import LocalStack, temporary_stack
from shared.tools.synthetic import make_node, make_pod

NODES = 500
WARM_PODS = 600


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (the bench's /proc reader)."""
    with open(f"/proc/{pid}/stat") as f:
        return parse_stat_cpu(f.read())


def bound(pod: dict[str, Any], node: str) -> dict[str, Any]:
    """The pod as the binder's binding leaves it."""
    out = copy.deepcopy(pod)
    out["spec"]["nodeName"] = node
    out["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
    return out


class Driver:
    def __init__(self, nc: NATS, batch: int) -> None:
        self.nc = nc
        self.batch = batch
        self.seq = 0  # the cluster stream's sequence, as the watcher stamps events
        self.generations: dict[str, int] = {}
        self.incarnation = 0
        # the queue's: reports riding on the next pop, bindings the watcher sends next round
        self.reports: list[dict[str, Any]] = []
        self.bindings: list[dict[str, Any]] = []

    async def watcher_sends(self, subject: str, events: list[dict[str, Any]]) -> None:
        head = {"epoch": 0, "through": self.seq, "stamps": {"watched": time.time()}}
        await request_all(self.nc, subject, events, "events", head, timeout=30)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    async def queue_round(self, pods: list[dict[str, Any]]) -> None:
        upserts = [
            {
                "op": "upsert",
                "key": f"default/{p['metadata']['name']}",
                "uid": p["metadata"]["uid"],
                "seq": self.next_seq(),
                "pod": p,
                "size": 300,
            }
            for p in pods
        ]
        await self.watcher_sends(QUEUE_EVENTS, upserts)
        popped: list[dict[str, Any]] = []
        while len(popped) < len(pods):
            # the last batch's reports ride on the next pop, as a worker's do
            body: dict[str, Any] = {"max": self.batch, "wait_ms": 1000}
            if self.reports:
                body["reports"], self.reports = self.reports, []
            reply = await request(self.nc, QUEUE_POP, body, timeout=10)
            popped += reply["pods"]
            self.reports += [
                {"key": p["key"], "cycle": p["cycle"], "outcome": "assumed"} for p in reply["pods"]
            ]
        await self.watcher_sends(QUEUE_EVENTS, self.bindings)
        self.bindings = []
        for p in pods:
            added: dict[str, Any] = {
                **move(EVENT_ASSIGNED_POD_ADD, new=hinted_view(bound(p, "node-0")))
            }
            key = f"default/{p['metadata']['name']}"
            self.bindings += [{"op": "assigned", "key": key, "seq": self.next_seq()}, added]
            added["seq"] = self.seq

    async def cache_nodes(self, stack: LocalStack) -> None:
        nodes = [
            {
                "op": "node_upsert",
                "name": f"node-{i}",
                "node": make_node(f"node-{i}", cpu="400", pods=1100),
                "seq": self.next_seq(),
            }
            for i in range(NODES)
        ]
        await self.watcher_sends(CACHE_EVENTS, nodes)
        redis = aioredis.Redis.from_url(stack.redis_url)
        try:
            listed = await redis.zrange(keys.CACHE_GENERATIONS, 0, -1, withscores=True)
            scored = cast(list[tuple[bytes, float]], listed)
            self.generations = {name.decode(): int(gen) for name, gen in scored}
            marker = await redis.hget(keys.state_key("cache"), "incarnation")
            self.incarnation = int(marker or 0)
        finally:
            await redis.aclose()

    async def cache_round(self, pods: list[dict[str, Any]], first: int) -> None:
        assumes = []
        for i, p in enumerate(pods):
            node = f"node-{(first + i) % NODES}"
            assumes.append(
                {
                    "key": f"default/{p['metadata']['name']}",
                    "uid": p["metadata"]["uid"],
                    "seq": self.seq,
                    "node": node,
                    "pod": p,
                    "profile": "default-scheduler",
                    "cycle": first + i + 1,
                    "generation": self.generations.get(node, 0),
                    "incarnation": self.incarnation,
                }
            )
        replies = await request_all(self.nc, CACHE_ASSUME, assumes, "assume", timeout=10)
        results = [r for reply in replies for r in reply["results"]]
        for a, result in zip(assumes, results, strict=True):
            if not result["ok"]:
                raise RuntimeError(f"assume refused: {result}")
            self.generations[a["node"]] = result["generation"]
        finish = [[a["key"], a["uid"]] for a in assumes]
        await request(self.nc, CACHE_BINDING, {"finish": finish, "forget_attempts": []})
        events = [
            {
                "op": "pod_upsert",
                "name": a["key"],
                "uid": a["uid"],
                "seq": self.next_seq(),
                "node_name": a["node"],
                "pod": bound(a["pod"], a["node"]),
            }
            for a in assumes
        ]
        await self.watcher_sends(CACHE_EVENTS, events)

    async def rounds(self, role: str, first: int, count: int) -> None:
        for start in range(first, first + count, self.batch):
            names = range(start, min(first + count, start + self.batch))
            pods = [make_pod(f"p-{i}") for i in names]
            if role == "queue":
                await self.queue_round(pods)
            else:
                await self.cache_round(pods, start)


async def wait_serving(nc: NATS, role: str) -> None:
    subject, body = (QUEUE_POP, {"max": 1}) if role == "queue" else (CACHE_BINDING, {})
    for _ in range(150):
        try:
            await request(nc, subject, body)
            return
        except Exception:
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the {role} does not answer")


async def measure(stack: LocalStack, role: str, pods: int, batch: int) -> float:
    """The service's CPU seconds per pod over `pods` pods after a warm-up."""
    pid = next(s for s in stack.services if s.name == role).proc.pid
    nc = await nats.connect(stack.nats_url)
    try:
        await wait_serving(nc, role)
        driver = Driver(nc, batch)
        if role == "cache":
            await driver.cache_nodes(stack)
        await driver.rounds(role, 0, WARM_PODS)
        await asyncio.sleep(0.5)
        before = cpu_seconds(pid)
        await driver.rounds(role, WARM_PODS, pods)
        await asyncio.sleep(1.2)  # the service's tick after the last round
        return (cpu_seconds(pid) - before) / pods
    finally:
        await nc.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=["queue", "cache"])
    parser.add_argument("--pods", type=int, default=12000)
    parser.add_argument("--batch", type=int, default=60)
    args = parser.parse_args()
    with temporary_stack("ksched-bench-singletons-", services=[args.role]) as stack:
        per_pod = asyncio.run(measure(stack, args.role, args.pods, args.batch))
    print(
        f"{args.role}: {args.pods} pods in rounds of {args.batch}: "
        f"{per_pod * 1000:.4f} ms of CPU per pod"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
