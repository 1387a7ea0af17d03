"""HealthServer over a real socket, spoken to in raw HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from shared.runtime.http import HealthServer


class ReadyState:
    """A readiness callback whose answer each test can set."""

    def __init__(self) -> None:
        self.ok = True
        self.detail = "ok"
        self.hang = False
        self.error: Exception | None = None

    async def __call__(self) -> tuple[bool, str]:
        if self.error is not None:
            raise self.error
        if self.hang:
            await asyncio.Event().wait()  # never set: simulates a stuck dependency check
        return self.ok, self.detail


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def ready() -> ReadyState:
    return ReadyState()


@pytest.fixture
async def server(registry: CollectorRegistry, ready: ReadyState) -> AsyncIterator[HealthServer]:
    srv = HealthServer(
        host="127.0.0.1", port=0, registry=registry, ready=ready, readiness_timeout=0.2
    )
    await srv.start()
    yield srv
    await srv.stop()


async def exchange(port: int, raw: bytes, *, half_close: bool = False) -> bytes:
    """Send raw bytes, return everything the server writes before it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        if half_close:
            writer.write_eof()
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
        await writer.wait_closed()


async def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    raw = await exchange(port, f"{method} {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split(" ")[1]), headers, body


async def test_start_returns_bound_port(server: HealthServer) -> None:
    assert server.port > 0


async def test_livez(server: HealthServer) -> None:
    status, headers, body = await get(server.port, "/livez")
    assert (status, body) == (200, b"ok")
    assert headers["content-type"].startswith("text/plain")
    assert headers["content-length"] == "2"
    assert headers["connection"] == "close"


async def test_livez_is_503_with_the_reason_while_stalled(
    registry: CollectorRegistry, ready: ReadyState
) -> None:
    stalled: list[str] = []
    srv = HealthServer(
        host="127.0.0.1",
        port=0,
        registry=registry,
        ready=ready,
        live=lambda: stalled[-1] if stalled else None,
    )
    await srv.start()
    try:
        assert (await get(srv.port, "/livez"))[::2] == (200, b"ok")
        stalled.append("handling a batch for 31.0 s (stall limit 30 s)")
        status, _, body = await get(srv.port, "/livez")
        assert (status, body) == (503, b"stalled: handling a batch for 31.0 s (stall limit 30 s)")
    finally:
        await srv.stop()


async def test_readyz_ok(server: HealthServer) -> None:
    status, _, body = await get(server.port, "/readyz")
    assert (status, body) == (200, b"ok")


async def test_readyz_not_ready_shows_detail(server: HealthServer, ready: ReadyState) -> None:
    ready.ok, ready.detail = False, "nats: disconnected"
    status, _, body = await get(server.port, "/readyz")
    assert (status, body) == (503, b"nats: disconnected")


async def test_readyz_hanging_check_times_out(server: HealthServer, ready: ReadyState) -> None:
    ready.hang = True
    loop = asyncio.get_running_loop()
    started = loop.time()
    status, _, body = await get(server.port, "/readyz")
    assert (status, body) == (503, b"readiness check timed out")
    assert loop.time() - started < 2.0


async def test_readyz_failing_check_is_503(server: HealthServer, ready: ReadyState) -> None:
    ready.error = RuntimeError("boom")
    status, _, body = await get(server.port, "/readyz")
    assert status == 503
    assert b"boom" in body


async def test_metrics_exposes_registry(server: HealthServer, registry: CollectorRegistry) -> None:
    counter = Counter("ksched_test_things", "Things counted by the test.", registry=registry)
    counter.inc(3)
    status, headers, body = await get(server.port, "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=")
    assert b"ksched_test_things_total 3.0" in body


async def test_query_string_ignored(server: HealthServer) -> None:
    status, _, body = await get(server.port, "/livez?verbose=1")
    assert (status, body) == (200, b"ok")


async def test_unknown_path_is_404(server: HealthServer) -> None:
    status, _, _ = await get(server.port, "/nope")
    assert status == 404


async def test_non_get_is_405(server: HealthServer) -> None:
    status, headers, _ = await get(server.port, "/livez", method="POST")
    assert status == 405
    assert headers["allow"] == "GET"


@pytest.mark.parametrize(
    "raw",
    [
        b"garbage\r\n\r\n",
        b"\xff\xfe\x00 nonsense \r\n\r\n",
        b"GET /livez SPDY/9\r\n\r\n",
        b"GET livez HTTP/1.1\r\n\r\n",
    ],
)
async def test_malformed_request_is_400_and_server_survives(
    server: HealthServer, raw: bytes
) -> None:
    answer = await exchange(server.port, raw)
    assert answer.startswith(b"HTTP/1.1 400 ")
    status, _, body = await get(server.port, "/livez")
    assert (status, body) == (200, b"ok")


async def test_oversized_head_is_rejected(server: HealthServer) -> None:
    raw = b"GET /livez HTTP/1.1\r\nX-Big: " + b"a" * 10_000 + b"\r\n\r\n"
    answer = await exchange(server.port, raw)
    assert answer.startswith(b"HTTP/1.1 431 ")
    status, _, _ = await get(server.port, "/livez")
    assert status == 200


async def test_client_hanging_up_early_does_not_kill_server(server: HealthServer) -> None:
    assert await exchange(server.port, b"GET /liv", half_close=True) == b""  # EOF mid-head
    status, _, _ = await get(server.port, "/livez")
    assert status == 200


async def test_stop_closes_idle_connections(registry: CollectorRegistry, ready: ReadyState) -> None:
    srv = HealthServer(host="127.0.0.1", port=0, registry=registry, ready=ready)
    port = await srv.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /livez HTTP/1.1\r\n")  # head never finished: the handler waits
        await writer.drain()
        await asyncio.wait_for(srv.stop(), 2)
        assert await asyncio.wait_for(reader.read(), 2) == b""
    finally:
        writer.close()
        await writer.wait_closed()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
