"""Small synthetic clusters: nodes spread over zones and pods of mixed sizes."""

from __future__ import annotations

import random
from typing import Any

ZONES = ("zone-a", "zone-b", "zone-c")
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def make_node(
    name: str, *, cpu: str = "4", memory: str = "16Gi", pods: int = 110, zone: str = "zone-a"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {HOSTNAME: name, ZONE: zone},
        },
        "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": str(pods)}},
    }


def make_pod(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "500Mi",
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ]
    }
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": labels or {"app": name.rsplit("-", 1)[0]},
        },
        "spec": spec,
    }


def add_anti_affinity(
    pod: dict[str, Any], key: str, value: str, topology_key: str = HOSTNAME
) -> dict[str, Any]:
    """Add a required anti-affinity term to pods labelled key=value (same namespace)."""
    affinity = pod["spec"].setdefault("affinity", {})
    anti = affinity.setdefault("podAntiAffinity", {})
    terms = anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
    terms.append({"labelSelector": {"matchLabels": {key: value}}, "topologyKey": topology_key})
    return pod


def add_spread(
    pod: dict[str, Any],
    max_skew: int,
    topology_key: str,
    key: str,
    value: str,
    *,
    hard: bool = True,
) -> dict[str, Any]:
    """Add a topology spread constraint over pods labelled key=value."""
    pod["spec"].setdefault("topologySpreadConstraints", []).append(
        {
            "maxSkew": max_skew,
            "topologyKey": topology_key,
            "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
            "labelSelector": {"matchLabels": {key: value}},
        }
    )
    return pod


# (share of pods, cpu, memory): most pods are small; a few cannot fit on any node.
DEMO_MIX = (
    (0.60, "100m", "256Mi"),
    (0.25, "500m", "1Gi"),
    (0.13, "1", "2Gi"),
    (0.02, "16", "8Gi"),
)


def demo_cluster(nodes: int, pods: int, seed: int = 7) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    node_objs = [make_node(f"node-{i:03d}", zone=ZONES[i % len(ZONES)]) for i in range(nodes)]
    pod_objs = []
    for i in range(pods):
        cpu, memory = _pick_size(rng.random())
        pod_objs.append(make_pod(f"demo-{i:04d}", cpu=cpu, memory=memory))
    return node_objs, pod_objs


def _pick_size(draw: float) -> tuple[str, str]:
    for share, cpu, memory in DEMO_MIX:
        if draw < share:
            return cpu, memory
        draw -= share
    return DEMO_MIX[-1][1], DEMO_MIX[-1][2]
