"""`ksched apply` planning for the objects the scheduler reads besides pods and nodes:
Services published, the ReplicaSets and StatefulSets a workload expands into published
with the uids their pods' ownerReferences name, other kinds skipped with a warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shared.tools.cli.apply import Applied, Current, plan
from shared.tools.cli.manifests import Manifest, ManifestError, parse_manifests, read_manifests
from tests.unit.test_cli_workloads import current_from, template

ZOOKEEPER = Path(__file__).resolve().parents[1] / "data" / "manifests" / "zookeeper.yaml"
# Kinds ksched does not schedule by, and the warnings apply gives for them.
SKIPPED_KINDS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: zk-config}
data: {init: "1"}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: cockroachdb}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cockroachdb}
rules: []
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""
SKIPPED_WARNINGS = [
    "Warning: configmap/zk-config skipped: ksched does not schedule ConfigMap",
    "Warning: serviceaccount/cockroachdb skipped: ksched does not schedule ServiceAccount",
    "Warning: role.rbac.authorization.k8s.io/cockroachdb skipped: ksched does not schedule Role",
    "Warning: persistentvolumeclaim/data skipped: ksched does not schedule PersistentVolumeClaim",
]
OTHER_KINDS = f"""\
{SKIPPED_KINDS}---
apiVersion: v1
kind: Pod
metadata: {{name: lone}}
spec: {{containers: [{{name: a, image: nginx}}]}}
"""


def deployment(name: str = "web", replicas: int = 2, **spec: Any) -> Manifest:
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "template": template(), **spec},
    }
    return Manifest(obj, "d.yaml", "document 0")


def actions_of(applied: Applied, kind: str) -> list[Any]:
    return [a for a in applied.actions if a.kind == kind]


def test_the_zookeeper_example_publishes_its_services_pdb_statefulset_and_pods() -> None:
    applied = plan(read_manifests(str(ZOOKEEPER)), Current(), "now")
    warnings = [a.line for a in applied if a.warning]
    applied = [a for a in applied if not a.warning]
    # what ksched does not model is said, not silently dropped
    assert warnings == [
        "Warning: statefulset.apps/zk: ksched does not model spec.updateStrategy, "
        "spec.podManagementPolicy, spec.volumeClaimTemplates (ignored)"
    ]
    assert [a.line for a in applied] == [
        "service/zk-hs created",
        "service/zk-cs created",
        "poddisruptionbudget.policy/zk-pdb created",
        "statefulset.apps/zk created",
    ]
    assert [a.subject for a in applied[0].actions] == ["ksched.cluster.services.default.zk-hs"]
    (sts,) = actions_of(applied[3], "StatefulSet")
    assert sts.subject == "ksched.cluster.statefulsets.default.zk"
    pods = actions_of(applied[3], "Pod")
    assert [p.obj["metadata"]["name"] for p in pods] == ["zk-0", "zk-1", "zk-2"]
    for pod in pods:
        (ref,) = pod.obj["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("StatefulSet", "zk", True)
        assert ref["uid"] == sts.obj["metadata"]["uid"]
    # applied again: nothing changes, nothing is published
    again = [
        a
        for a in plan(read_manifests(str(ZOOKEEPER)), current_from(applied), "later")
        if not a.warning
    ]
    assert [a.line.rsplit(" ", 1)[1] for a in again] == ["unchanged"] * 4
    assert all(not a.etype for item in again for a in item.actions)


def test_other_kinds_are_skipped_with_a_warning_each_and_the_rest_applies() -> None:
    manifests = [
        *parse_manifests(OTHER_KINDS, "cockroach.yaml"),
        *read_manifests(str(ZOOKEEPER)),
    ]
    applied = plan(manifests, Current(), "now")
    assert [a.line for a in applied if a.warning and " skipped" in a.line] == SKIPPED_WARNINGS
    assert all(not a.actions for a in applied if a.warning)
    applied_lines = [a.line for a in applied if not a.warning]
    assert applied_lines[:2] == ["pod/lone created", "service/zk-hs created"]
    assert len(applied_lines) == 5


def test_apply_of_a_directory_goes_through_every_file(tmp_path: Path) -> None:
    (tmp_path / "a-other.yaml").write_text(OTHER_KINDS)
    (tmp_path / "b-zookeeper.yaml").write_text(ZOOKEEPER.read_text())
    applied = plan(read_manifests(str(tmp_path)), Current(), "now")
    assert sum(a.warning and " skipped" in a.line for a in applied) == 4
    assert "statefulset.apps/zk created" in [a.line for a in applied]


def test_a_deployment_publishes_its_replicaset_which_owns_the_pods() -> None:
    (applied,) = plan([deployment()], Current(), "now")
    (rs,) = actions_of(applied, "ReplicaSet")
    name = rs.obj["metadata"]["name"]
    hashed = rs.obj["metadata"]["labels"]["pod-template-hash"]
    assert name == f"web-{hashed}"
    assert rs.subject == f"ksched.cluster.replicasets.default.{name}"
    assert rs.obj["spec"]["selector"] == {
        "matchLabels": {"app": "web", "pod-template-hash": hashed}  # defaulted from the template
    }
    assert rs.obj["spec"]["template"]["metadata"]["labels"]["pod-template-hash"] == hashed
    (owner,) = rs.obj["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Deployment", "web")
    for pod in actions_of(applied, "Pod"):
        (ref,) = pod.obj["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"]) == (
            "ReplicaSet",
            name,
            rs.obj["metadata"]["uid"],
        )


def test_a_reapplied_deployment_keeps_its_replicaset_and_a_new_template_replaces_it() -> None:
    first = plan([deployment()], Current(), "now")
    current = current_from(first)
    (again,) = plan([deployment()], current, "later")
    assert again.line == "deployment.apps/web unchanged"
    assert {a.verb for a in again.actions} == {"unchanged"}
    old_rs = next(iter(current.replica_sets))
    (changed,) = plan([deployment(template=template(cpu="200m"))], current, "later")
    assert changed.line == "deployment.apps/web configured"
    verbs = sorted((a.kind, a.verb) for a in changed.actions)
    assert verbs == [
        ("Pod", "created"),
        ("Pod", "created"),
        ("Pod", "deleted"),
        ("Pod", "deleted"),
        ("ReplicaSet", "created"),
        ("ReplicaSet", "deleted"),
    ]
    deleted_rs = next(a for a in changed.actions if a.kind == "ReplicaSet" and a.etype == "DELETED")
    assert f"default/{deleted_rs.obj['metadata']['name']}" == old_rs
    after = current_from([changed], current)
    assert len(after.replica_sets) == 1 and len(after.pods) == 2


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (
            deployment(selector={"matchLabels": {"app": "api"}}),
            'd.yaml: document 0: Deployment.apps "web" is invalid: '
            'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: '
            "`selector` does not match template `labels`",
        ),
        (
            deployment(selector={}),
            'd.yaml: document 0: Deployment.apps "web" is invalid: spec.selector: Invalid value: '
            "v1.LabelSelector{MatchLabels:map[string]string(nil), "
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid "
            "for deployment",
        ),
        (
            Manifest(
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "Web"}, "spec": {}},
                "s.yaml",
                "document 2",
            ),
            's.yaml: document 2: Service "Web" is invalid: metadata.name: Invalid value: "Web": '
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-'",
        ),
    ],
)
def test_bad_objects_are_refused_with_the_api_servers_message(
    manifest: Manifest, message: str
) -> None:
    with pytest.raises(ManifestError) as err:
        plan([manifest], Current(), "now")
    assert str(err.value).startswith(message)
