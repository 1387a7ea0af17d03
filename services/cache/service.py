"""Cache service: the single writer of node and assumed-pod state.

Requests are applied to the pure Cache in memory (one event loop: one
serialization point), then written through to Redis before the reply, so a
worker never builds on an assumption that a restart could lose.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Gauge

from services.cache.cache import ASSUMED, ASSUMED_POD_TTL, Cache, PodState
from shared import keys
from shared.framework.runtime import Framework
from shared.framework.types import PodInfo
from shared.messages import AssumeReply, Assumption, CacheEvent
from shared.runtime.flush import Flusher
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import serve
from shared.runtime.service import Runtime
from shared.subjects import CACHE_ASSUME, CACHE_BINDING, CACHE_EVENTS, CACHE_GROUP
from shared.wire import pack, unpack

log = logging.getLogger("ksched.cache")


def assumed_pod_ttl(env: Mapping[str, str]) -> float:
    """Seconds a finished binding may stay unconfirmed before its pod expires
    (KSCHED_CACHE_ASSUMED_POD_TTL_SECONDS)."""
    raw = env.get("KSCHED_CACHE_ASSUMED_POD_TTL_SECONDS", "")
    if not raw:
        return ASSUMED_POD_TTL
    try:
        ttl = float(raw)
    except ValueError:
        ttl = -1.0
    if not ttl > 0:
        raise ValueError(
            f"KSCHED_CACHE_ASSUMED_POD_TTL_SECONDS must be a positive number, got {raw!r}"
        )
    return ttl


class CacheService:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.ttl = assumed_pod_ttl(os.environ)
        self.cache = Cache(time.time, ttl=self.ttl)
        self.frameworks: dict[str, Framework] = {
            p.scheduler_name: Framework.from_profile(p) for p in rt.config.profiles
        }
        self.flusher = Flusher(self._write)
        self.stopping = asyncio.Event()
        reg = rt.registry
        self.conflicts = Counter(
            "ksched_assume_conflicts_total", "Assumes refused at commit", ["plugin"], registry=reg
        )
        self.assumed = Counter("ksched_assumed_pods_total", "Assumes committed", registry=reg)
        self.expired = Counter(
            "ksched_expired_assumed_pods_total", "Assumed pods expired", registry=reg
        )
        self.nodes_gauge = Gauge("ksched_cache_nodes", "Nodes in the cache", registry=reg)
        self.pods_gauge = Gauge("ksched_cache_pods", "Pods in the cache", ["state"], registry=reg)

    async def run(self) -> None:
        await retry_forever("restore cache from redis", self._restore)
        nc = self.rt.nc
        await serve(nc, CACHE_EVENTS, self.on_events, queue=CACHE_GROUP)
        await serve(nc, CACHE_ASSUME, self.on_assume, queue=CACHE_GROUP)
        await serve(nc, CACHE_BINDING, self.on_binding, queue=CACHE_GROUP)
        self.rt.serving.set()
        while not self.stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), 1)
            expired = self.cache.cleanup_expired()
            if expired:
                self.expired.inc(len(expired))
                log.info("expired assumed pods: %s", ", ".join(expired[:20]))
            await self.flusher.flush_quietly(log)
            self._update_gauges()

    async def shutdown(self) -> None:
        self.stopping.set()
        await self.flusher.flush_quietly(log)

    # --- handlers ---------------------------------------------------------------

    async def on_events(self, body: dict[str, Any]) -> dict[str, int]:
        events: list[CacheEvent] = body["events"]
        freed = sum(self._apply(ev) for ev in events)
        await self.flusher.flush()
        return {"applied": len(events), "freed": freed}

    def _apply(self, ev: CacheEvent) -> bool:
        """Apply one event; True when it freed room that a pending pod may use."""
        op = ev["op"]
        if op == "node_upsert":
            self.cache.add_or_update_node(ev["node"])
        elif op == "node_delete":
            self.cache.remove_node(ev["name"])
        elif op == "pod_upsert":
            pod = PodInfo.of(ev["pod"], ev["seq"])
            self.cache.add_pod(ev["name"], ev.get("uid", ""), ev["node_name"], pod, ev["seq"])
        elif op == "pod_delete":
            return self.cache.remove_pod(ev["name"])
        else:
            raise ValueError(f"unknown cache op {op!r}")
        return False

    async def on_assume(self, body: dict[str, Any]) -> dict[str, list[AssumeReply]]:
        assumptions: list[Assumption] = body["assume"]
        results = [self._assume(a) for a in assumptions]
        await self.flusher.flush()
        return {"results": results}

    def _assume(self, a: Assumption) -> AssumeReply:
        framework = self.frameworks.get(a["profile"])
        if framework is None:
            return {"key": a["key"], "ok": False, "plugin": "", "reasons": ["unknown profile"]}
        pod = PodInfo.of(a["pod"], a["seq"])
        result = self.cache.assume_pod(framework, pod, a["node"], a["uid"], a["seq"])
        if result.ok:
            self.assumed.inc()
            return {"key": a["key"], "ok": True}
        status = result.status
        assert status is not None
        self.conflicts.labels(status.plugin).inc()
        return {"key": a["key"], "ok": False, "plugin": status.plugin, "reasons": status.reasons}

    async def on_binding(self, body: dict[str, Any]) -> dict[str, int]:
        for key, uid in body.get("finish", []):
            self.cache.finish_binding(key, uid)
        forgotten = sum(self.cache.forget_pod(key, uid) for key, uid in body.get("forget", []))
        await self.flusher.flush()
        return {"forgotten": forgotten}

    # --- persistence ------------------------------------------------------------

    async def _restore(self) -> None:
        redis = self.rt.redis
        raw_nodes = await redis.hgetall(keys.CACHE_NODES)
        raw_pods = await redis.hgetall(keys.CACHE_PODS)
        generation = int(await redis.get(keys.CACHE_GENERATION) or 0)
        self.cache = Cache(time.time, ttl=self.ttl)
        self.cache.restore(
            [unpack(v) for v in raw_nodes.values()],
            [PodState.from_record(unpack(v)) for v in raw_pods.values()],
            generation,
        )
        log.info(
            "restored %d nodes, %d pods, generation %d",
            len(raw_nodes),
            len(raw_pods),
            self.cache.generation,
        )

    async def _write(self) -> None:
        cache = self.cache
        nodes, pods = cache.take_dirty()
        if not nodes and not pods:
            return
        pipe = self.rt.redis.pipeline(transaction=True)
        for name in nodes:
            info = cache.nodes.get(name)
            if info is None or info.raw_node is None:
                pipe.hdel(keys.CACHE_NODES, name)
                pipe.hdel(keys.CACHE_NODEINFO, name)
                gen = cache.generation if info is None else info.generation
            else:
                pipe.hset(keys.CACHE_NODES, name, pack(info.raw_node))
                pipe.hset(keys.CACHE_NODEINFO, name, pack(info.to_record()))
                gen = info.generation
            pipe.zadd(keys.CACHE_GENERATIONS, {name: gen})
        for key in pods:
            state = cache.pods.get(key)
            if state is None:
                pipe.hdel(keys.CACHE_PODS, key)
            else:
                pipe.hset(keys.CACHE_PODS, key, pack(state.to_record()))
        pipe.set(keys.CACHE_GENERATION, cache.generation)
        try:
            await pipe.execute()
        except Exception:
            cache.dirty_nodes |= nodes
            cache.dirty_pods |= pods
            raise

    def _update_gauges(self) -> None:
        self.nodes_gauge.set(len(self.cache.schedulable_nodes()))
        assumed = sum(1 for s in self.cache.pods.values() if s.state == ASSUMED)
        self.pods_gauge.labels("assumed").set(assumed)
        self.pods_gauge.labels("added").set(len(self.cache.pods) - assumed)
