"""Does nats-server's subject mapping partition ksched's pod subjects as docs/scale.md says?

`python -m shared.tools.bench.partitions` starts a nats-server whose configuration maps
`ksched.cluster.pods.<ns>.<name>` to `ksched.partitioned.pods.<p>.<ns>.<name>` with
`{{partition(n,1,2)}}` (names with dots included), publishes pods into a stream with
KSCHED_CLUSTER's spec, and prints: how many pods each partition got, what a consumer
filtered on one partition sees, and whether a conditional write through the public
subject (Nats-Expected-Last-Subject-Sequence, as the binder writes) is checked against
the mapped subject.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import nats
from nats.js.errors import BadRequestError

from shared.runtime.connections import stream_config
from shared.sharding import mapping_config
from shared.subjects import CLUSTER_STREAM, PARTITIONED_PODS_PREFIX, PODS_PREFIX, STREAMS
from shared.tools.servers import Server, start_nats

PODS = PODS_PREFIX  # where pods are published
STORED = PARTITIONED_PODS_PREFIX  # where the mapping stores them


async def check(server: Server, partitions: int, pods: int) -> list[str]:
    nc = await nats.connect(f"nats://127.0.0.1:{server.port}")
    js = nc.jetstream()
    await js.add_stream(stream_config(next(s for s in STREAMS if s.name == CLUSTER_STREAM)))
    for start in range(0, pods, 256):
        batch = range(start, min(pods, start + 256))
        await asyncio.gather(*(js.publish(f"{PODS}.ns{i % 7}.pod-{i}", b"{}") for i in batch))
    await js.publish(f"{PODS}.default.web.v1.a", b"{}")
    lines = []
    for p in range(partitions):
        info = await js.stream_info(CLUSTER_STREAM, subjects_filter=f"{STORED}.{p}.>")
        lines.append(f"partition {p}: {len(info.state.subjects or {})} pods")
    dotted = await js.stream_info(CLUSTER_STREAM, subjects_filter=f"{STORED}.*.default.>")
    lines.append(f"dotted name stored as: {sorted(dotted.state.subjects or {})}")
    sub = await js.pull_subscribe(f"{STORED}.1.>", durable="partition-1")
    seen = {m.subject.split(".")[3] for m in await sub.fetch(50, timeout=5)}
    lines.append(f"consumer filtered on partition 1 sees partitions {sorted(seen)}")
    seq = (await js.publish(f"{PODS}.ns1.pod-1", b"{}")).seq
    expect = {"Nats-Expected-Last-Subject-Sequence": str(seq)}
    await js.publish(f"{PODS}.ns1.pod-1", b"{}", headers=expect)
    try:
        await js.publish(f"{PODS}.ns1.pod-1", b"{}", headers=expect)
        lines.append("conditional write: a stale expected sequence was ACCEPTED")
    except BadRequestError as e:
        lines.append(f"conditional write: current accepted, stale refused ({e.description})")
    await nc.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.tools.bench.partitions")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--pods", type=int, default=3000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ksched-partitions-") as tmp:
        config = Path(tmp) / "nats.conf"
        config.write_text(mapping_config(args.partitions))
        server = start_nats(Path(tmp), config=config)
        try:
            lines = asyncio.run(check(server, args.partitions, args.pods))
        finally:
            server.stop()
    print(mapping_config(args.partitions), end="")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
