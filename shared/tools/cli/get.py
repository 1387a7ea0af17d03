"""`ksched get pods|nodes|events`: kubectl's list, table and watch over the cluster
and events streams. Selection is query.py's, rendering tables.py's and events.py's."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
from collections.abc import Container, Sequence
from typing import Any

from nats.aio.client import Client as NATS

from shared.api.names import DEFAULT_NAMESPACE
from shared.runtime.timeouts import within
from shared.subjects import EVENTS_PREFIX
from shared.tools.cli.args import JSONPATH
from shared.tools.cli.events import event_columns, event_row, series
from shared.tools.cli.live import CliError, ClusterWatch, Entry, ServerError, read_events
from shared.tools.cli.output import Out, warn
from shared.tools.cli.query import BadRequest, Query, resource_args, selector
from shared.tools.cli.tables import (
    as_list,
    column_widths,
    dump,
    node_columns,
    node_row,
    pod_columns,
    pod_row,
    render_rows,
    render_table,
)

Change = tuple[str, str, dict[str, Any], bool]


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def stamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def namespace_of(args: argparse.Namespace) -> str | None:
    """-n (default: default), or None with -A."""
    if getattr(args, "all_namespaces", False):
        return None
    return str(args.namespace or DEFAULT_NAMESPACE)


def query_of(args: argparse.Namespace, kind: str, names: Sequence[str]) -> Query:
    try:
        selects = selector(kind, args.selector, args.field_selector)
    except BadRequest as err:
        raise ServerError(f"Error from server (BadRequest): {err}") from None
    return Query(kind, tuple(names), namespace_of(args), selects)


class View:
    """How `get` prints one kind: its columns, and a row per entry."""

    def __init__(self, args: argparse.Namespace, kind: str, nodes: Container[str]) -> None:
        self.kind, self.nodes = kind, nodes
        self.output = args.output
        self.wide = args.output == "wide"
        self.all_ns = bool(getattr(args, "all_namespaces", False))
        self.labels = bool(getattr(args, "show_labels", False))

    def headers(self) -> list[str]:
        heads = (
            node_columns(self.wide) if self.kind == "node" else pod_columns(self.wide, self.all_ns)
        )
        return heads + (["LABELS"] if self.labels else [])

    def rows(self, entries: Sequence[Entry]) -> list[list[str]]:
        now = now_utc()
        out = []
        for e in entries:
            meta = e.obj.get("metadata") or {}
            if self.kind == "node":
                row = node_row(e.obj, now, self.wide, e.at)
            else:
                namespace = [meta.get("namespace") or DEFAULT_NAMESPACE] if self.all_ns else []
                row = namespace + pod_row(e.obj, now, self.wide, e.at, self.nodes)
            if self.labels:
                from shared.tools.cli.labels import format_labels

                row.append(format_labels(meta.get("labels")))
            out.append(row)
        return out

    def render(self, entries: Sequence[Entry], single: bool) -> str:
        """The whole output; `single`: one object asked by name (kubectl prints it
        itself, not a List, with -o json|yaml|jsonpath)."""
        objs = [e.obj for e in entries]
        return render_objects(self.kind, objs, self.output, single) or render_table(
            self.headers(), self.rows(entries)
        )


def render_objects(kind: str, objs: list[dict[str, Any]], output: str, single: bool) -> str:
    """-o json|yaml|name|jsonpath ("" for the table outputs)."""
    data = objs[0] if single and len(objs) == 1 else as_list(objs)
    if output in ("json", "yaml"):
        return dump(data, output)
    if output == "name":
        return "\n".join(f"{kind}/{(o.get('metadata') or {}).get('name')}" for o in objs)
    if output.startswith(JSONPATH):
        from shared.tools.cli.jsonpath import JSONPathError, render

        try:
            return render(output[len(JSONPATH) :], data)
        except JSONPathError as err:
            raise CliError(str(err)) from None
    return ""


async def get(nc: NATS, args: argparse.Namespace, out: Out) -> int:
    kind, names = resource_args(args.args)
    if kind == "event":
        return await get_events(nc, args, names, out)
    query = query_of(args, kind, names)
    changes: asyncio.Queue[Change] = asyncio.Queue()
    watch = ClusterWatch(on_change=lambda *c: changes.put_nowait(c) if args.watch else None)
    await watch.start(nc.jetstream())
    entries = query.select(watch.pods if kind == "pod" else watch.nodes, lambda e: e.obj)
    missing = query.missing([e.obj for e in entries])
    for name in missing:
        warn(f'Error from server (NotFound): {kind}s "{name}" not found')
    view = View(args, kind, watch.nodes)
    if entries:  # kubectl ends a jsonpath result with no newline of its own
        out(view.render(entries, single=len(names) == 1), end=end_of(args.output))
    elif not names and not args.watch:
        warn(no_resources(kind, query.namespace))
    if args.watch:
        await follow(query, view, entries, changes, args.request_timeout, out)
    return 1 if missing else 0


def no_resources(kind: str, namespace: str | None) -> str:
    where = "" if kind == "node" or namespace is None else f" in {namespace} namespace"
    return f"No resources found{where}."


async def follow(
    query: Query,
    view: View,
    shown: Sequence[Entry],
    changes: asyncio.Queue[Change],
    timeout: float,
    out: Out,
) -> None:
    """`get -w`: one more row per change, aligned to the first table (kubectl's)."""
    table = view.output in ("", "wide")
    widths = column_widths(view.headers(), view.rows(shown))
    if not shown and table:
        out(render_rows([view.headers()], widths))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout if timeout else None
    while deadline is None or loop.time() < deadline:
        left = None if deadline is None else max(deadline - loop.time(), 0.0)
        try:
            what, _, obj, deleted = await within(changes.get(), left)
        except TimeoutError:
            return
        if deleted:  # its last row says it is going, as kubectl's does
            obj = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": stamp(now_utc())}}
        if what != query.kind or not query.wants(obj):
            continue
        entry = Entry(obj, 0, now_utc())
        if table:
            out(render_rows(view.rows([entry]), widths))
        else:
            out(view.render([entry], single=True), end=end_of(view.output))


async def get_events(nc: NATS, args: argparse.Namespace, names: list[str], out: Out) -> int:
    """`get events`: the events stream's Event objects, repeats folded (events.series)."""
    if args.watch:
        raise CliError("ksched get events has no --watch; run it again instead")
    namespace = namespace_of(args)
    subject = f"{EVENTS_PREFIX}.{namespace}.>" if namespace else f"{EVENTS_PREFIX}.>"
    events = series(await read_events(nc.jetstream(), subject))
    if names:
        events = [e for e in events if (e.get("metadata") or {}).get("name") in names]
    if not events:
        warn(no_resources("event", namespace))
        return 0
    shown = render_objects("event", events, args.output, single=len(names) == 1)
    if not shown:
        now = now_utc()
        rows = [event_row(e, now, namespace is None) for e in events]
        shown = render_table(event_columns(namespace is None), rows)
    out(shown, end=end_of(args.output))
    return 0


def end_of(output: str) -> str:
    return "" if output.startswith(JSONPATH) else "\n"
