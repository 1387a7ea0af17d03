"""Replay kube-scheduler plugin test vectors (../shared/conformance, see its README).

Filter cases: PreFilter over the snapshot, then Filter per expected node; a
PreFilter Skip means Success, a PreFilter rejection is every node's status.
Score cases: PreScore over the scored nodes, Score each, NormalizeScore.
Queue-sort cases: PrioritySort's Less.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.interface import (
    ClusterObjects,
    NodeScore,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ScorePlugin,
)
from shared.framework.profile import PluginFactory
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import CODE_NAMES, Code, Status
from shared.framework.types import NodeInfo, PodInfo


@dataclass
class CaseResult:
    file: str
    index: int
    name: str
    plugin: str
    outcome: str  # passed | failed | skipped
    detail: str = ""

    @property
    def id(self) -> str:
        return f"{self.file}[{self.index}] {self.name}"


@dataclass
class SortablePod:
    priority: int
    timestamp: float


def _named(raw: dict[str, Any], name: str) -> dict[str, Any]:
    """Vectors may leave names out where the Go test had none; ours must have one."""
    meta = dict(raw.get("metadata") or {})
    meta.setdefault("name", name)
    if not meta["name"]:
        meta["name"] = name
    return {**raw, "metadata": meta}


def build_snapshot(case: Mapping[str, Any]) -> ClusterSnapshot:
    infos: dict[str, NodeInfo] = {}
    for i, raw in enumerate(case.get("nodes") or []):
        raw = _named(raw, f"node-{i}")
        info = NodeInfo(raw["metadata"]["name"])
        info.set_node(raw)
        infos[info.name] = info
    for i, raw in enumerate(case.get("existingPods") or []):
        pod = PodInfo.of(_named(raw, f"existing-pod-{i}"), i + 1)
        node = pod.pod.spec.node_name
        infos.setdefault(node, NodeInfo(node)).add_pod(pod)
    objects = ClusterObjects()
    for obj in case.get("clusterObjects") or []:
        objects.add(obj)
    snapshot = ClusterSnapshot(infos.values(), objects)
    snapshot.fill_image_states()
    return snapshot


def _status_matches(status: Status, want: Mapping[str, Any]) -> str:
    got_code = CODE_NAMES[status.code]
    if got_code != want["code"]:
        return f"code {got_code} {status.reasons}, want {want['code']} {want.get('reasons')}"
    if want.get("reasons") is not None and status.reasons != want["reasons"]:
        return f"reasons {status.reasons}, want {want['reasons']}"
    return ""


def run_filter_case(plugin: Any, case: Mapping[str, Any], snapshot: ClusterSnapshot) -> str:
    pod = PodInfo.of(_named(case["pod"], "test-pod"))
    state = CycleState()
    pre: Status | None = None
    if isinstance(plugin, PreFilterPlugin):
        _, pre = plugin.pre_filter(state, pod, snapshot.nodes)
    problems = []
    for name, want in case["expected"].items():
        if pre is not None and pre.code == Code.SKIP:
            status = Status()
        elif pre is not None and not pre.ok:
            status = pre
        else:
            node = snapshot.get(name)
            if node is None:
                problems.append(f"{name}: node not in the snapshot")
                continue
            status = plugin.filter(state, pod, node)
        mismatch = _status_matches(status, want)
        if mismatch:
            problems.append(f"{name}: {mismatch}")
    return "; ".join(problems)


def run_score_case(plugin: Any, case: Mapping[str, Any], snapshot: ClusterSnapshot) -> str:
    pod = PodInfo.of(_named(case["pod"], "test-pod"))
    expected: dict[str, int] = case["expected"]
    scored = [n for n in snapshot.nodes if n.name in expected]
    state = CycleState()
    if isinstance(plugin, PreScorePlugin):
        status = plugin.pre_score(state, pod, scored)
        if status.code == Code.SKIP:
            got = {n.name: 0 for n in scored}
            return "" if got == expected else f"skipped PreScore gives {got}, want {expected}"
        if not status.ok:
            return f"PreScore: {CODE_NAMES[status.code]} {status.reasons}"
    assert isinstance(plugin, ScorePlugin)
    scores = []
    for node in scored:
        value, status = plugin.score(state, pod, node)
        if not status.ok:
            return f"Score on {node.name}: {CODE_NAMES[status.code]} {status.reasons}"
        scores.append(NodeScore(node.name, value))
    ext = plugin.score_extensions()
    if ext is not None:
        status = ext.normalize_score(state, pod, scores)
        if not status.ok:
            return f"NormalizeScore: {CODE_NAMES[status.code]} {status.reasons}"
    got = {s.name: s.score for s in scores}
    return "" if got == expected else f"scores {got}, want {expected}"


def _timestamp(value: str | None) -> float:
    if value is None:
        return float("-inf")  # Go's zero time sorts before every real time
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def run_queue_sort_case(plugin: Any, case: Mapping[str, Any]) -> str:
    assert isinstance(plugin, QueueSortPlugin)
    p1 = SortablePod(case["p1"]["priority"], _timestamp(case["p1"].get("timestamp")))
    p2 = SortablePod(case["p2"]["priority"], _timestamp(case["p2"].get("timestamp")))
    got = plugin.less(p1, p2)
    return "" if got == case["expectedLess"] else f"less={got}, want {case['expectedLess']}"


def run_case(
    doc: Mapping[str, Any], index: int, registry: Mapping[str, PluginFactory], file: str
) -> CaseResult:
    case = doc["cases"][index]
    plugin_name = doc["plugin"]
    result = CaseResult(file, index, case.get("name", ""), plugin_name, "passed")
    factory = registry.get(plugin_name)
    if factory is None:
        result.outcome, result.detail = "skipped", f"plugin {plugin_name} is not implemented"
        return result
    try:
        snapshot = build_snapshot(case)
        plugin = factory(dict(case.get("args") or {}), Handle(snapshot=snapshot))
        if "expectedLess" in case:
            problem = run_queue_sort_case(plugin, case)
        elif doc["kind"] == "filter":
            problem = run_filter_case(plugin, case, snapshot)
        else:
            problem = run_score_case(plugin, case, snapshot)
    except Exception as err:  # a crash is a failure of that case, not of the run
        problem = f"{type(err).__name__}: {err}"
    if problem:
        result.outcome, result.detail = "failed", problem
    return result


def load_dir(root: Path) -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(root.rglob("*.json")):
        docs.append((str(path.relative_to(root)), json.loads(path.read_text())))
    return docs


def run_dir(root: Path, registry: Mapping[str, PluginFactory] | None = None) -> list[CaseResult]:
    if registry is None:
        from shared.plugins import REGISTRY

        registry = REGISTRY
    results = []
    for file, doc in load_dir(root):
        for index in range(len(doc.get("cases", []))):
            results.append(run_case(doc, index, registry, file))
    return results
