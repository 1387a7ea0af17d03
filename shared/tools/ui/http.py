"""A minimal HTTP/1.1 server on asyncio streams: one request per connection, GET and
POST, JSON or static bodies. The page needs no more, and the project no web framework
(aiohttp is not a dependency: a second event-loop stack for five routes is not worth it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from shared.runtime.timeouts import within

# A pasted manifest or configuration; larger is refused, which also keeps a forwarded
# what-if well under NATS's max payload (1 MiB by default).
MAX_BODY_BYTES = 256 << 10
HEADER_TIMEOUT_SECONDS = 10.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict, compare=False)  # names lower-cased


@dataclass(frozen=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


Handler = Callable[[Request], Awaitable[Response]]


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(obj, separators=(",", ":")).encode())


def error_response(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


async def read_request(reader: asyncio.StreamReader) -> Request:
    head = await within(reader.readuntil(b"\r\n\r\n"), HEADER_TIMEOUT_SECONDS)
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _ = lines[0].split(" ", 2)
    except ValueError:
        raise HttpError(400, "bad request line") from None
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
    }
    try:
        length = int(headers.get("content-length") or 0)
    except ValueError:
        raise HttpError(400, "bad Content-Length") from None
    if length < 0:
        raise HttpError(400, "bad Content-Length")
    if length > MAX_BODY_BYTES:
        raise HttpError(413, f"body over {MAX_BODY_BYTES} bytes")
    body = await reader.readexactly(length) if length else b""
    url = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    return Request(method.upper(), url.path, query, body, headers)


def encode(resp: Response) -> bytes:
    reason = HTTPStatus(resp.status).phrase
    head = (
        f"HTTP/1.1 {resp.status} {reason}\r\n"
        f"Content-Type: {resp.content_type}\r\n"
        f"Content-Length: {len(resp.body)}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + resp.body


def connection_handler(
    handle: Handler,
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                resp = await handle(await read_request(reader))
            except HttpError as err:
                resp = error_response(err.status, str(err))
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            except Exception as err:  # a bug or a lost server: the page shows why
                log.exception("ui request failed")
                resp = error_response(500, f"{type(err).__name__}: {err}")
            writer.write(encode(resp))
            await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    return on_connection
