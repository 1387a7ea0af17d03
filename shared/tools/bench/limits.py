"""What nats-server and redis-server can carry, per core, with ksched's message sizes.

`python -m shared.tools.bench.limits` starts a fresh nats-server and redis-server and
measures, for each, the server's CPU seconds per operation (/proc utime + stime, so
the figure moves little with the other load on the machine) and the rate reached:

- JetStream publish of SchedulingBasic's pod event (its JSON, as the bench driver
  publishes it) into a stream with KSCHED_CLUSTER's spec, acks awaited with WINDOW in
  flight; and the same with a body of `--big` bytes;
- core NATS publish of the same body to one subscriber (an internal hop's shape);
- redis-server: `redis-benchmark` of an EVALSHA (HSET + HINCRBY, an assume's shape)
  one at a time and pipelined, and a pipelined HSET.

The rates are this client's (one Python process, or redis-benchmark), not the
server's ceiling; the server's per-core ceiling is 1 / (its CPU seconds per op),
which is what docs/scale.md's cost model uses.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nats

from shared.runtime.connections import stream_config
from shared.runtime.timeouts import within
from shared.subjects import STREAMS
from shared.tools.bench.resources import usage
from shared.tools.bench.workloads import WORKLOADS
from shared.tools.client import _event
from shared.tools.natscluster import start_nats_cluster
from shared.tools.servers import Server, start_nats, start_redis

WINDOW = 256  # publishes in flight, as the bench driver
ASSUME_LUA = (
    "redis.call('HSET', KEYS[1], 'pod', ARGV[1]); return redis.call('HINCRBY', KEYS[1], 'gen', 1)"
)


@dataclass(frozen=True)
class Limit:
    what: str
    ops: int
    seconds: float  # wall
    server_cpu: float  # seconds

    @property
    def rate(self) -> float:
        return self.ops / self.seconds

    @property
    def server_us_per_op(self) -> float:
        return self.server_cpu / self.ops * 1e6

    @property
    def per_core(self) -> float:
        """Ops per second one fully busy core of the server would carry."""
        return self.ops / self.server_cpu if self.server_cpu else float("inf")

    def line(self) -> str:
        return (
            f"{self.what:48s} {self.ops:8d} ops {self.rate:9.0f}/s  "
            f"server {self.server_us_per_op:7.2f} us/op = {self.per_core:9.0f}/s per core"
        )


def pod_event() -> bytes:
    """SchedulingBasic's measured pod as the bench driver publishes it."""
    pod = WORKLOADS["SchedulingBasic"].measured("default", "pod-0")
    return _event("ADDED", pod)


def _cpu(*servers: Server) -> float:
    """CPU seconds so far of every server (a cluster's are added up)."""
    return sum(u.cpu_seconds for s in servers if (u := usage(s.proc.pid)) is not None)


async def jetstream_publish(
    servers: list[Server], body: bytes, n: int, what: str, replicas: int = 1
) -> Limit:
    nc = await nats.connect([f"nats://127.0.0.1:{s.port}" for s in servers])
    js = nc.jetstream()
    cluster = next(s for s in STREAMS if s.name == "KSCHED_CLUSTER")
    await js.add_stream(stream_config(cluster, replicas))
    cpu0, t0 = _cpu(*servers), time.perf_counter()
    for start in range(0, n, WINDOW):
        subjects = [f"ksched.cluster.pods.bench.p{i}" for i in range(start, min(n, start + WINDOW))]
        await asyncio.gather(*(js.publish(s, body) for s in subjects))
    seconds, cpu = time.perf_counter() - t0, _cpu(*servers) - cpu0
    await js.delete_stream(cluster.name)
    await nc.close()
    return Limit(what, n, seconds, cpu)


async def core_publish(server: Server, body: bytes, n: int, what: str) -> Limit:
    pub = await nats.connect(f"nats://127.0.0.1:{server.port}")
    sub_nc = await nats.connect(f"nats://127.0.0.1:{server.port}", pending_size=1 << 28)
    done = asyncio.Event()
    got = 0

    async def on_msg(_: object) -> None:
        nonlocal got
        got += 1
        if got == n:
            done.set()

    await sub_nc.subscribe("ksched.internal.bench", cb=on_msg, pending_msgs_limit=n + 1)
    await sub_nc.flush()
    cpu0, t0 = _cpu(server), time.perf_counter()
    for i in range(n):
        await pub.publish("ksched.internal.bench", body)
        if i % 1000 == 999:
            await pub.flush()  # keep the client's buffer bounded
    await pub.flush()
    await within(done.wait(), 120)
    seconds, cpu = time.perf_counter() - t0, _cpu(server) - cpu0
    await pub.close()
    await sub_nc.close()
    return Limit(what, n, seconds, cpu)


def redis_benchmark(server: Server, n: int, pipeline: int, command: list[str], what: str) -> Limit:
    args = ["redis-benchmark", "-p", str(server.port), "-n", str(n), "-c", "16", "-r", "100000"]
    args += ["-P", str(pipeline), "-q", "--csv", *command]
    cpu0, t0 = _cpu(server), time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    seconds, cpu = time.perf_counter() - t0, _cpu(server) - cpu0
    reported = re.findall(r'"([0-9.]+)"', out)
    if reported:  # redis-benchmark's own rate excludes its connection set-up
        seconds = n / float(reported[0])
    return Limit(what, n, seconds, cpu)


def redis_limits(server: Server, n: int) -> list[Limit]:
    sha = subprocess.run(
        ["redis-cli", "-p", str(server.port), "SCRIPT", "LOAD", ASSUME_LUA],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    evalsha = ["EVALSHA", sha, "1", "ksched:bench:__rand_int__", "pod"]
    hset = ["HSET", "ksched:bench:__rand_int__", "pod", "x" * 200]
    return [
        redis_benchmark(server, n // 4, 1, evalsha, "redis EVALSHA, 16 clients, no pipeline"),
        redis_benchmark(server, n, 32, evalsha, "redis EVALSHA, 16 clients, pipeline 32"),
        redis_benchmark(server, n, 32, hset, "redis HSET 200 B, 16 clients, pipeline 32"),
    ]


async def nats_limits(server: Server, n: int, big: int) -> list[Limit]:
    body = pod_event()
    large = b"x" * big
    return [
        await jetstream_publish([server], body, n, f"JetStream publish {len(body)} B (pod event)"),
        await jetstream_publish([server], large, n // 4, f"JetStream publish {big} B"),
        await core_publish(server, body, n, f"core publish {len(body)} B, 1 subscriber"),
        await core_publish(server, large, n // 4, f"core publish {big} B, 1 subscriber"),
    ]


def replicated(workdir: Path, n: int) -> Limit:
    """The pod event into an R3 stream on a 3-server cluster: the servers' CPU added up."""
    cluster = start_nats_cluster(workdir)
    try:
        body = pod_event()
        what = f"JetStream publish {len(body)} B, R3 (3 servers' CPU)"
        return asyncio.run(jetstream_publish(cluster.servers, body, n, what, replicas=3))
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.tools.bench.limits")
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--big", type=int, default=16_384, help="bytes of the large body")
    parser.add_argument(
        "--cluster", action="store_true", help="also: the pod event into an R3 stream on 3 servers"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ksched-limits-") as tmp:
        nats_server = start_nats(Path(tmp) / "nats")
        redis_server = start_redis(Path(tmp))
        try:
            limits = asyncio.run(nats_limits(nats_server, args.ops, args.big))
            limits += redis_limits(redis_server, args.ops)
        finally:
            nats_server.stop()
            redis_server.stop()
        if args.cluster:
            limits.append(replicated(Path(tmp) / "cluster", args.ops))
    for limit in limits:
        print(limit.line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
