"""`ksched apply|create|delete|get|describe`: kubectl's verbs against ksched's cluster
stream. The shell around pure parts (apply.plan, create.plan_create,
deletes.plan_delete, query, describe; `get` is get.py); everything goes over NATS.

Each verb imports what it needs when it runs (apply's planner brings the pydantic
models, `describe` of a pending pod the whole framework): the CLI starts fast.
Files are read before NATS is asked, so a bad file publishes nothing. Publishing
goes on to the end whatever happens to stdout (output.py).
"""

from __future__ import annotations

import argparse
import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import APIError

from shared.subjects import EXPECTED_LAST_SUBJECT_SEQ
from shared.tools.cli.get import get, namespace_of, now_utc, query_of, stamp
from shared.tools.cli.live import (
    CliError,
    ClusterWatch,
    Entry,
    ServerError,
    answered,
    connect,
    read_cluster,
    read_events,
)
from shared.tools.cli.manifests import ManifestError, read_all
from shared.tools.cli.output import Out, emit, warn
from shared.tools.cli.query import QueryError, resource_args
from shared.wire import dump_json

if TYPE_CHECKING:
    from shared.tools.cli.apply import Action, Current
    from shared.tools.cli.manifests import Manifest

Body = Callable[[NATS], Awaitable[int]]
# acks in flight at once: one at a time would be ~2k objects/s
PUBLISH_WINDOW = 512


async def with_nats(url: str, body: Body) -> int:
    nc = await connect(url)
    try:
        return await body(nc)
    finally:
        await nc.close()


# --- publishing ---------------------------------------------------------------------


async def publish(js: JetStreamContext, action: Action) -> str | None:
    """Publish one watch event, on the subject's expected sequence; the error line
    when the object changed meanwhile (nothing written)."""
    if not action.etype:
        return None
    headers = {EXPECTED_LAST_SUBJECT_SEQ: str(action.expected_seq)} if action.expected_seq else None
    data = dump_json({"type": action.etype, "object": action.obj})
    try:
        await js.publish(action.subject, data, headers=headers)
    except APIError as err:
        name = action.obj["metadata"]["name"]
        return (
            f"error: {action.kind.lower()}/{name}: changed meanwhile, nothing written "
            f"({err.description}); try again"
        )
    return None


async def publish_in_order(
    js: JetStreamContext, items: Sequence[tuple[list[str], Sequence[Action]]], out: Out
) -> int:
    """Each item's actions published (many acks in flight), then its lines printed,
    in order; 1 if any write was refused."""
    code = 0
    for start in range(0, len(items), PUBLISH_WINDOW):
        window = items[start : start + PUBLISH_WINDOW]
        results = await asyncio.gather(*(publish(js, a) for _, acts in window for a in acts))
        refused = iter(results)
        for lines, actions in window:
            errors = [e for e in (next(refused) for _ in actions) if e]
            for line in errors or lines:
                (warn if errors else out)(line)
            code |= bool(errors)
    return code


def current_of(watch: ClusterWatch) -> Current:
    from shared.tools.cli.apply import Current

    def pairs(table: dict[str, Entry]) -> dict[str, tuple[dict[str, Any], int]]:
        return {k: (e.obj, e.seq) for k, e in table.items()}

    return Current(
        pairs(watch.pods),
        pairs(watch.nodes),
        pairs(watch.pdbs),
        pairs(watch.priority_classes),
        pairs(watch.services),
        pairs(watch.replica_sets),
        pairs(watch.stateful_sets),
        pairs(watch.replication_controllers),
        pairs(watch.workloads),
    )


# --- apply / create -----------------------------------------------------------------


def read_files(args: argparse.Namespace) -> list[Manifest]:
    from shared.tools.cli.namespaces import in_namespace

    manifests = in_namespace(read_all(args.filename), args.namespace)
    if not manifests:
        raise ManifestError(f"no objects passed to {args.command}")
    return manifests


async def apply(nc: NATS, manifests: list[Manifest], out: Out) -> int:
    from shared.runtime.connections import ensure_streams
    from shared.tools.cli.apply import plan, pod_lines

    js = nc.jetstream()
    await answered(lambda: ensure_streams(js))
    watch = await read_cluster(js)
    applied = plan(manifests, current_of(watch), stamp(now_utc()))
    for item in applied:
        if item.warning:  # a kind ksched does not schedule by: skipped, said on stderr
            warn(item.line)
    items = [([a.line, *pod_lines(a)], a.actions) for a in applied if not a.warning]
    return await publish_in_order(js, items, out)


async def create(nc: NATS, manifests: list[Manifest], out: Out) -> int:
    from shared.runtime.connections import ensure_streams
    from shared.tools.cli.apply import pod_lines
    from shared.tools.cli.create import plan_create

    js = nc.jetstream()
    await ensure_streams(js)
    watch = await read_cluster(js)
    outcomes = plan_create(manifests, current_of(watch), stamp(now_utc()), random.Random())
    items = [
        ([o.created.line, *pod_lines(o.created)], o.created.actions) for o in outcomes if o.created
    ]
    code = await publish_in_order(js, items, out)
    for refused in (o.error for o in outcomes if o.error):
        warn(refused)
        code = 1
    return code


# --- delete -------------------------------------------------------------------------


async def delete(nc: NATS, args: argparse.Namespace, manifests: list[Manifest], out: Out) -> int:
    from shared.tools.cli.deletes import Deletion, deleted, plan_delete

    js = nc.jetstream()
    watch = await read_cluster(js)
    if manifests:
        deletions = plan_delete(manifests, current_of(watch))
    else:
        kind, names = resource_args(args.args)
        query = query_of(args, kind, names)
        table = watch.pods if kind == "pod" else watch.nodes
        found = query.select(table, lambda e: e.obj)
        deletions = [
            deleted(
                kind.capitalize(), e.obj["metadata"]["name"], [(kind.capitalize(), e.obj, e.seq)]
            )
            for e in found
        ] + [
            Deletion(error=f'Error from server (NotFound): {kind}s "{n}" not found')
            for n in query.missing([e.obj for e in found])
        ]
        if not deletions:
            warn("No resources found")
    for note in (d.warning for d in deletions if d.warning):
        warn(note)
    items: list[tuple[list[str], Sequence[Action]]] = [
        ([d.line], d.actions) for d in deletions if d.line
    ]
    code = await publish_in_order(js, items, out)
    for error in (d.error for d in deletions if d.error):
        warn(error)
        code = 1
    return code


def check_delete_args(args: argparse.Namespace) -> None:
    """kubectl's rules: files, or a type with names, --all or a selector."""
    selecting = bool(args.all or args.selector or args.field_selector)
    if args.filename:
        if args.args:
            raise CliError(
                "when paths, URLs, or stdin is provided as input, you may not specify "
                "resource arguments as well"
            )
        return
    if not args.args:
        raise CliError("You must provide one or more resources by argument or filename.")
    kind, names = resource_args(args.args)
    if kind == "event":
        raise CliError("ksched's events age out of their stream; they cannot be deleted")
    if names and selecting:
        raise CliError("name cannot be provided when a selector is specified")
    if not names and not selecting:
        raise CliError("resource(s) were provided, but no name was specified")


# --- describe -----------------------------------------------------------------------


async def describe(nc: NATS, args: argparse.Namespace, out: Out) -> int:
    from shared.subjects import event_subject
    from shared.tools.cli.describe import describe_node, describe_pod
    from shared.tools.cli.events import about, series

    kind, names = resource_args(args.args)
    if kind == "event" or len(names) != 1:
        raise CliError("ksched describes one pod or node: ksched describe pod|node NAME")
    name, namespace = names[0], namespace_of(args) or "default"
    js = nc.jetstream()
    watch = await read_cluster(js)
    if kind == "node":
        entry = watch.nodes.get(name)
        if entry is None:
            raise ServerError(f'Error from server (NotFound): nodes "{name}" not found')
        pods = [
            e.obj for e in watch.pods.values() if (e.obj.get("spec") or {}).get("nodeName") == name
        ]
        out(describe_node(entry.obj, pods, now_utc()))
        return 0
    entry = watch.pods.get(f"{namespace}/{name}")
    if entry is None:
        raise ServerError(f'Error from server (NotFound): pods "{name}" not found')
    events = series(about(await read_events(js, event_subject(namespace, name)), entry.obj))
    node = (entry.obj.get("spec") or {}).get("nodeName")
    report = None if node else explain_live(entry.obj, watch, args.config)
    out(
        describe_pod(
            entry.obj,
            events,
            now_utc(),
            report,
            node_missing=bool(node) and node not in watch.nodes,
        )
    )
    return 0


def explain_live(
    pod: dict[str, Any], watch: ClusterWatch, config_path: str | None
) -> dict[str, Any] | None:
    """A what-if of the pod (shared/framework/whatif.py) against the cluster as the
    stream shows it now (nodes and bound pods), with its profile's framework."""
    objects = [e.obj for e in watch.nodes.values()] + [
        e.obj for e in watch.pods.values() if (e.obj.get("spec") or {}).get("nodeName")
    ]
    return explain_against(pod, objects, config_path)


def explain_against(
    pod: dict[str, Any],
    objects: list[dict[str, Any]],
    config_path: str | None,
    node: str | None = None,
    nodes_per_group: int | None = None,
) -> dict[str, Any] | None:
    """The pod's what-if against `objects` (nodes and bound pods) with its profile's
    framework; None when no profile serves its schedulerName. `ksched ui` asks for a
    node's detail and more node names per verdict group."""
    from shared.config import load_config
    from shared.framework.runtime import Framework
    from shared.framework.types import PodInfo
    from shared.framework.whatif import WhatIfLimits, what_if
    from shared.plugins import REGISTRY
    from shared.tools.cli.simulate import build_cluster

    config = load_config(config_path)
    info = PodInfo.of(pod)
    profile = next(
        (p for p in config.profiles if p.scheduler_name == info.pod.spec.scheduler_name), None
    )
    if profile is None:
        return None
    limits = WhatIfLimits()
    if nodes_per_group is not None:
        limits = WhatIfLimits(nodes_per_group=nodes_per_group)
    fw = Framework.from_profile(profile, REGISTRY)
    percentage = config.percentage_of_nodes_to_score
    snapshot = build_cluster(objects)
    return what_if(fw, [info], snapshot, percentage=percentage, node=node, limits=limits)


# --- entry point --------------------------------------------------------------------


def body_of(args: argparse.Namespace) -> Body:
    """The verb's work against NATS; files are read (and refused) here, before."""
    out = emit
    if args.command in ("apply", "create"):
        manifests = read_files(args)
        verb = apply if args.command == "apply" else create
        return lambda nc: verb(nc, manifests, out)
    if args.command == "delete":
        check_delete_args(args)
        files = read_files(args) if args.filename else []
        return lambda nc: delete(nc, args, files, out)
    if args.command == "get":
        return lambda nc: get(nc, args, out)
    return lambda nc: describe(nc, args, out)


def run(args: argparse.Namespace) -> int:
    """Entry point of the kubectl-like verbs: user errors are one line, exit 1."""
    try:
        return asyncio.run(with_nats(args.nats, body_of(args)))
    except ServerError as err:
        warn(str(err))
    except (CliError, ManifestError, QueryError) as err:
        warn(f"error: {err}")
    return 1
