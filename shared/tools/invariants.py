"""DESIGN.md invariant 3 (no invalid placement), checked after the fact.

Two independent checks of a set of placements (pod -> node), used by the scale-out
test and `ksched bench-scale`:

- `audit`: the final state itself, by direct counting (no plugin code): no node
  over its allocatable or pod count, no host-port clash (0.0.0.0 takes every
  IP), no two pods in one topology domain where either's required anti-affinity
  forbids it, and for every DoNotSchedule spread constraint a skew (most matching
  pods in a domain minus fewest) within maxSkew.
- `replay`: the placements in commit order, one at a time through the framework's
  PreFilter and Filter on a snapshot rebuilt from the nodes and the pods replayed
  before: every placement must be one a serial kube-scheduler could have made.

The audit's spread check holds for any serial history when the pods that match a
constraint's selector all carry that constraint (a Deployment's pods do); it
looks at nodeSelector but not at required node affinity, minDomains or
matchLabelKeys, which the workloads it serves do not use.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shared.api.models import LabelSelector, Pod
from shared.api.resources import HostPort, pod_host_ports, pod_requests
from shared.config import Profile
from shared.framework.cycle_state import CycleState
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler
from shared.framework.selectors import label_selector_matches
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo, allocatable_of
from shared.plugins import REGISTRY

BIND_ALL = "0.0.0.0"


@dataclass
class AuditReport:
    overcommitted: dict[str, list[str]] = field(default_factory=dict)  # node -> what
    port_clashes: list[str] = field(default_factory=list)
    anti_affinity: list[str] = field(default_factory=list)
    spread: list[str] = field(default_factory=list)

    @property
    def violated_constraints(self) -> int:
        return len(self.port_clashes) + len(self.anti_affinity) + len(self.spread)

    @property
    def ok(self) -> bool:
        return not self.overcommitted and not self.violated_constraints

    def lines(self) -> list[str]:
        out = [
            f"{node} overcommitted: {', '.join(what)}" for node, what in self.overcommitted.items()
        ]
        return out + self.port_clashes + self.anti_affinity + self.spread


@dataclass
class _Placed:
    key: str
    pod: Pod
    spec: dict[str, Any]
    node: str


def audit(
    nodes: Iterable[dict[str, Any]], pods: dict[str, dict[str, Any]], bound: dict[str, str]
) -> AuditReport:
    """Check the placements `bound` (pod key -> node) of `pods` (key -> raw pod)."""
    raw_nodes = {n["metadata"]["name"]: n for n in nodes}
    placed = [
        _Placed(key, Pod.model_validate(pods[key]), pods[key].get("spec") or {}, node)
        for key, node in sorted(bound.items())
    ]
    by_node: dict[str, list[_Placed]] = defaultdict(list)
    for p in placed:
        by_node[p.node].append(p)
    labels = {name: (n["metadata"].get("labels") or {}) for name, n in raw_nodes.items()}
    report = AuditReport()
    for name, on_node in sorted(by_node.items()):
        raw = raw_nodes.get(name)
        if raw is None:
            report.overcommitted[name] = ["bound to a node that does not exist"]
            continue
        over = _overcommitted(allocatable_of(raw), on_node)
        if over:
            report.overcommitted[name] = over
        report.port_clashes += _port_clashes(name, on_node)
    report.anti_affinity = _anti_affinity_violations(placed, labels)
    report.spread = _spread_violations(placed, labels)
    return report


def _overcommitted(allocatable: dict[str, int], on_node: list[_Placed]) -> list[str]:
    requested: Counter[str] = Counter()
    for p in on_node:
        requested.update(pod_requests(p.spec))
    requested["pods"] = len(on_node)
    return [
        f"{resource} {amount} > {allocatable.get(resource, 0)}"
        for resource, amount in sorted(requested.items())
        if amount > allocatable.get(resource, 0)
    ]


def _clash(a: HostPort, b: HostPort) -> bool:
    return a[1:] == b[1:] and (a[0] == b[0] or BIND_ALL in (a[0], b[0]))


def _port_clashes(node: str, on_node: list[_Placed]) -> list[str]:
    held: list[tuple[str, HostPort]] = []
    clashes = []
    for p in on_node:
        for port in pod_host_ports(p.spec):
            for other, theirs in held:
                if other != p.key and _clash(port, theirs):
                    clashes.append(f"{node}: {p.key} and {other} both hold {port}")
            held.append((p.key, port))
    return clashes


def _anti_affinity_violations(
    placed: list[_Placed], labels: dict[str, dict[str, str]]
) -> list[str]:
    """Every pair in one domain where the first's required anti-affinity term matches the
    second (kube checks both directions at admission, so either order is a violation)."""
    domains: dict[tuple[str, str], list[_Placed]] = defaultdict(list)  # (key, value) -> pods
    topology_keys = {term.topology_key for p in placed for term in _anti_affinity_terms(p.pod)}
    for p in placed:
        for topology_key in topology_keys:
            value = labels.get(p.node, {}).get(topology_key)
            if value is not None:
                domains[(topology_key, value)].append(p)
    out = []
    for p in placed:
        for term in _anti_affinity_terms(p.pod):
            value = labels.get(p.node, {}).get(term.topology_key)
            if value is None:
                continue
            namespaces = set(term.namespaces) or {p.pod.metadata.namespace}
            for q in domains[(term.topology_key, value)]:
                if (
                    q.key != p.key
                    and q.pod.metadata.namespace in namespaces
                    and label_selector_matches(term.label_selector, q.pod.metadata.labels)
                ):
                    out.append(
                        f"{p.key} on {p.node} and {q.key} on {q.node} share "
                        f"{term.topology_key}={value} against {p.key}'s anti-affinity"
                    )
    return out


def _anti_affinity_terms(pod: Pod) -> list[Any]:
    affinity = pod.spec.affinity
    anti = affinity.pod_anti_affinity if affinity is not None else None
    return anti.required_during_scheduling_ignored_during_execution if anti is not None else []


def _spread_violations(placed: list[_Placed], labels: dict[str, dict[str, str]]) -> list[str]:
    seen: set[str] = set()
    out = []
    for p in placed:
        for c in p.pod.spec.topology_spread_constraints:
            if c.when_unsatisfiable != "DoNotSchedule":
                continue
            group = json.dumps(
                [
                    p.pod.metadata.namespace,
                    c.topology_key,
                    c.max_skew,
                    _selector_key(c.label_selector),
                    p.pod.spec.node_selector,
                ],
                sort_keys=True,
            )
            if group in seen:
                continue
            seen.add(group)
            counts = _domain_counts(p.pod, c.topology_key, c.label_selector, placed, labels)
            if counts and max(counts.values()) - min(counts.values()) > c.max_skew:
                out.append(
                    f"pods of {p.key}'s spread over {c.topology_key} (maxSkew {c.max_skew}) "
                    f"are skewed: {dict(sorted(counts.items()))}"
                )
    return out


def _selector_key(selector: LabelSelector | None) -> Any:
    return selector.model_dump(mode="json") if selector is not None else None


def _domain_counts(
    pod: Pod,
    topology_key: str,
    selector: LabelSelector | None,
    placed: list[_Placed],
    labels: dict[str, dict[str, str]],
) -> dict[str, int]:
    """Matching pods per domain, over every domain of the nodes eligible for `pod`."""
    wanted = pod.spec.node_selector.items()
    eligible = {
        name: node_labels[topology_key]
        for name, node_labels in labels.items()
        if topology_key in node_labels and wanted <= node_labels.items()
    }
    counts = dict.fromkeys(eligible.values(), 0)
    for q in placed:
        if (
            q.node in eligible
            and q.pod.metadata.namespace == pod.metadata.namespace
            and label_selector_matches(selector, q.pod.metadata.labels)
        ):
            counts[eligible[q.node]] += 1
    return counts


def replay(
    nodes: Iterable[dict[str, Any]],
    placements: Iterable[tuple[dict[str, Any], str]],
    profile: Profile | None = None,
) -> list[str]:
    """Replay (pod, node) placements in order through the profile's PreFilter and Filter,
    node by node, on a snapshot rebuilt each time; returns the placements refused."""
    fw = Framework.from_profile(profile or Profile(), REGISTRY)
    scheduler = Scheduler(fw, percentage_of_nodes_to_score=100, batch=False)
    infos: dict[str, NodeInfo] = {}
    for raw in nodes:
        info = infos[raw["metadata"]["name"]] = NodeInfo(raw["metadata"]["name"])
        info.set_node(raw)
    refused = []
    for raw_pod, node in placements:
        pod = PodInfo.of(raw_pod)
        snapshot = ClusterSnapshot(infos.values())
        fw.set_snapshot(snapshot)
        feasible, diagnosis = scheduler.find_nodes_that_fit(CycleState(), pod, snapshot.nodes)
        if node not in {n.name for n in feasible}:
            status = diagnosis.node_to_status.get(node)
            why = status.message() if status is not None else diagnosis.pre_filter_msg
            refused.append(f"{pod.key} on {node}: {why or 'node not found'}")
        if node in infos:
            infos[node].add_pod(pod)
    return refused
