"""What a watcher shard pays for an event that is another shard's (docs/scale.md §4).

`python -m shared.tools.bench.dropcost` starts a nats-server, publishes pod events into
a stream with KSCHED_CLUSTER's spec and reads them all through a durable consumer with
the watcher's own machinery (consume_batches, Deliveries, the ack of each batch's last
message), dropping every one after `WatcherShard.handles` said it is not this shard's:
the process CPU per message is what a dropped event costs the shard, the client's
receive and the subject test included, without decoding, routing or delivering.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import nats
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig

from shared.runtime.connections import stream_config
from shared.runtime.consume import Deliveries, consume_batches
from shared.sharding import WatcherShard
from shared.subjects import CLUSTER_STREAM, PODS_PREFIX, STREAMS
from shared.tools.servers import start_nats

BODY = b"x" * 600  # about a small pod's JSON


async def measure(port: int, events: int) -> float:
    """CPU seconds per message dropped."""
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    js = nc.jetstream()
    await js.add_stream(stream_config(next(s for s in STREAMS if s.name == CLUSTER_STREAM)))
    for start in range(0, events, 256):
        batch = range(start, min(events, start + 256))
        await asyncio.gather(*(js.publish(f"{PODS_PREFIX}.ns{i % 7}.pod-{i}", BODY) for i in batch))
    config = ConsumerConfig(durable_name="dropcost", ack_policy=AckPolicy.ALL)
    await js.add_consumer(CLUSTER_STREAM, config)
    psub = await js.pull_subscribe_bind("dropcost", stream=CLUSTER_STREAM)
    shard, deliveries, done = WatcherShard(64, 63), Deliveries(), asyncio.Event()
    kept = seen = 0

    async def handle(msgs: list[Msg]) -> None:
        nonlocal kept, seen
        msgs, _ = deliveries.take(msgs)
        kept += sum(1 for m in msgs if shard.handles(m.subject))
        seen += len(msgs)
        await msgs[-1].ack()
        if seen >= events:
            done.set()

    cpu = time.process_time()
    await consume_batches(psub, handle, done, batch=1000)
    cpu = time.process_time() - cpu
    await nc.close()
    print(f"{seen} events read, {seen - kept} dropped, {kept} kept (shard 63 of 64)")
    return cpu / seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=50_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ksched-dropcost-") as tmp:
        server = start_nats(Path(tmp))
        try:
            per = asyncio.run(measure(server.port, args.events))
        finally:
            server.stop()
    print(f"CPU per event read and dropped: {per * 1e6:.1f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
