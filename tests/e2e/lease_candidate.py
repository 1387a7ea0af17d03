"""A leader-elected process for the freeze tests, through the real runtime: the lease
bucket, the lease thread with its own connections, fenced writes. While it leads it
writes how many of its writes landed into Redis, through fenced batches, every 10 ms.

    python -m tests.e2e.lease_candidate      (KSCHED_* settings from the environment)

Prints one JSON object a line: {"leading": epoch}, then {"fenced": reason} or
{"lost": epoch}, and exits 1, as a deposed leader does.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from shared import keys
from shared.config import SchedulerConfiguration
from shared.runtime.fencing import Fenced
from shared.runtime.logs import setup_logging
from shared.runtime.service import Runtime
from shared.runtime.settings import Settings

SERVICE = "queue"  # whose lease and fence it uses
WRITES = f"{keys.PREFIX}:{SERVICE}:test-writes"  # hash: identity -> writes landed


def say(**event: Any) -> None:
    print(json.dumps(event), flush=True)


async def main() -> int:
    settings = Settings.from_env(SERVICE)
    setup_logging(SERVICE, "info")
    rt = Runtime(settings, SchedulerConfiguration())
    await rt.start()
    await rt.lead()
    assert rt.holding is not None
    say(leading=rt.epoch)
    landed = 0
    while not rt.holding.done():
        batch = rt.fenced_writes()
        batch.hset(WRITES, settings.identity, landed + 1)
        try:
            await batch.execute()
        except Fenced as err:
            say(fenced=str(err))
            break
        landed += 1
        await asyncio.sleep(0.01)
    else:
        say(lost=rt.epoch)
    await rt.abort()
    return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
