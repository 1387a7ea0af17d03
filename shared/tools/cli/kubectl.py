"""`ksched apply|delete|get|describe`: kubectl's verbs against ksched's cluster stream.

The shell around pure parts: apply.plan, tables, describe; everything goes over NATS.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import APIError

from shared.plugins import REGISTRY
from shared.runtime.connections import ensure_streams
from shared.subjects import (
    EXPECTED_LAST_SUBJECT_SEQ,
    node_subject,
    pdb_subject,
    pod_subject,
    priority_class_subject,
)
from shared.tools.cli.apply import Action, Current, plan, pod_lines
from shared.tools.cli.describe import describe_node, describe_pod
from shared.tools.cli.live import (
    CliError,
    ClusterWatch,
    Entry,
    answered,
    connect,
    read_cluster,
    read_events,
)
from shared.tools.cli.manifests import Manifest, ManifestError, read_manifests
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
from shared.wire import dump_json

RESOURCES = {
    "pods": "pod",
    "pod": "pod",
    "po": "pod",
    "nodes": "node",
    "node": "node",
    "no": "node",
}


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def stamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def resource(name: str) -> str:
    kind = RESOURCES.get(name.lower())
    if kind is None:
        raise CliError(
            f'the server doesn\'t have a resource type "{name}" (ksched knows pods and nodes)'
        )
    return kind


async def with_nats(url: str, body: Callable[[NATS], Awaitable[int]]) -> int:
    nc = await connect(url)
    try:
        return await body(nc)
    finally:
        await nc.close()


# --- apply / delete ---------------------------------------------------------------


def subject_of(kind: str, obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    if kind == "Node":
        return node_subject(meta["name"])
    if kind == "PriorityClass":
        return priority_class_subject(meta["name"])
    ns = meta.get("namespace") or "default"
    return (
        pdb_subject(ns, meta["name"])
        if kind == "PodDisruptionBudget"
        else pod_subject(ns, meta["name"])
    )


async def publish(js: JetStreamContext, action: Action) -> None:
    if not action.etype:
        return
    headers = {EXPECTED_LAST_SUBJECT_SEQ: str(action.expected_seq)} if action.expected_seq else None
    data = dump_json({"type": action.etype, "object": action.obj})
    try:
        await js.publish(subject_of(action.kind, action.obj), data, headers=headers)
    except APIError as err:
        name = action.obj["metadata"]["name"]
        raise CliError(
            f"{action.kind.lower()}/{name}: changed meanwhile, nothing written "
            f"({err.description}); apply again"
        ) from None


def current_of(watch: ClusterWatch) -> Current:
    def pairs(table: dict[str, Entry]) -> dict[str, tuple[dict[str, Any], int]]:
        return {k: (e.obj, e.seq) for k, e in table.items()}

    return Current(
        pairs(watch.pods), pairs(watch.nodes), pairs(watch.pdbs), pairs(watch.priority_classes)
    )


async def apply(nc: NATS, manifests: list[Manifest], out: Callable[[str], None]) -> int:
    js = nc.jetstream()
    await answered(lambda: ensure_streams(js))
    watch = await read_cluster(js)
    applied = plan(manifests, current_of(watch), stamp(now_utc()))
    for item in applied:
        # many acks in flight: one at a time would be ~2k objects/s
        await asyncio.gather(*(publish(js, a) for a in item.actions))
        out(item.line)
        for line in pod_lines(item):
            out(line)
    return 0


async def delete(
    nc: NATS, kind: str, names: list[str], namespace: str, out: Callable[[str], None]
) -> int:
    js = nc.jetstream()
    watch = await read_cluster(js)
    table = watch.pods if kind == "pod" else watch.nodes
    code = 0
    for name in names:
        entry = table.get(f"{namespace}/{name}" if kind == "pod" else name)
        if entry is None:
            print(f'Error from server (NotFound): {kind}s "{name}" not found', file=sys.stderr)
            code = 1
            continue
        await publish(js, Action(kind.capitalize(), entry.obj, "DELETED", entry.seq, "deleted"))
        out(f'{kind} "{name}" deleted')
    return code


# --- get --------------------------------------------------------------------------


def selected(
    watch: ClusterWatch, kind: str, names: list[str], namespace: str | None
) -> list[dict[str, Any]]:
    """The objects `get` shows, in kubectl's order (namespace, then name)."""
    table = watch.pods if kind == "pod" else watch.nodes
    objs = [e.obj for k, e in sorted(table.items())]
    if kind == "pod" and namespace is not None:
        objs = [o for o in objs if (o["metadata"].get("namespace") or "default") == namespace]
    if names:
        objs = [o for o in objs if o["metadata"]["name"] in names]
    return objs


def rows(kind: str, objs: list[dict[str, Any]], wide: bool, all_ns: bool) -> list[list[str]]:
    now = now_utc()
    if kind == "node":
        return [node_row(o, now, wide) for o in objs]
    return [
        ([o["metadata"].get("namespace") or "default"] if all_ns else []) + pod_row(o, now, wide)
        for o in objs
    ]


def headers(kind: str, wide: bool, all_ns: bool) -> list[str]:
    return node_columns(wide) if kind == "node" else pod_columns(wide, all_ns)


def render(kind: str, objs: list[dict[str, Any]], output: str, all_ns: bool) -> str:
    if output in ("json", "yaml"):
        return dump(objs[0] if len(objs) == 1 else as_list(objs), output)
    if output == "name":
        return "\n".join(f"{kind}/{o['metadata']['name']}" for o in objs)
    return render_table(
        headers(kind, output == "wide", all_ns), rows(kind, objs, output == "wide", all_ns)
    )


async def get(nc: NATS, args: argparse.Namespace, out: Callable[[str], None]) -> int:
    kind = resource(args.resource)
    namespace = None if args.all_namespaces else args.namespace
    js = nc.jetstream()
    changes: asyncio.Queue[tuple[str, str, dict[str, Any], bool]] = asyncio.Queue()
    watch = ClusterWatch(on_change=lambda *c: changes.put_nowait(c) if args.watch else None)
    await watch.start(js)
    objs = selected(watch, kind, args.names, namespace)
    missing = [n for n in args.names if n not in {o["metadata"]["name"] for o in objs}]
    for name in missing:
        print(f'Error from server (NotFound): {kind}s "{name}" not found', file=sys.stderr)
    if objs:
        out(render(kind, objs, args.output, args.all_namespaces))
    elif not args.names and not args.watch:
        where = "" if kind == "node" or namespace is None else f" in {namespace} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
    if args.watch:
        await follow(kind, args, namespace, objs, changes, out)
    return 1 if missing else 0


async def follow(
    kind: str,
    args: argparse.Namespace,
    namespace: str | None,
    shown: list[dict[str, Any]],
    changes: asyncio.Queue[tuple[str, str, dict[str, Any], bool]],
    out: Callable[[str], None],
) -> None:
    """`get -w`: one more row per change, aligned to the first table (kubectl's)."""
    wide, all_ns = args.output == "wide", args.all_namespaces
    heads = headers(kind, wide, all_ns)
    widths = column_widths(heads, rows(kind, shown, wide, all_ns))
    if not shown and args.output in ("", "wide"):
        out(render_rows([heads], widths))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.request_timeout if args.request_timeout else None
    while deadline is None or loop.time() < deadline:
        timeout = None if deadline is None else max(deadline - loop.time(), 0.0)
        try:
            what, _, obj, deleted = await asyncio.wait_for(changes.get(), timeout)
        except TimeoutError:
            return
        if what != kind:
            continue
        if deleted:  # its last row says it is going, as kubectl's does
            obj = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": stamp(now_utc())}}
        if (
            namespace is not None
            and kind == "pod"
            and (obj["metadata"].get("namespace") or "default") != namespace
        ):
            continue
        if args.names and obj["metadata"]["name"] not in args.names:
            continue
        if args.output in ("json", "yaml", "name"):
            out(render(kind, [obj], args.output, all_ns))
        else:
            out(render_rows(rows(kind, [obj], wide, all_ns), widths))


# --- describe ---------------------------------------------------------------------


async def describe(nc: NATS, args: argparse.Namespace, out: Callable[[str], None]) -> int:
    kind = resource(args.resource)
    js = nc.jetstream()
    watch = await read_cluster(js)
    if kind == "node":
        entry = watch.nodes.get(args.name)
        if entry is None:
            raise CliError(f'Error from server (NotFound): nodes "{args.name}" not found')
        pods = [
            e.obj
            for e in watch.pods.values()
            if (e.obj.get("spec") or {}).get("nodeName") == args.name
        ]
        out(describe_node(entry.obj, pods, now_utc()))
        return 0
    entry = watch.pods.get(f"{args.namespace}/{args.name}")
    if entry is None:
        raise CliError(f'Error from server (NotFound): pods "{args.name}" not found')
    events = await read_events(js, args.namespace, args.name)
    report = None
    if not (entry.obj.get("spec") or {}).get("nodeName"):
        report = explain_live(entry.obj, watch, args.config)
    out(describe_pod(entry.obj, events, now_utc(), report))
    return 0


def explain_live(
    pod: dict[str, Any], watch: ClusterWatch, config_path: str | None
) -> dict[str, Any] | None:
    """The pod's framework run against the cluster as the stream shows it now (nodes
    and bound pods), as `ksched simulate` runs it against a file."""
    from shared.config import load_config
    from shared.framework.runtime import Framework
    from shared.framework.types import PodInfo
    from shared.tools.cli.simulate import build_cluster, explain

    config = load_config(config_path)
    info = PodInfo.of(pod)
    profile = next(
        (p for p in config.profiles if p.scheduler_name == info.pod.spec.scheduler_name), None
    )
    if profile is None:
        return None
    objects = [e.obj for e in watch.nodes.values()] + [
        e.obj for e in watch.pods.values() if (e.obj.get("spec") or {}).get("nodeName")
    ]
    return explain(Framework.from_profile(profile, REGISTRY), info, build_cluster(objects), seed=0)


def run(args: argparse.Namespace) -> int:
    """Entry point of the kubectl-like verbs: user errors are one line, exit 1."""
    out = print
    try:
        if args.command == "apply":
            manifests = read_manifests(args.filename)  # bad files fail before NATS is asked
            return asyncio.run(with_nats(args.nats, lambda nc: apply(nc, manifests, out)))
        if args.command == "delete":
            kind = resource(args.resource)
            return asyncio.run(
                with_nats(args.nats, lambda nc: delete(nc, kind, args.names, args.namespace, out))
            )
        if args.command == "get":
            return asyncio.run(with_nats(args.nats, lambda nc: get(nc, args, out)))
        return asyncio.run(with_nats(args.nats, lambda nc: describe(nc, args, out)))
    except (CliError, ManifestError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except nats.errors.TimeoutError:  # a JetStream request went unanswered
        print("error: NATS did not answer in time", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
