"""`ksched simulate`: explain one scheduling decision, per node and per plugin,
like kube-scheduler-simulator's annotations."""

from __future__ import annotations

import argparse
import copy
import json
import random
from typing import Any

from pydantic import ValidationError

from shared.api.models import describe_validation_error
from shared.config import ConfigError, load_config
from shared.framework.cycle_state import CycleState
from shared.framework.interface import ClusterObjects, NodeScore
from shared.framework.runtime import Framework, PluginScores, select_host
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY
from shared.tools.cli.manifests import ManifestError, load_objects
from shared.tools.cli.output import warn

STATUS_NAMES = {
    Code.SUCCESS: "passed",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.ERROR: "Error",
    Code.SKIP: "skipped",
}


def build_cluster(objects: list[dict[str, Any]]) -> ClusterSnapshot:
    infos: dict[str, NodeInfo] = {}
    pods: list[dict[str, Any]] = []
    extra = ClusterObjects()
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node":
            info = NodeInfo(obj["metadata"]["name"])
            info.set_node(obj)
            infos[info.name] = info
        elif kind == "Pod":
            pods.append(obj)
        else:  # Namespaces, Services and controllers are read; other kinds are not
            extra.add(obj)
    for i, raw in enumerate(pods):
        pod = PodInfo.of(raw, i + 1)
        node = pod.pod.spec.node_name
        if node:
            infos.setdefault(node, NodeInfo(node)).add_pod(pod)
    snapshot = ClusterSnapshot(infos.values(), extra)
    snapshot.fill_image_states()
    return snapshot


def explain(fw: Framework, pod: PodInfo, snapshot: ClusterSnapshot, seed: int) -> dict[str, Any]:
    fw.set_snapshot(snapshot)
    state = CycleState()
    nodes = snapshot.nodes
    report: dict[str, Any] = {"pod": pod.key, "profile": fw.profile, "nodes": {}}
    result, pre = fw.run_pre_filter_plugins(state, pod, nodes)
    report["preFilter"] = {
        "status": STATUS_NAMES.get(pre.code, pre.code.name),
        "reasons": pre.reasons,
        "plugin": pre.plugin,
    }
    feasible = []
    for node in nodes:
        entry: dict[str, Any] = {"filter": {}}
        report["nodes"][node.name] = entry
        if not pre.ok or (
            result and result.node_names is not None and node.name not in result.node_names
        ):
            entry["filter"]["PreFilter"] = "not a candidate"
            continue
        ok = True
        for plugin in fw.filters:
            if plugin.name in state.skip_filter_plugins:
                entry["filter"][plugin.name] = "skipped"
                continue
            status = plugin.filter(state, pod, node)
            entry["filter"][plugin.name] = (
                "passed" if status.ok else f"{STATUS_NAMES.get(status.code)}: {status.message()}"
            )
            ok = ok and status.ok
        if ok:
            feasible.append(node)
    report["chosen"] = _score(fw, state, pod, feasible, report, seed) if feasible else None
    return report


def _score(
    fw: Framework,
    state: CycleState,
    pod: PodInfo,
    feasible: list[NodeInfo],
    report: dict[str, Any],
    seed: int,
) -> str:
    fw.run_pre_score_plugins(state, pod, feasible)
    totals = [PluginScores(n.name, {}, 0) for n in feasible]
    for plugin in fw.scores:
        if plugin.name in state.skip_score_plugins:
            continue
        raw = [NodeScore(n.name, plugin.score(state, pod, n)[0]) for n in feasible]
        normalized = copy.deepcopy(raw)
        ext = plugin.score_extensions()
        if ext is not None:
            ext.normalize_score(state, pod, normalized)
        weight = fw.weights.get(plugin.name, 1)
        for total, r, n in zip(totals, raw, normalized, strict=True):
            report["nodes"][r.name].setdefault("score", {})[plugin.name] = {
                "raw": r.score,
                "normalized": n.score,
                "weight": weight,
                "weighted": n.score * weight,
            }
            total.total += n.score * weight
    for total in totals:
        report["nodes"][total.name]["total"] = total.total
    return select_host(totals, random.Random(seed))


def print_table(report: dict[str, Any]) -> None:
    print(f"pod {report['pod']} (profile {report['profile']})")
    pre = report["preFilter"]
    if pre["status"] != "passed":
        print(f"PreFilter {pre['plugin']}: {pre['status']} {', '.join(pre['reasons'])}")
    for name, entry in report["nodes"].items():
        print(f"\nnode {name}" + ("  <== chosen" if name == report["chosen"] else ""))
        for plugin, verdict in entry["filter"].items():
            print(f"  filter {plugin:34} {verdict}")
        for plugin, s in entry.get("score", {}).items():
            print(
                f"  score  {plugin:34} raw {s['raw']:4d}  normalized {s['normalized']:4d}"
                f"  x{s['weight']} = {s['weighted']}"
            )
        if "total" in entry:
            print(f"  total  {entry['total']}")
    print(f"\nchosen node: {report['chosen'] or 'none (the pod fits nowhere)'}")


def run_simulate(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
        snapshot = build_cluster(load_objects(args.cluster))
        pods = [o for o in load_objects(args.pod) if o.get("kind", "Pod") == "Pod"]
        if len(pods) != 1:
            raise ManifestError(f"{args.pod}: expected exactly one Pod, found {len(pods)}")
        pod = PodInfo.of(pods[0])
        profile = next(
            (p for p in config.profiles if p.scheduler_name == pod.pod.spec.scheduler_name), None
        )
        if profile is None:
            raise ConfigError(f"no profile serves schedulerName {pod.pod.spec.scheduler_name!r}")
        report = explain(Framework.from_profile(profile, REGISTRY), pod, snapshot, args.seed)
    except (ManifestError, ConfigError) as err:
        warn(f"error: {err}")
        return 1
    except ValidationError as err:
        warn(f"error: {describe_validation_error(err)}")
        return 1
    if args.output == "json":
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0
