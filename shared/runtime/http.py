"""A tiny HTTP/1.1 server for /livez, /readyz and /metrics (stdlib asyncio only).

One request per connection, then close: probes and Prometheus scrapes need nothing more,
and it keeps the parser small enough to be obviously safe against odd clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from shared.runtime.timeouts import within

log = logging.getLogger("ksched.http")

MAX_HEAD_BYTES = 8 * 1024
IO_TIMEOUT_SECONDS = 5.0
TEXT = "text/plain; charset=utf-8"

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

ReadyCheck = Callable[[], Awaitable[tuple[bool, str]]]
# Why the process is not live (it makes no progress: runtime/progress.py), or None.
LiveCheck = Callable[[], str | None]


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = TEXT
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        lines = [
            f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Unknown')}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in self.headers.items()),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


def text(status: int, body: str, **headers: str) -> Response:
    return Response(status, body.encode("utf-8"), headers=dict(headers))


class BadRequest(Exception):
    """The request head cannot be parsed; answer 400 and close."""


def parse_request_line(head: bytes) -> tuple[str, str]:
    """Return (method, path) from a request head; the query string is dropped."""
    line = head.split(b"\r\n", 1)[0]
    try:
        method, target, version = line.decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError) as err:
        raise BadRequest("malformed request line") from err
    if version not in ("HTTP/1.0", "HTTP/1.1") or not method.isalpha():
        raise BadRequest("malformed request line")
    if not target.startswith("/"):
        raise BadRequest("bad request target")
    return method, target.split("?", 1)[0]


class HealthServer:
    """Serves liveness, readiness and Prometheus metrics for one service process."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        registry: CollectorRegistry,
        ready: ReadyCheck,
        live: LiveCheck | None = None,
        readiness_timeout: float = 2.0,
    ) -> None:
        self._host = host
        self._port = port
        self._registry = registry
        self._ready = ready
        self._live = live
        self._readiness_timeout = readiness_timeout
        self._server: asyncio.Server | None = None
        # Python 3.11's Server.close() leaves open connections alone; we cancel them ourselves.
        self._conns: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The bound port once started (useful with port 0), else the configured one."""
        return self._port

    async def start(self) -> int:
        if self._server is not None:
            raise RuntimeError("HealthServer already started")
        self._server = await asyncio.start_server(
            self._handle, self._host, self._port, limit=MAX_HEAD_BYTES
        )
        # With port 0 and a host resolving to several addresses, each socket may get its
        # own port; the first is the one we report.
        self._port = self._server.sockets[0].getsockname()[1]
        return self._port

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
        await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            response = await self._respond(reader)
            if response is not None:
                writer.write(response.encode())
                await within(writer.drain(), IO_TIMEOUT_SECONDS)
        except (OSError, TimeoutError):
            pass  # the client went away or stalled; nothing useful to tell it
        except Exception:
            log.exception("http handler failed")
        finally:
            if task is not None:
                self._conns.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _respond(self, reader: asyncio.StreamReader) -> Response | None:
        """Read one request head and build the answer; None means just hang up."""
        try:
            head = await within(reader.readuntil(b"\r\n\r\n"), IO_TIMEOUT_SECONDS)
        except asyncio.LimitOverrunError:
            return text(431, "request head too large")
        except (asyncio.IncompleteReadError, TimeoutError):
            return None
        try:
            method, path = parse_request_line(head)
        except BadRequest as err:
            return text(400, str(err))
        return await self._route(method, path)

    async def _route(self, method: str, path: str) -> Response:
        handlers = {"/livez": self._livez, "/readyz": self._readyz, "/metrics": self._metrics}
        handler = handlers.get(path)
        if handler is None:
            return text(404, "not found")
        if method != "GET":
            return text(405, "method not allowed", Allow="GET")
        return await handler()

    async def _livez(self) -> Response:
        # Answering at all proves the event loop is turning; `live` says whether the
        # process gets anywhere with its work (a stuck handler, a backlog nobody drains).
        stalled = self._live() if self._live is not None else None
        return text(200, "ok") if stalled is None else text(503, f"stalled: {stalled}")

    async def _readyz(self) -> Response:
        try:
            ok, detail = await within(self._ready(), self._readiness_timeout)
        except TimeoutError:
            return text(503, "readiness check timed out")
        except Exception as err:
            return text(503, f"readiness check failed: {err}")
        return text(200, "ok") if ok else text(503, detail)

    async def _metrics(self) -> Response:
        return Response(200, generate_latest(self._registry), content_type=CONTENT_TYPE_LATEST)
