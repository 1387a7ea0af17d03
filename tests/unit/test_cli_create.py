"""`ksched create` (generateName, AlreadyExists), `-n` with files, and `delete -f`:
the pure planners under the verbs."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from shared.tools.cli.apply import Current
from shared.tools.cli.create import (
    MAX_GENERATED_NAME_LENGTH,
    generate_name,
    plan_create,
    plural,
)
from shared.tools.cli.deletes import plan_delete
from shared.tools.cli.manifests import Manifest, ManifestError, parse_manifests, read_manifests
from shared.tools.cli.namespaces import in_namespace
from shared.tools.cli.workloads import ALPHABET
from shared.tools.synthetic import make_node, make_pod

TEMPLATES = Path(__file__).parent / "data" / "scheduler_perf"
NOW = "2024-01-01T00:00:00Z"


def manifests(*objs: dict[str, Any], source: str = "f.yaml") -> list[Manifest]:
    return [Manifest(o, source, f"document {i}") for i, o in enumerate(objs)]


def web_deployment(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": make_pod("x")["spec"]},
        },
    }


def test_generate_name_is_the_prefix_and_five_characters_of_kubes_alphabet() -> None:
    name = generate_name("pod-", random.Random(3))
    assert name.startswith("pod-") and len(name) == 9
    assert set(name[4:]) <= set(ALPHABET)
    long = generate_name("x" * 80, random.Random(3))
    assert len(long) == 63 and long.startswith("x" * MAX_GENERATED_NAME_LENGTH)


def test_scheduler_perf_templates_are_created_unchanged_with_generated_names() -> None:
    files = [TEMPLATES / "node-default.yaml", *[TEMPLATES / "pod-default.yaml"] * 3]
    objs = [m for f in files for m in read_manifests(str(f))]
    outcomes = plan_create(objs, Current(), NOW, random.Random(7))
    lines = [o.created.line for o in outcomes if o.created]
    assert [o.error for o in outcomes] == ["", "", "", ""]
    assert lines[0].startswith("node/scheduler-perf-") and lines[0].endswith(" created")
    pods = [line.split()[0] for line in lines[1:]]
    assert len(set(pods)) == 3 and all(p.startswith("pod/pod-") for p in pods)
    pod = outcomes[1].created.actions[0].obj  # type: ignore[union-attr]
    assert pod["metadata"]["generateName"] == "pod-" and pod["metadata"]["namespace"] == "default"
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "100m",
        "memory": "500Mi",
    }


def test_a_generated_name_never_reuses_one_taken() -> None:
    taken = generate_name("pod-", random.Random(5))
    existing = make_pod(taken)
    current = Current(pods={f"default/{taken}": (existing, 1)})
    outcome = plan_create(
        manifests(
            {"kind": "Pod", "metadata": {"generateName": "pod-"}, "spec": make_pod("x")["spec"]}
        ),
        current,
        NOW,
        random.Random(5),
    )[0]
    assert outcome.created is not None
    assert outcome.created.actions[0].obj["metadata"]["name"] != taken


def test_existing_objects_are_already_exists_and_the_others_still_created() -> None:
    current = Current(
        pods={"default/old": (make_pod("old"), 4)}, nodes={"n1": (make_node("n1"), 2)}
    )
    outcomes = plan_create(
        manifests(make_pod("old"), make_pod("new"), make_node("n1"), make_pod("new")),
        current,
        NOW,
        random.Random(0),
    )
    exists = 'Error from server (AlreadyExists): error when creating "f.yaml": {} already exists'
    assert [o.error for o in outcomes] == [
        exists.format('pods "old"'),
        "",
        exists.format('nodes "n1"'),
        exists.format('pods "new"'),  # the same name twice in one run: the second finds the first
    ]
    created = outcomes[1].created
    assert created is not None and created.line == "pod/new created"
    assert [(a.etype, a.expected_seq) for a in created.actions] == [("ADDED", None)]


def test_already_exists_names_stdin_and_group_resources_as_kubectl() -> None:
    deployment = web_deployment(1)
    first = plan_create(manifests(deployment, source="-"), Current(), NOW, random.Random(0))
    pod = first[0].created.actions[0].obj  # type: ignore[union-attr]
    current = Current(pods={f"default/{pod['metadata']['name']}": (pod, 1)})
    again = plan_create(manifests(deployment, source="-"), current, NOW, random.Random(0))
    assert again[0].error == (
        'Error from server (AlreadyExists): error when creating "STDIN": '
        'deployments.apps "web" already exists'
    )
    assert plural("priorityclass.scheduling.k8s.io") == "priorityclasses.scheduling.k8s.io"


def test_namespace_flag_fills_objects_and_refuses_another_namespace() -> None:
    other, plain = make_pod("b"), make_pod("x")
    other["metadata"]["namespace"] = "a"
    del plain["metadata"]["namespace"]
    filled = in_namespace(manifests(plain, make_node("n")), "team")
    assert filled[0].obj["metadata"]["namespace"] == "team"
    assert "namespace" not in filled[1].obj["metadata"]  # a Node has none
    assert in_namespace(manifests(other), None)[0].obj["metadata"]["namespace"] == "a"
    with pytest.raises(ManifestError) as err:
        in_namespace(manifests(plain, other), "b")
    assert str(err.value) == (
        'the namespace from the provided object "a" does not match the namespace "b". '
        "You must pass '--namespace=a' to perform this operation."
    )


def test_delete_from_files_deletes_objects_and_workload_pods_in_order() -> None:
    deployment = web_deployment(2)
    created = plan_create(manifests(deployment), Current(), NOW, random.Random(0))[0].created
    assert created is not None
    web = {
        f"default/{a.obj['metadata']['name']}": (a.obj, i)
        for i, a in enumerate(created.actions)
        if a.kind == "Pod"
    }
    replica_sets = {
        f"default/{a.obj['metadata']['name']}": (a.obj, i)
        for i, a in enumerate(created.actions)
        if a.kind == "ReplicaSet"
    }
    assert len(web) == 2 and len(replica_sets) == 1
    current = Current(
        pods={**web, "default/p": (make_pod("p"), 9)}, nodes={}, replica_sets=replica_sets
    )
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}}
    deletions = plan_delete(manifests(make_pod("p"), deployment, make_node("gone"), cm), current)
    assert [d.line for d in deletions] == [
        'pod "p" deleted',
        'deployment.apps "web" deleted',
        "",
        "",
    ]
    assert [(a.kind, a.etype, a.expected_seq) for a in deletions[0].actions] == [
        ("Pod", "DELETED", 9)
    ]
    # the garbage collector's order: the pods, then the ReplicaSet that owned them
    assert [(a.kind, a.obj["metadata"]["name"]) for a in deletions[1].actions] == [
        *(("Pod", k.removeprefix("default/")) for k in sorted(web)),
        *(("ReplicaSet", k.removeprefix("default/")) for k in replica_sets),
    ]
    assert deletions[2].error == (
        'Error from server (NotFound): error when deleting "f.yaml": nodes "gone" not found'
    )
    assert deletions[3].warning.startswith("Warning: ksched keeps no ConfigMap objects")


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        (
            "kind: Pod\nmetadata:\n  labels: a: b\n",
            3,
            "mapping values are not allowed in this context",
        ),
        ("a:\n\t- b\n", 2, "found character that cannot start any token"),
        ("a:\n  b: 1\n c: 2\n", 3, "did not find expected key"),
        ("a: [1, 2\nb: 3\n", 2, "did not find expected ',' or ']'"),
    ],
)
def test_yaml_errors_are_one_line_as_kubectl_words_them(text: str, line: int, problem: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_manifests(text, "pod.yaml")
    assert str(err.value) == (
        f"error parsing pod.yaml: error converting YAML to JSON: yaml: line {line}: {problem}"
    )
    with pytest.raises(ManifestError, match=r"^error parsing STDIN: "):
        parse_manifests(text, "-")
