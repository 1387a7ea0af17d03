"""`ksched whatif -f FILE`: where a pod, or a workload's replicas, would go now, and
why, without writing anything.

A worker answers (subjects.WHATIF, services/worker/whatif.py) from the snapshot it
schedules against; this module builds the request from the manifest (a Pod, or a
Deployment, ReplicaSet, ReplicationController, StatefulSet or Job expanded as `ksched
apply` expands it: its first pod and how many there are) and prints the report
(shared/framework/whatif.py) as tables, or as JSON with `-o json`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import uuid
from typing import Any

from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from shared.messages import WhatIfRequest
from shared.subjects import CLUSTER_STREAM, WHATIF, priority_class_subject
from shared.tools.cli.live import CliError, connect
from shared.tools.cli.manifests import (
    WORKLOAD_KINDS,
    Manifest,
    ManifestError,
    load_objects,
    read_all,
)
from shared.tools.cli.output import emit, warn
from shared.tools.cli.tables import groups_table, render_table
from shared.wire import dump_json

REQUEST_TIMEOUT_SECONDS = 10
SERVICE_ERROR_HEADER = "Nats-Service-Error"  # nats.micro's error reply


def request_of(
    manifests: list[Manifest], config: dict[str, Any] | None, node: str | None, top: int
) -> WhatIfRequest:
    """The request for the one Pod or workload in `manifests` (pure). A Pod goes as it
    is (the worker validates it and says what is wrong); the workload modules load only
    for a workload (the command starts faster without them)."""
    found = [m for m in manifests if m.obj.get("kind") in ("Pod", *WORKLOAD_KINDS)]
    if len(found) != 1:
        raise ManifestError(f"expected one Pod or workload, found {len(found)}")
    m = found[0]
    if m.obj["kind"] == "DaemonSet":
        raise m.error("a DaemonSet places one pod per node by design: ask about its pod")
    if m.obj["kind"] == "Pod":
        pods = [m.obj]
    else:
        from shared.tools.cli.workloads import (
            expand,
            validate_owner,
            validate_pod,
            with_default_selector,
        )

        m = with_default_selector(m)
        validate_owner(m)
        pods = expand(m, [])
        if not pods:
            raise m.error("the workload asks for no pods")
        validate_pod(m, pods[0])
    req: WhatIfRequest = {"pod": as_created(pods[0]), "replicas": len(pods), "top": top}
    if config is not None:
        req["config"] = config
    if node:
        req["node"] = node
    return req


def as_created(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod with what the API server adds on create (namespace, uid, creation time)."""
    meta = dict(pod.get("metadata") or {})
    meta.setdefault("namespace", "default")
    meta.setdefault("uid", str(uuid.uuid4()))
    meta.setdefault("creationTimestamp", dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return {**pod, "metadata": meta}


async def admitted(nc: NATS, pod: dict[str, Any]) -> dict[str, Any]:
    """Priority admission for a pod that names a PriorityClass (the one it names is read
    from the cluster stream); a global default class is not looked up."""
    name = (pod.get("spec") or {}).get("priorityClassName")
    if not name:
        return pod
    from shared.api.priority import PriorityClass, PriorityClasses, Refused

    classes = PriorityClasses()
    try:
        msg = await nc.jetstream().get_last_msg(CLUSTER_STREAM, priority_class_subject(name))
        event = json.loads(msg.data or b"{}")
        if event.get("type") != "DELETED":
            classes.upsert(PriorityClass.model_validate(event["object"]))
    except Exception:  # not found (or unreadable): admission refuses it below
        pass
    try:
        return classes.admit(pod)
    except Refused as err:
        raise CliError(str(err)) from None


async def ask(nc: NATS, req: WhatIfRequest) -> dict[str, Any]:
    req["pod"] = await admitted(nc, req["pod"])
    try:
        msg = await nc.request(WHATIF, dump_json(req), timeout=REQUEST_TIMEOUT_SECONDS)
    except NoRespondersError:
        raise CliError("no worker answers what-if requests: is ksched running?") from None
    except NatsTimeout:
        raise CliError(f"no what-if answer within {REQUEST_TIMEOUT_SECONDS} s") from None
    error = (msg.headers or {}).get(SERVICE_ERROR_HEADER)
    if error:
        raise CliError(error)
    report: dict[str, Any] = json.loads(msg.data)
    return report


# --- the tables -------------------------------------------------------------------------


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report for a person: the decision, the nodes grouped by verdict, the best
    scores, then preemption, the workload and a node's detail when there are."""
    lines = [f"Pod {report['pod']} (profile {report['profile']}) against {report['nodes']} nodes"]
    gated = report.get("gated")
    if gated:
        lines.append(f"Held by PreEnqueue plugin {gated['plugin']}: {gated['message']}")
        lines.append("It is not scheduled until the gate opens.")
        return lines
    lines.append(_decision(report))
    lines += _permit_lines(report.get("permit"), report.get("preEnqueue"))
    lines += ["", "Filter (nodes with the same verdicts together):"]
    lines += indent(groups_table(report))
    if report["scores"]:
        lines += ["", f"Score (the best {len(report['scores'])} of {report['feasible']}):"]
        lines += indent(scores_table(report["scores"]))
    lines += _preemption_lines(report.get("preemption"))
    lines += _replica_lines(report.get("replicas"))
    lines += _node_lines(report.get("node"))
    if report.get("truncated"):
        lines += ["", "(lists cut short to fit one message)"]
    return lines


def _decision(report: dict[str, Any]) -> str:
    if report["chosen"] is None:
        return f"Fits nowhere: {report.get('message', '')}"
    best, count = report["best"], report["bestCount"]
    text = f"Chosen node: {report['chosen']}"
    if count > 1:
        more = f" and {count - len(best)} more" if count > len(best) else ""
        text += f" (drawn among {count} with the best score: {', '.join(best[:5])}{more})"
    if report["feasible"] > report["sampled"]:
        text += (
            f"; the scheduler scores {report['sampled']} of the {report['feasible']} "
            "feasible nodes, from where its last cycle stopped: it may pick another"
        )
    return text


def _permit_lines(permit: dict[str, Any] | None, gate: dict[str, Any] | None) -> list[str]:
    """What Permit would do with the placed pod: held for its gang, or rejected."""
    lines = []
    if gate:
        lines.append(
            f"PreEnqueue plugin {gate['plugin']} counts the gang's pending pods too, which "
            f"a worker does not see: it holds the pod until minCount pods exist ({gate['message']})"
        )
    if not permit:
        return lines
    rejected = permit.get("rejected")
    if rejected:
        return [*lines, f"Rejected at Permit by {rejected['plugin']}: {rejected['message']}"]
    for wait in permit["wait"]:
        text = f"Would wait at Permit for {wait['plugin']}: {wait['message']}"
        if "minCount" in wait:
            text += f" ({wait['placed']} of minCount {wait['minCount']} placed, this pod included)"
        lines.append(f"{text}; not bound until then, rejected after {wait['timeoutSeconds']:g} s")
    return lines


def scores_table(scores: list[dict[str, Any]]) -> str:
    """Per node: the total, and per plugin its normalized score (raw in brackets) times
    its weight."""
    plugins = list(scores[0]["plugins"])
    rows = [
        [s["node"], str(s["total"])]
        + [
            f"{p['normalized']}({p['raw']})x{p['weight']}"
            for p in (s["plugins"][name] for name in plugins)
        ]
        for s in scores
    ]
    return render_table(["NODE", "TOTAL", *plugins], rows)


def _preemption_lines(pre: dict[str, Any] | None) -> list[str]:
    if not pre:
        return []
    victims = ", ".join(f"{v['pod']} (priority {v['priority']})" for v in pre["victims"])
    lines = ["", f"Preemption: on {pre['node']}, {pre['victimCount']} victim(s): {victims}"]
    for pdb in pre["pdbs"]:
        verdict = "violated" if pdb["violated"] else "respected"
        lines.append(
            f"  PodDisruptionBudget {pdb['name']} allows {pdb['allowed']}, "
            f"{len(pdb['victims'])} would go: {verdict}"
        )
    if pre["lowerNominated"]:
        lines.append(f"  loses its nomination there: {', '.join(pre['lowerNominated'])}")
    return lines


def _replica_lines(replicas: dict[str, Any] | None) -> list[str]:
    if not replicas:
        return []
    placed = ", ".join(f"{n} x{c}" for n, c in replicas["placements"].items())
    return [
        "",
        f"Workload: {replicas['fit']} of {replicas['requested']} replicas fit, "
        f"on {replicas['nodes']} nodes: {placed}",
    ]


def _node_lines(node: dict[str, Any] | None) -> list[str]:
    if not node:
        return []
    lines = ["", f"Node {node['name']}:"]
    rows = [[plugin, verdict] for plugin, verdict in node["filter"].items()]
    lines += indent(render_table(["FILTER", "VERDICT"], rows))
    if "score" in node:
        rows = [
            [plugin, str(s["raw"]), str(s["normalized"]), str(s["weight"]), str(s["weighted"])]
            for plugin, s in node["score"].items()
        ]
        table = render_table(["SCORE", "RAW", "NORMALIZED", "WEIGHT", "WEIGHTED"], rows)
        lines += [*indent(table), f"  total {node['total']}"]
    return lines


def indent(table: str) -> list[str]:
    return ["  " + line for line in table.splitlines()]


def run_whatif(args: argparse.Namespace) -> int:
    try:
        manifests = read_all(args.filename)
        if args.namespace is not None:
            from shared.tools.cli.namespaces import in_namespace

            manifests = in_namespace(manifests, args.namespace)
        config = None
        if args.config:
            docs = load_objects(args.config)
            if len(docs) != 1:
                raise ManifestError(f"{args.config}: expected one KubeSchedulerConfiguration")
            config = docs[0]
        req = request_of(manifests, config, args.node, args.top)
        report = asyncio.run(_ask(args.nats, req))
    except (ManifestError, CliError) as err:
        warn(f"error: {err}")
        return 1
    if args.output == "json":
        emit(json.dumps(report, indent=2))
    else:
        emit("\n".join(report_lines(report)))
    return 0


async def _ask(url: str, req: WhatIfRequest) -> dict[str, Any]:
    nc = await connect(url)
    try:
        return await ask(nc, req)
    finally:
        await nc.close()
