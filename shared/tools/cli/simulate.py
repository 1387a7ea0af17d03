"""`ksched simulate`: explain one scheduling decision, per node and per plugin,
like kube-scheduler-simulator's annotations."""

from __future__ import annotations

import argparse
import json
import random
from typing import Any

from pydantic import ValidationError

from shared.api.models import describe_validation_error
from shared.config import ConfigError, load_config
from shared.framework.explain import explain
from shared.framework.interface import ClusterObjects
from shared.framework.runtime import Framework
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY
from shared.tools.cli.manifests import ManifestError, load_objects
from shared.tools.cli.output import warn


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


def explain_report(
    fw: Framework, pod: PodInfo, snapshot: ClusterSnapshot, seed: int
) -> dict[str, Any]:
    """The decision explained per node and plugin (framework/explain.py), with the node
    selectHost draws among the best (`seed` breaks the ties)."""
    ex = explain(fw, pod, snapshot)
    best = ex.best
    chosen = best[random.Random(seed).randrange(len(best))] if best else None
    return ex.report(chosen)


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
        report = explain_report(Framework.from_profile(profile, REGISTRY), pod, snapshot, args.seed)
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
