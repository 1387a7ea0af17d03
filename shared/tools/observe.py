"""Watching a running ksched from outside, for tests and benchmarks: the placements the
cache committed (read from Redis), the workers' assume conflicts (their /metrics), and
waiting until a set of pods has settled.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Collection, Iterable
from dataclasses import dataclass

import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from shared import keys
from shared.api.podstatus import REASON_UNSCHEDULABLE
from shared.tools.client import PodTracker
from shared.wire import unpack

CACHE_ADDED = "added"  # the state of a confirmed pod in the cache's records (cache.ADDED)
CONFLICTS_METRIC = "ksched_assume_conflicts"  # ksched_assume_conflicts_total, as parsed
ASSUMED_METRIC = "ksched_assumed_pods"  # the cache's ksched_assumed_pods_total
ATTEMPTS_METRIC = "scheduler_schedule_attempts"  # the workers', by result and profile
INCOMING_METRIC = "scheduler_queue_incoming_pods"  # the queue's, by sub-queue and event
# How long a settle waits for this process to hear of deletions the cache applied first
EVICTION_GRACE_SECONDS = 2.0


@dataclass(frozen=True)
class Commit:
    """A placement the cache committed: `placed_at` orders the commits serially."""

    key: str
    node: str
    confirmed: bool  # the watcher saw the binding (else still assumed)
    placed_at: int


async def read_commits(redis: aioredis.Redis, pod_keys: Collection[str]) -> dict[str, Commit]:
    """The cache's committed placements of `pod_keys` (pods it does not hold are absent)."""
    ordered = list(pod_keys)
    records = await redis.hmget(keys.CACHE_PODS, ordered) if ordered else []
    commits = {}
    for key, raw in zip(ordered, records, strict=True):
        if raw:
            rec = unpack(raw)
            commits[key] = Commit(
                key, rec["node"], rec["state"] == CACHE_ADDED, rec.get("placed_at", 0)
            )
    return commits


def decided(tracker: PodTracker, key: str) -> bool:
    """Bound, or reported unschedulable (PodScheduled=False, reason Unschedulable); a
    SchedulerError (assume conflicts beyond the retries, ...) is retried: not decided."""
    view = tracker.pods.get(key)
    if view is None or view.deleted:
        return False
    return bool(view.node) or (view.scheduled == "False" and view.reason == REASON_UNSCHEDULABLE)


async def settle(
    tracker: PodTracker, redis: aioredis.Redis, pod_keys: Collection[str], timeout: float
) -> dict[str, Commit]:
    """Wait until every pod is bound, reported unschedulable or deleted, and the cache's
    commits of those not deleted are exactly the bindings seen, all confirmed: a
    consistent final state (the commits are then a prefix of the cache's serial
    order). Returns the commits."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    undecided = set(pod_keys)

    def all_decided(t: PodTracker) -> bool:  # re-checks only the pods still undecided
        undecided.difference_update([k for k in undecided if decided(t, k) or _gone(t, k)])
        return not undecided

    while True:
        if await tracker.wait_until(all_decided, max(deadline - loop.time(), 0)):
            # A pod deleted meanwhile (a preemption victim, under a churn that never
            # stops) leaves the cache: compare the pods still there, or a workload
            # evicting every 200 ms never gives one whole quiet comparison.
            live = [k for k in pod_keys if not tracker.pods[k].deleted]
            commits = await read_commits(redis, live)
            differ = _differences(tracker, live, commits)
            # A pod whose deletion the cache applied before this tracker heard of it
            # differs until the tracker does: wait for that, not for a moment with no
            # eviction in flight, which a preemptor every 200 ms on a loaded machine
            # never gave (a PreemptionAsync run waited out its timeout, all pods bound).
            if not differ:
                return commits
            if await _all_deleted(tracker, differ):
                return {k: c for k, c in commits.items() if k not in differ}
            undecided = {k for k in pod_keys if not (decided(tracker, k) or _gone(tracker, k))}
        if loop.time() >= deadline:
            raise TimeoutError(
                f"not settled after {timeout:.0f} s: {len(undecided)} pods undecided "
                f"(e.g. {sorted(undecided)[:5]}), or the cache's commits differ from the bindings"
            )
        await asyncio.sleep(0.05)  # bindings and confirmations are on their way


def _gone(tracker: PodTracker, key: str) -> bool:
    """Deleted meanwhile (a preemption's victim): nothing is left to decide."""
    view = tracker.pods.get(key)
    return view is not None and view.deleted


async def _all_deleted(tracker: PodTracker, keys_: set[str]) -> bool:
    return await tracker.wait_until(
        lambda t: all(t.pods[k].deleted for k in keys_), EVICTION_GRACE_SECONDS
    )


def _differences(tracker: PodTracker, live: list[str], commits: dict[str, Commit]) -> set[str]:
    """The pods whose binding seen and the cache's commit disagree, or whose commit is
    not confirmed yet."""
    differ = set()
    for key in live:
        commit = commits.get(key)
        if commit is None:
            if tracker.pods[key].node:
                differ.add(key)
        elif not commit.confirmed or commit.node != tracker.pods[key].node:
            differ.add(key)
    return differ


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


async def metric_total(ports: Iterable[int], family_name: str, by: str = "") -> dict[str, float]:
    """A counter summed over services' /metrics, per value of the label `by` (all under
    "" when `by` is empty)."""
    texts = await asyncio.gather(*(asyncio.to_thread(_scrape, p) for p in ports))
    totals: dict[str, float] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.name != family_name:
                continue
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    label = sample.labels.get(by, "") if by else ""
                    totals[label] = totals.get(label, 0.0) + sample.value
    return totals


async def assume_conflicts(worker_ports: Iterable[int]) -> int:
    """ksched_assume_conflicts_total summed over the workers' /metrics endpoints."""
    return int(sum((await metric_total(worker_ports, CONFLICTS_METRIC)).values()))


@dataclass(frozen=True)
class PipelineCounters:
    """Cumulative counters of a running stack; subtract two readings for a run's share."""

    conflicts: int  # the workers' assume conflicts
    refused_by_plugin: dict[str, float]  # the cache's refusals, by the rejecting plugin
    assumed: int  # assumptions the cache committed
    errors: int  # scheduling attempts that ended in an error

    @property
    def assumes_tried(self) -> int:
        return self.assumed + int(sum(self.refused_by_plugin.values()))

    def minus(self, earlier: PipelineCounters) -> PipelineCounters:
        by_plugin = {
            plugin: n - earlier.refused_by_plugin.get(plugin, 0)
            for plugin, n in sorted(self.refused_by_plugin.items())
            if n - earlier.refused_by_plugin.get(plugin, 0)
        }
        return PipelineCounters(
            self.conflicts - earlier.conflicts,
            by_plugin,
            self.assumed - earlier.assumed,
            self.errors - earlier.errors,
        )


async def pipeline_counters(
    worker_ports: Iterable[int], cache_ports: Iterable[int]
) -> PipelineCounters:
    worker_ports, cache_ports = list(worker_ports), list(cache_ports)
    conflicts, by_plugin, assumed, attempts = await asyncio.gather(
        metric_total(worker_ports, CONFLICTS_METRIC),
        metric_total(cache_ports, CONFLICTS_METRIC, by="plugin"),
        metric_total(cache_ports, ASSUMED_METRIC),
        metric_total(worker_ports, ATTEMPTS_METRIC, by="result"),
    )
    return PipelineCounters(
        int(sum(conflicts.values())),
        by_plugin,
        int(sum(assumed.values())),
        int(attempts.get("error", 0)),
    )


async def incoming_by_shard(leader_ports: Iterable[int]) -> list[int]:
    """The pods each queue shard's leader took in (scheduler_queue_incoming_pods_total,
    every event), in the order of `leader_ports`: a sharded run whose pods all went
    through one shard shows zeros for the others."""
    totals = [await metric_total([port], INCOMING_METRIC) for port in leader_ports]
    return [int(sum(t.values())) for t in totals]
