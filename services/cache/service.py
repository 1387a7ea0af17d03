"""Cache service: the single writer of node and assumed-pod state.

Requests are applied to the pure Cache in memory (one event loop: one
serialization point), then written through to Redis before the reply, so a
worker never builds on an assumption that a restart could lose.

A new leader takes the state over from Redis, or rebuilds it from the log when
Redis lost it (runtime/watermark.py, rebuild.py); a leader whose writes find Redis
lost them writes its whole state again, as a new incarnation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.cache.cache import ASSUMED_POD_TTL, Cache, PodState
from services.cache.feed import NodeFeed
from services.cache.nominations import Nomination
from services.cache.rebuild import assume_in_flight, unknown_to
from services.cache.records import NodeRecords
from shared import keys, stages
from shared.framework.events import EVENT_ASSIGNED_POD_DELETE
from shared.framework.interface import ClusterObjects
from shared.framework.profile_map import ProfileMap
from shared.framework.types import PodInfo
from shared.framework.waiting_pods import PermitSignal
from shared.messages import (
    AssumeReply,
    Assumption,
    BindRequest,
    CacheEvent,
    NominationReply,
    NominationRequest,
    PermitState,
)
from shared.plugins import REGISTRY
from shared.podgroups import PodGroups
from shared.relist import pending_pods, read_in_flight, read_latest, route_latest
from shared.runtime import metrics
from shared.runtime.fencing import FencedBatch
from shared.runtime.flush import Flusher
from shared.runtime.informer import watch_owners
from shared.runtime.moves import move_at_queue_shards
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import apply_each, chunks_for, serve
from shared.runtime.service import Runtime
from shared.runtime.timeouts import within
from shared.runtime.watermark import (
    CHECK_SECONDS,
    StateWrites,
    incarnation_base,
    state_at_takeover,
)
from shared.subjects import (
    CACHE_ASSUME,
    CACHE_BINDING,
    CACHE_EVENTS,
    CACHE_GROUP,
    CACHE_NOMINATE,
    CACHE_PERMIT,
    PERMIT_VERDICTS,
)
from shared.wire import pack, text, unpack

log = logging.getLogger("ksched.cache")

SERVICE = "cache"
# Everything the cache keeps in Redis (what a whole write replaces), bar its marker.
STATE_KEYS = (
    keys.CACHE_NODES,
    keys.CACHE_PODS,
    keys.CACHE_NODEINFO,
    keys.CACHE_GENERATIONS,
    keys.CACHE_GENERATION,
    keys.CACHE_PODGROUPS,
    keys.CACHE_PODGROUPS_VERSION,
    keys.CACHE_NOMINATIONS,
)


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
        # Services and controllers (PodTopologySpread's default selectors), kept current
        self.objects = ClusterObjects()
        self.cache = Cache(time.time, ttl=self.ttl, objects=self.objects)
        # node name -> the node object last written to CACHE_NODES (by identity): a
        # node's record changes with every pod on it, its object rarely
        self._written_nodes: dict[str, Any] = {}
        self._records = NodeRecords()  # the NodeInfo records, from parts packed once
        self.frameworks = ProfileMap(rt.config, REGISTRY)
        self._set_pod_groups(PodGroups())
        self.state = StateWrites(SERVICE, STATE_KEYS, lambda: rt.js, rt.redis, rt.fenced_writes)
        self.mark = self.state.mark
        self.feed = NodeFeed()  # each landed write's node changes, for the workers
        self.flusher = Flusher(self._write)
        self.stopping = asyncio.Event()
        self._moving: asyncio.Task[None] | None = None  # a move for expired room, out
        # events come from the watcher's leader only: a deposed one's are refused
        self.watchers = rt.watcher_floors()  # each watcher shard fenced by its epoch
        reg = rt.registry
        self.conflicts = metrics.ASSUME_CONFLICTS.counter(reg)
        self.assumed = metrics.ASSUMED_PODS.counter(reg)
        self.expired = metrics.EXPIRED_ASSUMED_PODS.counter(reg)
        self.nodes_gauge = metrics.CACHE_NODES.gauge(reg)
        self.pods_gauge = metrics.CACHE_PODS.gauge(reg)

    async def run(self) -> None:
        await retry_forever("take the cache's state over", self._take_over)
        # part of the takeover: its requests wait the takeover's 3 s, not 10 s, if unanswered
        js = self.rt.takeover_js
        await retry_forever(
            "watch Services and controllers", lambda: watch_owners(js, self.objects)
        )
        nc = self.rt.nc
        await serve(nc, CACHE_EVENTS, self.on_events, queue=CACHE_GROUP)
        await serve(nc, CACHE_ASSUME, self.on_assume, queue=CACHE_GROUP)
        await serve(nc, CACHE_NOMINATE, self.on_nominate, queue=CACHE_GROUP)
        await serve(nc, CACHE_BINDING, self.on_binding, queue=CACHE_GROUP)
        await serve(nc, CACHE_PERMIT, self.on_permit, queue=CACHE_GROUP)
        await self.rt.start_serving()
        while not self.stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await within(self.stopping.wait(), CHECK_SECONDS)
            await self.state.check()
            expired = self.cache.cleanup_expired()
            if expired:
                self.expired.inc(len(expired))
                log.info("expired assumed pods: %s", ", ".join(expired[:20]))
                self._move_for_freed_room()
            await self.flusher.flush_quietly(log)
            self._update_gauges()

    def _move_for_freed_room(self) -> None:
        """Expired assumptions freed room no watch event tells the queue of: the pods
        parked for want of it get another look (kube's AssignedPodDelete), not after
        the leftover flush. Sent apart, so that a queue away does not hold this loop."""
        if self._moving is None or self._moving.done():
            self._moving = asyncio.create_task(
                move_at_queue_shards(self.rt.nc, self.rt.settings.shards, EVENT_ASSIGNED_POD_DELETE)
            )

    def _set_pod_groups(self, pod_groups: PodGroups) -> None:
        """Coscheduling's PreFilter, re-run at assume, reads the groups the cache tracks."""
        self.pod_groups = pod_groups
        self.frameworks.providers.pod_groups = pod_groups.records

    async def shutdown(self) -> None:
        self.stopping.set()
        await self.flusher.flush_quietly(log)

    # --- handlers ---------------------------------------------------------------

    async def on_events(self, body: dict[str, Any]) -> dict[str, Any]:
        lane = await self.watchers.admit(body)
        if lane is None:
            return {"error": f"stale watcher epoch {body.get('epoch')!r} ({body.get('shard')!r})"}
        events: list[CacheEvent] = body["events"]
        applied, failed = apply_each(events, self._apply_new)
        self.mark.through(body.get("through"), lane)
        await self.flusher.flush()
        return {"applied": len(applied), "freed": sum(applied), "failed": failed}

    def _apply_new(self, ev: CacheEvent) -> bool:
        """Apply an event the state does not hold yet (a rebuild listed those up to its cut)."""
        return False if self.mark.holds(ev.get("seq")) else self._apply(ev)

    def _apply(self, ev: CacheEvent) -> bool:
        """Apply one event; True when it freed room that a pending pod may use."""
        op = ev["op"]
        if op == "node_upsert":
            self.cache.add_or_update_node(ev["node"])
        elif op == "node_delete":
            self.cache.remove_node(ev["name"])
        elif op == "pod_upsert":
            current = self.cache.pods.get(ev["name"])
            known = current.pod if current is not None else None
            pod = PodInfo.updated(known, ev["pod"], ev["seq"])
            self.cache.add_pod(ev["name"], ev.get("uid", ""), ev["node_name"], pod, ev["seq"])
        elif op == "pod_delete":
            return self.cache.remove_pod(ev["name"])
        elif op == "pod_nominate":
            pod = PodInfo.of(ev["pod"], ev["seq"])
            self.cache.nominate_pod(ev["name"], ev["nominated_node"], pod)
        elif op == "podgroup_upsert":
            self.pod_groups.upsert_group(ev["name"], ev["podgroup"])
        elif op == "podgroup_delete":
            self.pod_groups.delete_group(ev["name"])
        elif op == "group_member":
            self.pod_groups.set_member(ev["name"], ev["group"], ev["present"])
        else:
            raise ValueError(f"unknown cache op {op!r}")
        return False

    async def on_assume(self, body: dict[str, Any]) -> dict[str, Any]:
        assumptions: list[Assumption] = body["assume"]
        results = [self._assume(a) for a in assumptions]
        assumed = time.time()  # the batch's stage time (shared/stages.py)
        await self.flusher.flush()
        return {"results": results, stages.ASSUMED: assumed}

    def _assume(self, a: Assumption) -> AssumeReply:
        framework = self.frameworks.get(a["profile"])
        if framework is None:
            return {"key": a["key"], "ok": False, "plugin": "", "reasons": ["unknown profile"]}
        # a generation is a node's version within one incarnation of the state
        seen = a.get("generation") if a.get("incarnation") == self.mark.incarnation else None
        holds = self.cache.verdict_holds(framework, a["pod"], a["node"], seen)
        # validated by the watcher on entry; parsed here only when the filters run again
        pod = PodInfo.lazy(a["pod"], a["seq"]) if holds else PodInfo.of(a["pod"], a["seq"])
        result = self.cache.assume_pod(
            framework, pod, a["node"], a["uid"], a["seq"], a.get("cycle", 0), validate=not holds
        )
        if result.ok:
            self.assumed.inc()
            generation = self.cache.nodes[a["node"]].generation
            return {"key": a["key"], "ok": True, "generation": generation}
        status = result.status
        assert status is not None
        self.conflicts.labels(status.plugin).inc()
        reply: AssumeReply = {
            "key": a["key"],
            "ok": False,
            "plugin": status.plugin,
            "reasons": status.reasons,
        }
        if result.nominated:
            reply["nominated"] = True
        return reply

    async def on_nominate(self, body: dict[str, Any]) -> dict[str, Any]:
        """Reserve a preemption's nomination (or release one whose write failed); the
        reservation is in Redis before the worker writes the nomination and deletes
        the victims, so that a new leader refuses the same room too."""
        if "release" in body:
            key, seq = body["release"]
            released = self.cache.release_nomination(str(key), int(seq))
            await self.flusher.flush()
            return {"released": released}
        reply = self._reserve(body["reserve"])
        await self.flusher.flush()
        return dict(reply)

    def _reserve(self, r: NominationRequest) -> NominationReply:
        framework = self.frameworks.get(r["profile"])
        if framework is None:
            return {"ok": False, "plugin": "", "reasons": ["unknown profile"]}
        pod = PodInfo.of(r["pod"], int(r["seq"]))
        if pod.key != r["key"]:
            return {"ok": False, "plugin": "", "reasons": ["the key does not name the pod"]}
        result = self.cache.reserve_nomination(framework, pod, str(r["node"]), list(r["victims"]))
        if result.ok:
            return {"ok": True}
        status = result.status
        assert status is not None
        return {
            "ok": False,
            "plugin": status.plugin,
            "reasons": status.reasons,
            "holders": [(n.node, n.pod.slim_bytes, n.pod.version) for n in result.holders],
        }

    async def on_binding(self, body: dict[str, Any]) -> dict[str, int]:
        for key, uid in body.get("finish", []):
            self.cache.finish_binding(key, uid)
        forgotten = sum(self.cache.forget_pod(key, uid) for key, uid in body.get("forget", []))
        forgotten += sum(
            self.cache.forget_attempt(key, cycle) for key, cycle in body.get("forget_attempts", [])
        )
        await self.flusher.flush()
        return {"forgotten": forgotten}

    async def on_permit(self, body: dict[str, Any]) -> dict[str, list[PermitState]]:
        """Permit signals from plugins, applied to the assumed pods they select; the
        binders holding those pods hear of the new verdicts on PERMIT_VERDICTS."""
        changed: dict[str, PodState] = {}
        for raw in body.get("signals", []):
            try:
                signal = PermitSignal.from_wire(raw)
            except (KeyError, TypeError, ValueError) as err:
                log.warning("bad permit signal %r: %s", raw, err)
                continue
            for state in self.cache.permit_signal(signal):
                changed[state.key] = state
        states = [_permit_state(key, cycle, self.cache) for key, cycle in body.get("query", [])]
        await self.flusher.flush()  # verdicts survive a restart before anyone acts on them
        if changed:
            verdicts = [_permit_state(s.key, s.cycle, self.cache) for s in changed.values()]
            try:
                for chunk in chunks_for(self.rt.nc, verdicts, "states"):  # a large gang's
                    await self.rt.nc.publish(PERMIT_VERDICTS, chunk.data)
            except Exception as err:  # binders also ask when they start waiting
                log.warning("permit verdicts not published: %s", err)
        return {"states": states}

    # --- persistence ------------------------------------------------------------

    async def _take_over(self) -> None:
        """The state as Redis holds it, or rebuilt from the log when Redis lost it (or
        never held it); written back as a new incarnation before anything is served."""
        self.feed.reset()
        takeover = await state_at_takeover(self.rt.takeover_js, self.rt.redis, SERVICE)
        requests = await read_in_flight(self.rt.takeover_js)  # before the log: see rebuild.py
        if takeover.lost is None and (await self._restore() or not takeover.first):
            await self._reconcile(requests)
            self.mark.start(
                takeover.incarnation, takeover.marker.applied, lanes=takeover.marker.lanes
            )
            await self.state.adopt()
        else:
            takeover.announce_rebuild(log, SERVICE)
            cut = await self._rebuild(requests)
            self.mark.start(takeover.incarnation, cut, cut=cut)
            self.state.whole = True
        await self.flusher.flush()

    async def _restore(self) -> bool:
        """The state as Redis holds it; False when it holds none."""
        redis = self.rt.redis
        raw_nodes = await redis.hgetall(keys.CACHE_NODES)
        raw_pods = await redis.hgetall(keys.CACHE_PODS)
        raw_groups = await redis.hgetall(keys.CACHE_PODGROUPS)
        raw_nominations = await redis.hgetall(keys.CACHE_NOMINATIONS)
        generation = int(await redis.get(keys.CACHE_GENERATION) or 0)
        self._reset()
        self.cache.restore(
            [unpack(v) for v in raw_nodes.values()],
            [PodState.from_record(unpack(v)) for v in raw_pods.values()],
            generation,
            {text(k): Nomination.from_record(unpack(v)) for k, v in raw_nominations.items()},
        )
        pod_groups = PodGroups()
        for name, value in raw_groups.items():
            rec = unpack(value)
            pod_groups.restore(text(name), rec, rec.get("member_keys") or [])
        self._set_pod_groups(pod_groups)
        log.info(
            "restored %d nodes, %d pods, generation %d",
            len(raw_nodes),
            len(raw_pods),
            self.cache.generation,
        )
        return bool(raw_nodes or raw_pods or raw_groups)

    def _reset(self) -> None:
        self.cache = Cache(time.time, ttl=self.ttl, objects=self.objects)
        self._written_nodes = {}
        self._records.clear()
        self._set_pod_groups(PodGroups())

    async def _reconcile(self, requests: list[tuple[int, BindRequest]]) -> None:
        """Bind requests whose pod the restored state does not know: assumptions Redis
        lost after the watcher's last acknowledged event (rebuild.py)."""
        unknown = unknown_to(self.cache, requests)
        if not unknown:
            return
        pending = await pending_pods(self.rt.js, unknown)
        assumed = assume_in_flight(self.cache, self.frameworks, requests, pending)
        if assumed:
            log.warning("assumptions Redis had lost, put back: %s", ", ".join(assumed[:20]))

    async def _rebuild(self, requests: list[tuple[int, BindRequest]]) -> int:
        """The state from the log; returns the stream sequence it is consistent at."""
        relisted = route_latest(await read_latest(self.rt.js), self.rt.config.scheduler_names)
        self._reset()
        _, failed = apply_each(relisted.cache, self._apply)
        assumed = assume_in_flight(self.cache, self.frameworks, requests, relisted.pending())
        log.info(
            "rebuilt from the log through sequence %d: %d nodes, %d pods (%d assumed), "
            "%d events refused",
            relisted.cut,
            len(self.cache.nodes),
            len(self.cache.pods),
            len(assumed),
            len(failed),
        )
        return relisted.cut

    async def _write(self) -> None:
        self.feed.drop()
        await self.state.write(self._changes, self._everything)
        await self.feed.publish(self.rt.nc, self.mark.incarnation)

    def _changes(self, pipe: FencedBatch) -> Callable[[], None] | None:
        nodes, pods = self.cache.take_dirty()
        groups = self.pod_groups.take_dirty()
        nominations = self.cache.nominations.take_dirty()
        if not nodes and not pods and not groups and not nominations:
            return None
        written = self._queue_state(pipe, nodes, pods, groups, nominations)
        gone = {name: written.generations[name] for name in written.nodes_gone}
        self.feed.stage(self.cache.generation, self.cache.nodes, written.records, gone)

        def undo() -> None:  # not written after all
            self.feed.drop()
            for name in written.raw_nodes:
                self._written_nodes.pop(name, None)
            self.cache.dirty_nodes |= nodes
            self.cache.dirty_pods |= pods
            self.pod_groups.dirty |= groups
            self.cache.nominations.dirty |= nominations

        return undo

    def _everything(self, pipe: FencedBatch) -> None:
        self.cache.take_dirty()
        self.pod_groups.take_dirty()
        self.cache.nominations.take_dirty()
        self._written_nodes = {}
        groups = set(self.pod_groups.specs) | set(self.pod_groups.members)
        nominations = set(self.cache.nominations.by_key)
        self._queue_state(pipe, set(self.cache.nodes), set(self.cache.pods), groups, nominations)
        self.feed.stage_whole(self.cache.generation)
        # set, not bumped: a worker's copy of the groups is of an older incarnation
        pipe.set(keys.CACHE_PODGROUPS_VERSION, incarnation_base(self.mark.incarnation))

    def _queue_state(
        self,
        pipe: FencedBatch,
        nodes: set[str],
        pods: set[str],
        groups: set[str],
        nominations: set[str],
    ) -> _Write:
        """The writes of these nodes, pods, groups and nominations into `pipe`."""
        w = self._collect_nodes(nodes)
        self._collect_pods(w, pods)
        self._collect_nominations(w, nominations)
        self._write_groups(pipe, groups)
        w.queue(pipe)
        pipe.set(keys.CACHE_GENERATION, self.cache.generation)
        return w

    def _collect_nodes(self, names: set[str]) -> _Write:
        w = _Write()
        for name in names:
            info = self.cache.nodes.get(name)
            if info is None or info.raw_node is None:
                w.nodes_gone.append(name)
                self._written_nodes.pop(name, None)
                self._records.forget_node(name)
                w.generations[name] = self.cache.generation if info is None else info.generation
                continue
            if self._written_nodes.get(name) is not info.raw_node:  # the node object changed
                w.raw_nodes[name] = self._records.node(info)
                self._written_nodes[name] = info.raw_node
            w.records[name] = self._records.record(info)
            w.generations[name] = info.generation
        return w

    def _collect_pods(self, w: _Write, keys_: set[str]) -> None:
        for key in keys_:
            state = self.cache.pods.get(key)
            if state is None:
                w.pods_gone.append(key)
                self._records.forget_pod(key)
            else:
                w.pod_records[key] = pack(state.to_record())

    def _collect_nominations(self, w: _Write, keys_: set[str]) -> None:
        for key in keys_:
            nomination = self.cache.nominations.by_key.get(key)
            if nomination is None:
                w.nominations_gone.append(key)
            else:
                w.nomination_records[key] = pack(nomination.to_record())

    def _write_groups(self, pipe: Any, groups: set[str]) -> None:
        for key in groups:
            record = self.pod_groups.record(key)
            if record is None:
                pipe.hdel(keys.CACHE_PODGROUPS, key)
            else:
                members = sorted(self.pod_groups.members.get(key, ()))
                pipe.hset(keys.CACHE_PODGROUPS, key, pack({**record, "member_keys": members}))
        if groups:
            pipe.incr(keys.CACHE_PODGROUPS_VERSION)

    def _update_gauges(self) -> None:
        self.nodes_gauge.set(len(self.cache.schedulable_nodes()))
        assumed = len(self.cache.assumed)
        self.pods_gauge.labels("assumed").set(assumed)
        self.pods_gauge.labels("added").set(len(self.cache.pods) - assumed)


@dataclass
class _Write:
    """One flush's changes, written with one command per hash however many changed."""

    nodes_gone: list[str] = field(default_factory=list)
    raw_nodes: dict[str, bytes] = field(default_factory=dict)
    records: dict[str, bytes] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)
    pods_gone: list[str] = field(default_factory=list)
    pod_records: dict[str, bytes] = field(default_factory=dict)
    nominations_gone: list[str] = field(default_factory=list)
    nomination_records: dict[str, bytes] = field(default_factory=dict)

    def queue(self, pipe: Any) -> None:
        if self.nodes_gone:
            pipe.hdel(keys.CACHE_NODES, *self.nodes_gone)
            pipe.hdel(keys.CACHE_NODEINFO, *self.nodes_gone)
        if self.raw_nodes:
            pipe.hset(keys.CACHE_NODES, mapping=self.raw_nodes)
        if self.records:
            pipe.hset(keys.CACHE_NODEINFO, mapping=self.records)
        if self.generations:
            pipe.zadd(keys.CACHE_GENERATIONS, self.generations)
        if self.pods_gone:
            pipe.hdel(keys.CACHE_PODS, *self.pods_gone)
        if self.pod_records:
            pipe.hset(keys.CACHE_PODS, mapping=self.pod_records)
        if self.nominations_gone:
            pipe.hdel(keys.CACHE_NOMINATIONS, *self.nominations_gone)
        if self.nomination_records:
            pipe.hset(keys.CACHE_NOMINATIONS, mapping=self.nomination_records)


def _permit_state(key: str, cycle: int, cache: Cache) -> PermitState:
    state = cache.permit_state(key, cycle)
    if state is None:
        return {"key": key, "cycle": cycle, "assumed": False, "allowed": [], "rejected": None}
    return {
        "key": key,
        "cycle": cycle,
        "assumed": True,
        "allowed": list(state.allowed),
        "rejected": state.rejected,
    }
