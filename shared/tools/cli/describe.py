"""`ksched describe` rendering (pure): kubectl's layout, plus, for a pending pod, what
each node's Filter plugins say about it now."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from shared.api.podstatus import scheduler_name
from shared.api.resources import pod_limits as spec_limits
from shared.api.resources import pod_requests
from shared.framework.types import allocatable_of
from shared.tools.cli.events import interval
from shared.tools.cli.tables import (
    NONE,
    age,
    groups_table,
    node_roles,
    percent,
    pod_status,
    render_table,
)

BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
SHOWN_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def amount(name: str, value: int) -> str:
    """An accounting amount back in quantity notation: 1500 (millicpu) -> 1500m."""
    if name == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        for suffix, size in BINARY:
            if value and value % size == 0:
                return f"{value // size}{suffix}"
    return str(value)


def pod_limits(pod: dict[str, Any]) -> dict[str, int]:
    """Limits summed like requests (kube's PodLimits, pod-level limits included)."""
    return spec_limits(pod.get("spec") or {})


def field_lines(pairs: Sequence[tuple[str, str | list[str]]], indent: int = 0) -> list[str]:
    """`Key:   value` lines aligned like kubectl's describe; a list value continues
    on the following lines under the first."""
    width = max(len(k) for k, _ in pairs) + 2
    lines = []
    for key, value in pairs:
        values = value if isinstance(value, list) else [value]
        values = values or [NONE]
        lines.append(" " * indent + f"{key + ':':<{width}}{values[0]}".rstrip())
        lines += [" " * (indent + width) + v for v in values[1:]]
    return lines


def labels_list(labels: dict[str, str] | None) -> list[str]:
    return [f"{k}={v}" for k, v in sorted((labels or {}).items())] or [NONE]


def taints_list(taints: list[dict[str, Any]]) -> list[str]:
    return [
        f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
        for t in taints
    ] or [NONE]


def tolerations_list(tolerations: list[dict[str, Any]]) -> list[str]:
    """kubectl's `key=value:Effect op=Exists for 300s`."""
    out = []
    for t in tolerations:
        text = (t.get("key") or "") + (f"={t['value']}" if t.get("value") else "")
        text += f":{t['effect']}" if t.get("effect") else ""
        text += " op=Exists" if t.get("operator") == "Exists" else ""
        if t.get("tolerationSeconds") is not None:
            text += f" for {t['tolerationSeconds']}s"
        out.append(text.strip())
    return out or [NONE]


def describe_pod(
    pod: dict[str, Any],
    events: Sequence[dict[str, Any]],
    now: dt.datetime,
    explanation: dict[str, Any] | None = None,
    node_missing: bool = False,
) -> str:
    """kubectl describe pod; `events` are the pod's own (events.about), repeats
    folded (events.series); `node_missing`: spec.nodeName names no known node."""
    meta, spec, status = (pod.get(k) or {} for k in ("metadata", "spec", "status"))
    owners = meta.get("ownerReferences") or []
    node = spec.get("nodeName") or NONE
    if node_missing:
        node += " (not found: no such node in the cluster)"
    lines = field_lines(
        [
            ("Name", meta.get("name", "")),
            ("Namespace", meta.get("namespace") or "default"),
            ("Priority", str(spec.get("priority", 0))),
            ("Scheduler", scheduler_name(pod)),
            ("Node", node),
            ("Labels", labels_list(meta.get("labels"))),
            ("Annotations", labels_list(meta.get("annotations"))),
            ("Status", pod_status(pod, () if node_missing else None)),
            ("Nominated Node", status.get("nominatedNodeName") or NONE),
            (
                "Controlled By",
                f"{owners[0].get('kind')}/{owners[0].get('name')}" if owners else NONE,
            ),
        ]
    )
    lines.append("Containers:")
    for c in spec.get("containers") or []:
        lines += _container_lines(c)
    lines.append("Conditions:")
    conds = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    lines.append(
        "  "
        + render_table(
            ["Type", "Status"], [[c.get("type", ""), c.get("status", "")] for c in conds]
        ).replace("\n", "\n  ")
        if conds
        else f"  {NONE}"
    )
    lines += field_lines(
        [
            ("Node-Selectors", labels_list(spec.get("nodeSelector"))),
            ("Tolerations", tolerations_list(spec.get("tolerations") or [])),
        ]
    )
    if explanation is not None:
        lines += explanation_lines(explanation)
    lines += event_lines(events, now)
    return "\n".join(lines)


def _container_lines(c: dict[str, Any]) -> list[str]:
    lines = [f"  {c.get('name', '')}:", f"    Image:  {c.get('image') or NONE}"]
    for part in ("Requests", "Limits"):
        values = (c.get("resources") or {}).get(part.lower()) or {}
        if values:
            lines.append(f"    {part}:")
            lines += field_lines([(k, str(v)) for k, v in values.items()], indent=6)
    return lines


def explanation_lines(report: dict[str, Any]) -> list[str]:
    """What the scheduler makes of the pending pod now (a what-if report,
    shared/framework/whatif.py): held by a PreEnqueue plugin, or each node's Filter
    verdicts, nodes with the same verdicts counted together as FailedScheduling's
    message counts them, and the node it would get."""
    gated = report.get("gated")
    if gated:
        return [
            "Scheduling:",
            f"  Held by PreEnqueue plugin {gated['plugin']}: {gated['message']}",
            "  Not scheduled (nor its nodes judged) until the plugin lets it through.",
        ]
    lines = [
        "Scheduling (each node's Filter plugins against the current cluster, "
        "nodes with the same verdicts together):"
    ]
    if not report.get("nodes"):
        return [*lines, "  no nodes"]
    lines += ["  " + line for line in groups_table(report).splitlines()]
    chosen = report.get("chosen")
    if chosen:
        score = next((s["total"] for s in report.get("scores", []) if s["node"] == chosen), None)
        lines.append(f"  It would go to {chosen} now" + (f" (score {score})" if score else ""))
    return lines


def event_lines(events: Sequence[dict[str, Any]], now: dt.datetime) -> list[str]:
    if not events:
        return [f"Events:  {NONE}"]
    rows = [
        [
            e.get("type", ""),
            e.get("reason", ""),
            interval(e, now),
            (e.get("source") or {}).get("component") or e.get("reportingComponent", ""),
            e.get("message", ""),
        ]
        for e in events
    ]
    headers = ["Type", "Reason", "Age", "From", "Message"]
    underline = ["-" * len(h) for h in headers]
    table = render_table(headers, [underline, *rows])
    return ["Events:", *("  " + line for line in table.splitlines())]


def describe_node(node: dict[str, Any], pods: Sequence[dict[str, Any]], now: dt.datetime) -> str:
    meta, spec, status = (node.get(k) or {} for k in ("metadata", "spec", "status"))
    allocatable = allocatable_of(node)
    lines = field_lines(
        [
            ("Name", meta.get("name", "")),
            ("Roles", node_roles(meta.get("labels") or {})),
            ("Labels", labels_list(meta.get("labels"))),
            ("Annotations", labels_list(meta.get("annotations"))),
            ("CreationTimestamp", meta.get("creationTimestamp") or NONE),
            ("Taints", taints_list(spec.get("taints") or [])),
            ("Unschedulable", str(bool(spec.get("unschedulable"))).lower()),
        ]
    )
    for title, values in (("Capacity", status.get("capacity") or {}), ("Allocatable", None)):
        lines.append(f"{title}:")
        shown = values if values is not None else {k: amount(k, v) for k, v in allocatable.items()}
        lines += field_lines([(k, str(v)) for k, v in shown.items()] or [("", NONE)], indent=2)
    lines += _node_pod_lines(pods, allocatable, now)
    return "\n".join(lines)


def _node_pod_lines(
    pods: Sequence[dict[str, Any]], allocatable: dict[str, int], now: dt.datetime
) -> list[str]:
    lines = [f"Non-terminated Pods:  ({len(pods)} in total)"]
    headers = [
        "Namespace",
        "Name",
        "CPU Requests",
        "CPU Limits",
        "Memory Requests",
        "Memory Limits",
        "Age",
    ]
    rows, total_req, total_lim = (
        [],
        {r: 0 for r in SHOWN_RESOURCES},
        {r: 0 for r in SHOWN_RESOURCES},
    )
    for pod in sorted(
        pods, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"])
    ):
        req, lim = pod_requests(pod.get("spec") or {}), pod_limits(pod)
        for r in SHOWN_RESOURCES:
            total_req[r] += req.get(r, 0)
            total_lim[r] += lim.get(r, 0)
        meta = pod["metadata"]
        rows.append(
            [meta.get("namespace") or "default", meta["name"]]
            + [
                f"{amount(r, src.get(r, 0))} ({percent(src.get(r, 0), allocatable.get(r, 0))})"
                for r, src in (("cpu", req), ("cpu", lim), ("memory", req), ("memory", lim))
            ]
            + [age(meta.get("creationTimestamp"), now)]
        )
    if rows:
        table = render_table(headers, [["-" * len(h) for h in headers], *rows])
        lines += ["  " + line for line in table.splitlines()]
    lines.append("Allocated resources:")
    lines.append("  (Total limits may be over 100 percent, i.e., overcommitted.)")
    res_rows = [
        [
            r,
            f"{amount(r, total_req[r])} ({percent(total_req[r], allocatable.get(r, 0))})",
            f"{amount(r, total_lim[r])} ({percent(total_lim[r], allocatable.get(r, 0))})",
        ]
        for r in SHOWN_RESOURCES
    ]
    res_rows.append(["pods", f"{len(pods)} ({percent(len(pods), allocatable.get('pods', 0))})", ""])
    heads = ["Resource", "Requests", "Limits"]
    table = render_table(heads, [["-" * len(h) for h in heads], *res_rows])
    lines += ["  " + line for line in table.splitlines()]
    return lines
