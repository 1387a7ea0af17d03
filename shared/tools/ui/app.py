"""`ksched ui`: serves the page (static/) and its JSON API over a running ksched.

Read-only: the page follows the cluster stream (ClusterWatch, as `ksched get -w`),
explains a pod in this process (the what-if code `ksched describe pod` uses),
forwards what-if forms to a worker (`ksched whatif`'s request) and replays the log
through a pasted configuration (`ksched shadow`'s report); it never publishes to the
cluster."""

from __future__ import annotations

import argparse
import asyncio
import importlib.resources
import json
from typing import Any

from nats.aio.client import Client as NATS

from shared.tools.cli.kubectl import explain_against
from shared.tools.cli.live import CliError, ClusterWatch, connect
from shared.tools.cli.manifests import ManifestError, parse_manifests
from shared.tools.cli.output import emit, flush_stdout, warn
from shared.tools.ui.guard import RequestGuard
from shared.tools.ui.http import (
    HttpError,
    Request,
    Response,
    connection_handler,
    error_response,
    json_response,
)
from shared.tools.ui.views import nodes_view, pending_view

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}
WHATIF_TOP = 5  # best-scoring nodes in a what-if answer: the page stays short
EXPLAIN_NODES_PER_GROUP = 50  # node names per verdict group on the pod panel


def static(name: str) -> bytes:
    return (importlib.resources.files("shared.tools.ui") / "static" / name).read_bytes()


class Ui:
    """The page's state: one NATS connection and the cluster as the stream shows it."""

    def __init__(
        self,
        nc: NATS,
        watch: ClusterWatch,
        config: str | None,
        url: str,
        guard: RequestGuard | None = None,
    ) -> None:
        self.nc, self.watch, self.config, self.url = nc, watch, config, url
        self.guard = guard or RequestGuard()

    def objects(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return [e.obj for e in self.watch.nodes.values()], [e.obj for e in self.watch.pods.values()]

    async def handle(self, req: Request) -> Response:
        refusal = self.guard.refusal(req.headers)
        if refusal is not None:
            raise HttpError(403, refusal)
        if req.method == "GET" and req.path in STATIC:
            name, content_type = STATIC[req.path]
            return Response(200, static(name), content_type)
        if req.method == "GET" and req.path == "/api/nodes":
            return json_response(nodes_view(*self.objects()))
        if req.method == "GET" and req.path == "/api/pending":
            return json_response(pending_view(self.objects()[1]))
        if req.method == "GET" and req.path == "/api/pod":
            return await self.pod(req.query.get("name", ""), req.query.get("node") or None)
        if req.method == "POST" and req.path == "/api/whatif":
            return await self.whatif(req.body)
        if req.method == "POST" and req.path == "/api/shadow":
            return await self.shadow(req.body)
        raise HttpError(404, f"no route {req.method} {req.path}")

    async def pod(self, key: str, node: str | None) -> Response:
        entry = self.watch.pods.get(key)
        if entry is None:
            return error_response(404, f'pod "{key}" not found')
        nodes, pods = self.objects()
        bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
        # the framework's cycle is CPU work: off the event loop, on copies of the lists
        report = await asyncio.to_thread(
            explain_against, entry.obj, nodes + bound, self.config, node, EXPLAIN_NODES_PER_GROUP
        )
        if report is None:
            return error_response(400, f'pod "{key}" names a scheduler no profile serves')
        return json_response({"pod": key, "nodeName": entry.obj["spec"].get("nodeName"), **report})

    async def whatif(self, body: bytes) -> Response:
        from shared.tools.cli.whatif import ask, request_of

        try:
            form = json.loads(body or b"{}")
            manifests = parse_manifests(str(form.get("manifest", "")), "form")
            req = request_of(manifests, None, form.get("node") or None, WHATIF_TOP)
            return json_response(await ask(self.nc, req))
        except (ValueError, AttributeError, ManifestError, CliError) as err:
            return error_response(400, str(err))

    async def shadow(self, body: bytes) -> Response:
        """`ksched shadow`'s report: the recorded log replayed through the pasted
        configuration (its own ordered consumer; the replay runs off the event loop)."""
        import yaml

        from shared.config import ConfigError, parse_config
        from shared.framework.profile_map import ProfileMap
        from shared.plugins import REGISTRY
        from shared.tools.cli.shadow import shadow_stream

        try:
            form = json.loads(body or b"{}")
            config = parse_config(yaml.safe_load(str(form.get("config", ""))), "the form")
            ProfileMap(config, REGISTRY)  # unknown plugins, bad args: refused as at start
            args = argparse.Namespace(  # `ksched shadow -o json` without --follow
                since=str(form.get("since") or "") or None,
                diverge=bool(form.get("diverge")),
                follow=False,
                output="json",
            )
            return json_response(await shadow_stream(self.url, config, args))
        except (ValueError, AttributeError, yaml.YAMLError, ConfigError, CliError) as err:
            return error_response(400, " ".join(str(err).split()))


async def serve(args: argparse.Namespace) -> int:
    nc = await connect(args.nats)
    try:
        watch = ClusterWatch()
        await watch.start(nc.jetstream())
        ui = Ui(nc, watch, args.config, args.nats, RequestGuard(args.allow_host))
        server = await asyncio.start_server(connection_handler(ui.handle), args.listen, args.port)
        async with server:
            host, port = server.sockets[0].getsockname()[:2]
            emit(f"ksched ui: serving http://{host}:{port}/")
            flush_stdout()  # a supervisor (or test) reads the address from this line
            await server.serve_forever()
    finally:
        await nc.close()
    return 0


def run_ui(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(serve(args))
    except CliError as err:
        warn(f"error: {err}")
        return 1
    except OSError as err:
        warn(f"error: cannot listen on {args.listen}:{args.port}: {err}")
        return 1
