"""The page's HTTP server and routes without servers: requests parsed off a stream,
the JSON API over a ClusterWatch filled by hand, unknown routes and oversized bodies
refused (shared/tools/ui/http.py, app.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from nats.aio.client import Client as NATS

from shared.tools.cli.live import ClusterWatch, Entry
from shared.tools.synthetic import make_node, make_pod
from shared.tools.ui.app import Ui
from shared.tools.ui.guard import RequestGuard
from shared.tools.ui.http import MAX_BODY_BYTES, HttpError, Request, read_request


def reader_of(raw: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(raw)
    reader.feed_eof()
    return reader


async def test_a_request_is_parsed_with_its_query_and_body() -> None:
    raw = b"POST /api/pod?name=default%2Fweb-0&node=n1 HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
    req = await read_request(reader_of(raw))
    assert req == Request("POST", "/api/pod", {"name": "default/web-0", "node": "n1"}, b"{}")


async def test_a_body_over_the_limit_is_refused_before_it_is_read() -> None:
    raw = f"POST /api/whatif HTTP/1.1\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()
    with pytest.raises(HttpError) as err:
        await read_request(reader_of(raw))
    assert err.value.status == 413


def ui_over(objects: list[dict[str, Any]]) -> Ui:
    watch = ClusterWatch()
    for seq, obj in enumerate(objects, 1):
        meta = obj["metadata"]
        if obj["kind"] == "Node":
            watch.nodes[meta["name"]] = Entry(obj, seq)
        else:
            watch.pods[f"{meta['namespace']}/{meta['name']}"] = Entry(obj, seq)
    return Ui(cast(NATS, None), watch, None, "nats://unused")  # these routes use no NATS


async def get(ui: Ui, path: str, **query: str) -> tuple[int, Any]:
    resp = await ui.handle(Request("GET", path, query))
    return resp.status, json.loads(resp.body)


async def test_routes_answer_from_the_cluster_view() -> None:
    ui = ui_over([make_node("n1", cpu="2"), make_pod("a", cpu="1", node="n1"), make_pod("b")])
    status, nodes = await get(ui, "/api/nodes")
    assert status == 200 and nodes["nodes"][0]["heat"]["cpu"] == 0.5
    status, pending = await get(ui, "/api/pending")
    assert [p["pod"] for p in pending["pending"]] == ["default/b"]
    status, report = await get(ui, "/api/pod", name="default/b")
    assert status == 200 and report["chosen"] == "n1" and report["nodeName"] is None
    status, missing = await get(ui, "/api/pod", name="default/nope")
    assert status == 404 and "not found" in missing["error"]


async def test_the_page_is_served_and_anything_else_is_not_found() -> None:
    ui = ui_over([])
    page = await ui.handle(Request("GET", "/"))
    assert page.content_type.startswith("text/html") and b'src="/app.js"' in page.body
    with pytest.raises(HttpError) as err:
        await ui.handle(Request("DELETE", "/api/nodes"))  # read-only: no such route
    assert err.value.status == 404


async def test_a_request_keeps_its_headers_for_the_guard() -> None:
    raw = b"GET /api/nodes HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nOrigin: http://evil.test\r\n\r\n"
    req = await read_request(reader_of(raw))
    assert req.headers["host"] == "127.0.0.1:8080" and req.headers["origin"] == "http://evil.test"


@pytest.mark.parametrize("length", [b"-5", b"ten"])
async def test_a_bad_content_length_is_a_bad_request(length: bytes) -> None:
    raw = b"POST /api/whatif HTTP/1.1\r\nContent-Length: " + length + b"\r\n\r\n"
    with pytest.raises(HttpError) as err:
        await read_request(reader_of(raw))
    assert err.value.status == 400


async def refused(ui: Ui, method: str, path: str, headers: dict[str, str]) -> str | None:
    try:
        await ui.handle(Request(method, path, {}, b"{}", headers))
    except HttpError as err:
        if err.status == 403:
            return str(err)
    return None


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "127.0.0.1:8080"},
        {"host": "localhost:8080", "origin": "http://localhost:8080"},
        {"host": "[::1]:8080", "origin": "http://[::1]:8080"},
        {"host": "10.1.2.3"},  # an address typed by the user: not a rebinding
        {"host": "ksched.internal:80", "origin": "http://ksched.internal:80"},  # --allow-host
        {},  # HTTP/1.0 without Host
    ],
)
async def test_the_page_itself_and_plain_clients_are_served(headers: dict[str, str]) -> None:
    ui = ui_over([make_node("n1")])
    ui.guard = RequestGuard(["ksched.internal"])
    assert await refused(ui, "GET", "/api/nodes", headers) is None


@pytest.mark.parametrize(
    ("method", "headers", "why"),
    [
        # DNS rebinding: the attacker's name resolves to 127.0.0.1, the browser says so
        ("GET", {"host": "attacker.example:8080"}, 'host "attacker.example"'),
        ("GET", {"host": "ATTACKER.example."}, 'host "attacker.example"'),
        # a cross-site read and a cross-site form post to the real address
        ("GET", {"host": "127.0.0.1:8080", "origin": "http://evil.test"}, "origin"),
        ("POST", {"host": "127.0.0.1:8080", "origin": "https://evil.test"}, "origin"),
        ("POST", {"host": "127.0.0.1:8080", "origin": "null"}, "origin"),  # sandboxed frame
        ("POST", {"host": "127.0.0.1:8080", "origin": "http://127.0.0.1:9999"}, "origin"),
    ],
)
async def test_other_sites_are_refused(method: str, headers: dict[str, str], why: str) -> None:
    ui = ui_over([make_node("n1")])
    path = "/api/whatif" if method == "POST" else "/api/nodes"
    refusal = await refused(ui, method, path, headers)
    assert refusal is not None and why in refusal
