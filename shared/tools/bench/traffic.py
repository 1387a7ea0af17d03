"""What one pod costs the servers in operations: Redis commands and JetStream writes.

Read before and after a measured phase: Redis's `INFO commandstats` (calls per
command, every client's, the driver's settle polls included) and each ksched
stream's last sequence (every write, also those that replace a subject's last
message). Divided by the bound pods, they are the per-pod operation counts that
docs/scale.md's cost model multiplies by the servers' measured cost per operation.
"""

from __future__ import annotations

import contextlib

import redis.asyncio as aioredis
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from shared.subjects import STREAMS


async def redis_calls(redis: aioredis.Redis) -> dict[str, int]:
    """Calls so far per Redis command, e.g. {"redis evalsha": 1234}."""
    stats = await redis.info("commandstats")
    return {
        f"redis {name.removeprefix('cmdstat_')}": int(v["calls"])
        for name, v in stats.items()
        if isinstance(v, dict)
    }


async def stream_writes(js: JetStreamContext) -> dict[str, int]:
    """Writes so far per ksched stream (its last sequence)."""
    out: dict[str, int] = {}
    for spec in STREAMS:
        with contextlib.suppress(NotFoundError):
            out[f"js {spec.name}"] = int((await js.stream_info(spec.name)).state.last_seq)
    return out


async def snapshot(redis: aioredis.Redis, js: JetStreamContext) -> dict[str, int]:
    return {**await redis_calls(redis), **await stream_writes(js)}


def per_pod(before: dict[str, int], after: dict[str, int], pods: int) -> dict[str, float]:
    """Operations per pod between two snapshots; counters that did not move are left out."""
    n = max(pods, 1)
    moved = {k: v - before.get(k, 0) for k, v in after.items()}
    return {k: d / n for k, d in sorted(moved.items()) if d > 0}


def ops_line(ops: dict[str, float]) -> str:
    return "ops per pod: " + ", ".join(f"{k} {v:.2f}" for k, v in ops.items())
