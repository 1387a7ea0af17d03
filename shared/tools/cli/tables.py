"""kubectl's output shapes for `ksched get` (pure): columns, ages, -o json|yaml."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Container, Sequence
from typing import Any

NONE = "<none>"
ROLE_PREFIX = "node-role.kubernetes.io/"

POD_COLUMNS = ("NAME", "READY", "STATUS", "RESTARTS", "AGE")
POD_WIDE = ("IP", "NODE", "NOMINATED NODE", "READINESS GATES")
NODE_COLUMNS = ("NAME", "STATUS", "ROLES", "AGE", "VERSION")
NODE_WIDE = ("INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME")


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery duration.HumanDuration, as kubectl prints ages."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def percent(used: int, total: int) -> str:
    return f"{used * 100 // total}%" if total else "0%"


def parse_time(stamp: str | None) -> dt.datetime | None:
    if not stamp:
        return None
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def age(stamp: str | None, now: dt.datetime, seen: dt.datetime | None = None) -> str:
    """Since `stamp` (creationTimestamp); an object published without one is as old as
    its latest event in the stream (`seen`, the message's JetStream timestamp)."""
    when = parse_time(stamp) or seen
    return human_duration((now - when).total_seconds()) if when is not None else "<unknown>"


def pod_status(pod: dict[str, Any], nodes: Container[str] | None = None) -> str:
    """kubectl's STATUS, where no kubelet runs the pod: a bound pod shows `Scheduled`
    (kubectl would show ContainerCreating, then Running). A pod bound to a node that
    does not exist (`nodes`, when known) stays Pending, as no kubelet ever starts it."""
    meta, spec, status = (pod.get(k) or {} for k in ("metadata", "spec", "status"))
    if meta.get("deletionTimestamp"):
        return "Terminating"
    if status.get("reason"):
        return str(status["reason"])
    phase = status.get("phase") or "Pending"
    if phase != "Pending":
        return str(phase)
    if spec.get("nodeName"):
        return "Scheduled" if nodes is None or spec["nodeName"] in nodes else "Pending"
    if spec.get("schedulingGates"):
        return "SchedulingGated"
    return "Pending"


def pod_row(
    pod: dict[str, Any],
    now: dt.datetime,
    wide: bool = False,
    seen: dt.datetime | None = None,
    nodes: Container[str] | None = None,
) -> list[str]:
    meta, spec, status = (pod.get(k) or {} for k in ("metadata", "spec", "status"))
    containers = len(spec.get("containers") or [])
    row = [
        meta.get("name", ""),
        f"0/{containers}",
        pod_status(pod, nodes),
        "0",
        age(meta.get("creationTimestamp"), now, seen),
    ]
    if wide:
        gates = [g.get("conditionType", "") for g in spec.get("readinessGates") or []]
        row += [
            status.get("podIP") or NONE,
            spec.get("nodeName") or NONE,
            status.get("nominatedNodeName") or NONE,
            ",".join(gates) or NONE,
        ]
    return row


def node_roles(labels: dict[str, str]) -> str:
    roles = {k.removeprefix(ROLE_PREFIX) for k in labels if k.startswith(ROLE_PREFIX)}
    if labels.get("kubernetes.io/role"):
        roles.add(labels["kubernetes.io/role"])
    return ",".join(sorted(r for r in roles if r)) or NONE


def node_status(node: dict[str, Any]) -> str:
    """Ready unless the node publishes a Ready condition saying otherwise: ksched
    places pods on every node it knows, as the scheduler does on Ready ones."""
    status = node.get("status") or {}
    ready = next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, dict) and c.get("type") == "Ready"
        ),
        None,
    )
    text = "Ready"
    if ready is not None:
        text = {"True": "Ready", "False": "NotReady"}.get(str(ready.get("status")), "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def node_row(
    node: dict[str, Any], now: dt.datetime, wide: bool = False, seen: dt.datetime | None = None
) -> list[str]:
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    info = status.get("nodeInfo") or {}
    row = [
        meta.get("name", ""),
        node_status(node),
        node_roles(meta.get("labels") or {}),
        age(meta.get("creationTimestamp"), now, seen),
        info.get("kubeletVersion", ""),
    ]
    if wide:
        addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
        row += [
            addresses.get("InternalIP") or NONE,
            addresses.get("ExternalIP") or NONE,
            info.get("osImage") or NONE,
            info.get("kernelVersion") or NONE,
            info.get("containerRuntimeVersion") or NONE,
        ]
    return row


def pod_columns(wide: bool, namespaced: bool) -> list[str]:
    return (["NAMESPACE"] if namespaced else []) + list(POD_COLUMNS + (POD_WIDE if wide else ()))


def node_columns(wide: bool) -> list[str]:
    return list(NODE_COLUMNS + (NODE_WIDE if wide else ()))


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """kubectl's tabwriter: columns padded to their widest cell plus three spaces."""
    return render_rows([headers, *rows], column_widths(headers, rows))


def render_rows(rows: Sequence[Sequence[str]], widths: Sequence[int]) -> str:
    """Rows aligned to given widths (`get -w` keeps the first table's)."""
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)).rstrip() for r in rows
    )


def column_widths(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]


def as_list(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": list(objects),
        "metadata": {"resourceVersion": ""},
    }


def dump(obj: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(obj, indent=4)
    import yaml  # only here: the CLI starts faster without it

    return str(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)).rstrip("\n")


def groups_table(report: dict[str, Any]) -> str:
    """A what-if report's node groups: how many nodes, their verdicts, some of them."""
    rows = []
    for g in report.get("groups", []):
        reason = "; ".join(f"{p}: {v.split(': ', 1)[-1]}" for p, v in g["verdicts"].items())
        examples = ", ".join(g["nodes"]) + (", ..." if g["count"] > len(g["nodes"]) else "")
        rows.append([str(g["count"]), reason or "fits", examples])
    if report.get("groupsOmitted"):
        rows.append(["", f"({report['groupsOmitted']} more groups)", ""])
    return render_table(["NODES", "VERDICT", "E.G."], rows)
