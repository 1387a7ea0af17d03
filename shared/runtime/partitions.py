"""Whether the NATS server a process talks to maps pods into partitions.

A service publishes one core message on `PARTITIONS_PROBE.<id>` with a subscription on
both that subject and `PARTITIONS_PROBED.<id>.*`: with the mapping
(shared/sharding.py mapping_config) the message comes back on the second, its last token
the partition count; without it, on the first. The server handles a client's messages
in order, so the answer is in before the flush that follows returns.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from nats.aio.client import Client as NATS

from shared.runtime.timeouts import within
from shared.subjects import PARTITIONS_PROBE, PARTITIONS_PROBED

log = logging.getLogger("ksched.partitions")

PROBE_TIMEOUT_SECONDS = 2.0  # no answer at all: a server refusing the probe's subjects


async def probe_partitions(nc: NATS) -> int | None:
    """The server's partition count for pods, or None when it does not map them."""
    token = uuid.uuid4().hex
    answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def on_msg(msg: object) -> None:
        if not answer.done():
            answer.set_result(getattr(msg, "subject", ""))

    plain = f"{PARTITIONS_PROBE}.{token}"
    subs = [
        await nc.subscribe(plain, cb=on_msg),
        await nc.subscribe(f"{PARTITIONS_PROBED}.{token}.*", cb=on_msg),
    ]
    try:
        await nc.flush()
        await nc.publish(plain, b"")
        await nc.flush()
        subject = await within(answer, PROBE_TIMEOUT_SECONDS)
    except TimeoutError:
        log.warning("the partition probe went unanswered: taking pods as unmapped")
        return None
    finally:
        for sub in subs:
            await sub.unsubscribe()
    last = subject.rsplit(".", 1)[-1]
    return int(last) if subject != plain and last.isdigit() else None
