"""Small synthetic clusters: nodes spread over zones and pods of mixed sizes."""

from __future__ import annotations

import random
from typing import Any

from shared.api.workload import V1ALPHA2, V1BETA1
from shared.framework.types import LABEL_ZONE
from shared.podgroups import MIN_AVAILABLE_ANNOTATION, POD_GROUP_LABEL

ZONES = ("zone-a", "zone-b", "zone-c")
HOSTNAME = "kubernetes.io/hostname"
ZONE = LABEL_ZONE


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
    node: str = "",
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
    if node:  # already bound (a running pod)
        spec["nodeName"] = node
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


def make_pdb(
    name: str,
    labels: dict[str, str],
    *,
    namespace: str = "default",
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disruptions_allowed: int | None = None,
) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget over the pods with these labels."""
    spec: dict[str, Any] = {"selector": {"matchLabels": labels}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    pdb: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if disruptions_allowed is not None:
        pdb["status"] = {"disruptionsAllowed": disruptions_allowed}
    return pdb


def preemption_async(
    nodes: int, init_pods: int, preemptors: int, *, cpu: str = "4", memory: str = "16Gi"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """scheduler_perf's PreemptionAsync shape: nodes filled by low-priority init pods,
    then high-priority preemptors that each need one victim's room (5000 nodes, 20000
    init pods, 5000 preemptors upstream). Returns (nodes, init pods, preemptors); the
    init pods fill the nodes exactly when init_pods = 4 * nodes."""
    node_objs = [
        make_node(f"node-{i:05d}", cpu=cpu, memory=memory, zone=ZONES[i % len(ZONES)])
        for i in range(nodes)
    ]
    low = [
        make_pod(f"init-{i:06d}", cpu="1", memory="4Gi", priority=0, labels={"app": "init"})
        for i in range(init_pods)
    ]
    high = [
        make_pod(f"preemptor-{i:06d}", cpu="1", memory="4Gi", priority=10, labels={"app": "hi"})
        for i in range(preemptors)
    ]
    return node_objs, low, high


def make_gang_pod(
    name: str, group: str, *, min_available: int | None = None, **kwargs: Any
) -> dict[str, Any]:
    """A pod of pod group `group` (Coscheduling), with the min-available annotation
    when the group has no PodGroup object."""
    pod = make_pod(name, labels={POD_GROUP_LABEL: group}, **kwargs)
    if min_available is not None:
        pod["metadata"]["annotations"] = {MIN_AVAILABLE_ANNOTATION: str(min_available)}
    return pod


def make_pod_group(
    name: str, min_member: int, *, timeout_seconds: int | None = None, namespace: str = "default"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = timeout_seconds
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
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


def make_workload(
    name: str, groups: dict[str, int | None], *, namespace: str = "default"
) -> dict[str, Any]:
    """A scheduling.k8s.io/v1alpha1 Workload: pod group -> gang minCount (None: basic)."""
    pod_groups: list[dict[str, Any]] = [
        {"name": g, "policy": _policy(n)} for g, n in groups.items()
    ]
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podGroups": pod_groups},
    }


def make_workload_v1alpha2(
    name: str, templates: dict[str, int | None], *, namespace: str = "default"
) -> dict[str, Any]:
    """A scheduling.k8s.io/v1alpha2 Workload: pod group template -> gang minCount (None:
    basic)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "podGroupTemplates": [
                {"name": t, "schedulingPolicy": _policy(n)} for t, n in templates.items()
            ]
        },
    }


def make_scheduling_pod_group(
    name: str,
    min_count: int | None,
    *,
    workload: str = "",
    template: str = "",
    namespace: str = "default",
    version: str = V1ALPHA2,
) -> dict[str, Any]:
    """A scheduling.k8s.io PodGroup (v1alpha2, or v1beta1 by `version`) with a gang of
    `min_count` (None: basic), made from a Workload's template when `workload` is given
    (v1alpha2's podGroupTemplateRef, v1beta1's workloadRef)."""
    spec: dict[str, Any] = {"schedulingPolicy": _policy(min_count)}
    if workload and version == V1BETA1:
        spec["workloadRef"] = {"workloadName": workload, "templateName": template}
    elif workload:
        ref = {"workloadName": workload, "podGroupTemplateName": template}
        spec["podGroupTemplateRef"] = {"workload": ref}
    return {
        "apiVersion": version,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def make_workload_v1beta1(
    name: str, templates: dict[str, int | None], *, namespace: str = "default"
) -> dict[str, Any]:
    """A scheduling.k8s.io/v1beta1 Workload (1.37): pod group template -> gang minCount
    (None: basic)."""
    return {**make_workload_v1alpha2(name, templates, namespace=namespace), "apiVersion": V1BETA1}


def make_pod_group_v1beta1(name: str, min_count: int | None, **kwargs: Any) -> dict[str, Any]:
    """A scheduling.k8s.io/v1beta1 PodGroup (1.37): make_scheduling_pod_group's."""
    return make_scheduling_pod_group(name, min_count, version=V1BETA1, **kwargs)


def _policy(min_count: int | None) -> dict[str, Any]:
    return {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}


def make_group_pod(name: str, pod_group: str, **kwargs: Any) -> dict[str, Any]:
    """A pod of a v1alpha2 PodGroup (spec.schedulingGroup, GangScheduling)."""
    pod = make_pod(name, **kwargs)
    pod["spec"]["schedulingGroup"] = {"podGroupName": pod_group}
    return pod


def make_workload_pod(name: str, workload: str, pod_group: str, **kwargs: Any) -> dict[str, Any]:
    """A pod of a Workload's pod group (spec.workloadRef, GangScheduling)."""
    pod = make_pod(name, **kwargs)
    pod["spec"]["workloadRef"] = {"name": workload, "podGroup": pod_group}
    return pod
