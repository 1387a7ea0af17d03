"""A command whose connection to the primary goes silent reconnects to the primary the
Sentinels name now.

redis-py 8 reconnects a command's connection through `connect_check_health`, which its
SentinelManagedConnection does not override: the retries of a command went back to the
address the connection had. With the old primary's host cut off, each retry waited out
the connect timeout and the command failed after 15-22 s (chaos-hosts, a partition of
the primary's host), although the Sentinels had promoted a replica within 3 s. Here the
old primary is stopped (SIGSTOP): its sockets stay open and silent, as a cut-off host's.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from redis import Redis

from shared import keys
from shared.runtime.connections import connect_redis
from shared.runtime.fencing import epoch_floor, raise_epoch
from shared.tools.sentinel import start_sentinels

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(120)
async def test_a_command_on_a_silent_primary_goes_to_the_new_one(tmp_path: Path) -> None:
    sentinels = await asyncio.to_thread(start_sentinels, tmp_path)
    client = connect_redis(sentinels.url)
    old = sentinels.data[sentinels.primary()]
    try:
        await raise_epoch(client, "queue", 1)  # the pool now holds a connection to it
        old.proc.send_signal(signal.SIGSTOP)
        # Sent on that connection: no answer. Its retries must reach the replica that the
        # Sentinels promote meanwhile, not the stopped primary again.
        await raise_epoch(client, "queue", 2)
        new_port = sentinels.primary_port()
        assert new_port is not None and new_port != old.port
        with Redis(port=new_port) as direct:
            assert direct.get(keys.lease_epoch_key("queue")) == b"2"
        assert await epoch_floor(client, "queue") == 2
    finally:
        old.proc.send_signal(signal.SIGCONT)
        await client.aclose()
        sentinels.stop()


@pytest.mark.timeout(120)
async def test_a_silent_sentinel_is_asked_once_then_skipped(tmp_path: Path) -> None:
    """A sentinel whose host is cut off (here a listener that never answers, first in
    the list) is given one try per look-up, then the next sentinel is asked. redis-py
    8's clients retry a timeout ten times by default, the sentinels' too: each look-up
    of the primary, made at every reconnect, waited on the silent one about 30 s, and
    a leader kept through a silent lease store served nothing until the heal
    (chaos-hosts, a cut of the host that held the Redis primary)."""
    asked = 0

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal asked
        asked += 1
        await reader.read()  # never answers; ends when the client gives up
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sentinels = await asyncio.to_thread(start_sentinels, tmp_path)
    url = sentinels.url.replace("sentinel://", f"sentinel://127.0.0.1:{port},", 1)
    client = connect_redis(url)
    try:
        await raise_epoch(client, "queue", 1)
        assert await epoch_floor(client, "queue") == 1
        assert asked == 1, f"the silent sentinel was asked {asked} times"
    finally:
        await client.aclose()
        server.close()
        sentinels.stop()
