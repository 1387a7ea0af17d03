"""A new leader's lease thread opens its own NATS connection under the renew deadline
(runtime/elector.py). It tries first the server that the service's own connection
reached: a server cut off from the host (chaos-hosts' partition) answers no connect,
and when nats-py's shuffle put it first, the connect timeout (2 s) spent the whole
renew deadline of the harness and the new leader lost its lease at its first renewal."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from shared.runtime.connections import connect_nats, reached_first
from shared.tools.servers import Server

pytestmark = pytest.mark.e2e


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """A server that takes connections and never says a word, as one cut off does (the
    kernel completes the handshake into the backlog; nothing reads it)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock
    sock.close()


@pytest.mark.timeout(60)
async def test_the_lease_connection_tries_the_server_the_service_reached_first(
    nats_server: Server, silent: socket.socket
) -> None:
    live = f"nats://127.0.0.1:{nats_server.port}"
    cut_off = f"nats://127.0.0.1:{silent.getsockname()[1]}"
    service = await connect_nats([live], "ksched-test")
    try:
        urls = reached_first([cut_off, live], service.connected_url)
        assert urls == [live, cut_off]
        for _ in range(8):  # in nats-py's random order, the silent one comes first in half
            lease = await connect_nats(urls, "ksched-test-lease", in_order=True)
            assert lease.connected_url is not None
            assert lease.connected_url.port == nats_server.port
            await lease.close()
    finally:
        await service.close()
    silent.setblocking(False)
    with pytest.raises(BlockingIOError):
        silent.accept()  # no connection ever tried it


def test_without_a_reached_server_the_list_is_kept() -> None:
    urls = ["nats://a:4222", "nats://b:4222"]
    assert reached_first(urls, None) == urls
