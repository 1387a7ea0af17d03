"""Manifests and workload expansion for `ksched apply` (pure)."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from typing import Any

import pytest

from shared.tools.cli.apply import Current, plan
from shared.tools.cli.manifests import Manifest, ManifestError, parse_manifests
from shared.tools.cli.workloads import ALPHABET, expand
from shared.tools.synthetic import make_node as node_obj

NAME = f"[{ALPHABET}]"


def template(cpu: str = "100m", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}
            ],
            **spec,
        },
    }


def workload(kind: str, name: str = "web", **spec: Any) -> Manifest:
    api = "batch/v1" if kind == "Job" else "apps/v1"
    obj = {"apiVersion": api, "kind": kind, "metadata": {"name": name}, "spec": spec}
    return Manifest(obj, "w.yaml", "document 0")


def make_node(
    name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    node = node_obj(name)
    node["metadata"]["labels"].update(labels or {})
    if taints:
        node["spec"] = {"taints": taints}
    return node


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_deployment_makes_replicas_named_like_its_replicaset() -> None:
    pods = expand(workload("Deployment", replicas=3, template=template()), [])
    assert len(pods) == 3 and len(set(names(pods))) == 3
    for pod in pods:
        assert re.fullmatch(rf"web-{NAME}{{1,10}}-{NAME}{{5}}", pod["metadata"]["name"])
        rs, _ = pod["metadata"]["name"].rsplit("-", 1)
        assert pod["metadata"]["labels"] == {"app": "web", "pod-template-hash": rs[4:]}
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        assert pod["metadata"]["ownerReferences"][0]["name"] == rs
    # the same file names the same pods; another template another ReplicaSet
    assert names(expand(workload("Deployment", replicas=3, template=template()), [])) == names(pods)
    other = expand(workload("Deployment", replicas=1, template=template(cpu="1")), [])
    assert other[0]["metadata"]["name"].rsplit("-", 2)[1] != names(pods)[0].rsplit("-", 2)[1]


@pytest.mark.parametrize(
    ("kind", "spec", "count", "pattern"),
    [
        ("ReplicaSet", {"replicas": 2}, 2, rf"web-{NAME}{{5}}"),
        ("ReplicaSet", {}, 1, rf"web-{NAME}{{5}}"),
        ("StatefulSet", {"replicas": 3}, 3, r"web-[0-2]"),
        ("Job", {"parallelism": 4}, 4, rf"web-{NAME}{{5}}"),
        ("Job", {"parallelism": 4, "completions": 2}, 2, rf"web-{NAME}{{5}}"),
        ("Job", {}, 1, rf"web-{NAME}{{5}}"),
        ("Deployment", {"replicas": 0}, 0, ""),
    ],
)
def test_controllers_pod_counts_and_names(
    kind: str, spec: dict[str, Any], count: int, pattern: str
) -> None:
    pods = expand(workload(kind, template=template(), **spec), [])
    assert len(pods) == count
    assert all(re.fullmatch(pattern, n) for n in names(pods)), names(pods)
    assert all(p["metadata"]["ownerReferences"][0]["controller"] for p in pods)


def test_statefulset_and_job_labels() -> None:
    sts = expand(workload("StatefulSet", replicas=2, template=template()), [])
    assert sts[1]["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "web-1"
    job = expand(workload("Job", template=template()), [])
    assert job[0]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "web"


def test_daemonset_one_pod_per_eligible_node_pinned_by_matchfields() -> None:
    gpu = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    tainted = make_node("c-tainted", {"disk": "ssd"}, [gpu])
    other_zone = make_node("d-other", {"disk": "hdd"})
    nodes = [make_node("a", {"disk": "ssd"}), make_node("b", {"disk": "ssd"})]
    preferred = [
        {
            "weight": 1,
            "preference": {
                "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
            },
        }
    ]
    tmpl = template(
        nodeSelector={"disk": "ssd"},
        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}},
    )
    pods = expand(workload("DaemonSet", template=tmpl), [*nodes, tainted, other_zone])
    assert len(pods) == 2
    for pod, node in zip(pods, ("a", "b"), strict=True):
        affinity = pod["spec"]["affinity"]["nodeAffinity"]
        assert affinity["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
        assert affinity["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
        keys = {t["key"] for t in pod["spec"]["tolerations"]}
        assert "node.kubernetes.io/unschedulable" in keys
    # a node keeps its daemon pod's name when other nodes come and go
    again = expand(workload("DaemonSet", template=tmpl), [nodes[1]])
    assert names(again) == names(pods)[1:]


def test_bad_manifests_name_file_document_and_field() -> None:
    text = (
        "kind: Pod\nmetadata: {name: ok}\nspec: {containers: [{name: a, image: i}]}\n---\n"
        "kind: List\nitems:\n- kind: Pod\n  metadata: {name: x}\n"
        "  spec: {containers: [{name: a, image: i, resources: {requests: {cpu: '-1'}}}]}\n"
    )
    manifests = parse_manifests(text, "bad.yaml")
    assert [m.where for m in manifests] == ["document 0", "document 1, items[0]"]
    with pytest.raises(ManifestError) as err:
        plan(manifests, Current(), "2024-01-01T00:00:00Z")
    assert str(err.value) == (
        "bad.yaml: document 1, items[0]: spec.containers[0].resources.requests.cpu: "
        "must be non-negative, got '-1'"
    )
    with pytest.raises(ManifestError, match=r"^f: document 0: kind: Required value"):
        plan(parse_manifests("metadata: {name: w}\n", "f"), Current(), "")
    with pytest.raises(
        ManifestError,
        match=r'^w.yaml: document 0: Deployment.apps "web" is invalid: spec.replicas: Invalid',
    ):
        plan([workload("Deployment", replicas=-1, template=template())], Current(), "")
    with pytest.raises(ManifestError, match=r"^error parsing f: error converting YAML to JSON"):
        parse_manifests("a: [", "f")


def current_from(applied: list[Any], current: Current | None = None) -> Current:
    """The cluster after publishing `applied` onto `current`: its tables, by kind."""
    current = current or Current()
    tables: dict[str, dict[str, Any]] = {
        f.name: dict(getattr(current, f.name)) for f in fields(Current)
    }
    names = {"Pod": "pods", "Node": "nodes", "ReplicaSet": "replica_sets"}
    names |= {"StatefulSet": "stateful_sets", "Service": "services"}
    names |= {"PodDisruptionBudget": "pdbs"}
    for seq, a in enumerate((a for item in applied for a in item.actions), start=1):
        meta = a.obj["metadata"]
        key = meta["name"] if a.kind == "Node" else f"{meta['namespace']}/{meta['name']}"
        table = tables[names[a.kind]]
        if a.etype == "DELETED":
            table.pop(key, None)
        elif a.etype:
            table[key] = (a.obj, seq)
    return Current(**tables)


def test_apply_creates_then_is_unchanged_keeps_bindings_and_scales_down() -> None:
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "template": template()},
    }
    manifests = [Manifest(make_node("n1"), "f", "document 0"), Manifest(deploy, "f", "document 1")]
    first = plan(manifests, Current(), "2024-01-01T00:00:00Z", new_uid=lambda: "u")
    assert [a.line for a in first] == ["node/n1 created", "deployment.apps/web created"]
    assert {a.obj["metadata"]["uid"] for a in first[1].actions if a.kind == "Pod"} == {"u"}
    current = current_from(first)
    # the scheduler bound one pod meanwhile: re-applying keeps it bound
    key = next(iter(current.pods))
    bound, seq = current.pods[key]
    bound = {**bound, "spec": {**bound["spec"], "nodeName": "n1"}, "status": {"phase": "Pending"}}
    current = replace(current, pods={**current.pods, key: (bound, seq)})
    again = plan(manifests, current, "later")
    assert [a.line for a in again] == ["node/n1 unchanged", "deployment.apps/web unchanged"]
    deploy["spec"]["replicas"] = 1
    scaled = plan(manifests, current, "later")
    assert scaled[1].line == "deployment.apps/web configured"
    verbs = sorted(a.verb for a in scaled[1].actions)
    assert verbs == ["configured", "deleted", "deleted", "unchanged"]  # the ReplicaSet scaled
    changed = Manifest(
        {**bound, "metadata": {**bound["metadata"], "labels": {"app": "v2"}}}, "f", "d"
    )
    (configured,) = plan([changed], current, "later")[0].actions
    assert (configured.verb, configured.etype, configured.expected_seq) == (
        "configured",
        "MODIFIED",
        seq,
    )
    assert configured.obj["spec"]["nodeName"] == "n1"


def test_reapplying_a_pod_keeps_what_priority_admission_set() -> None:
    """The stored pod carries what admission resolved (priority, priorityClassName,
    preemptionPolicy); the manifest does not state them, and that is no change."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": template()["spec"]}
    manifests = [Manifest(pod, "f", "document 0")]
    (first,) = plan(manifests, Current(), "now", new_uid=lambda: "u")
    stored = first.actions[0].obj
    admitted = {**stored, "spec": {**stored["spec"], "priority": 10, "priorityClassName": "std"}}
    (again,) = plan(manifests, Current({"default/p": (admitted, 7)}), "later")
    assert again.line == "pod/p unchanged"
