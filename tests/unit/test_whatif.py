"""What-if (shared/framework/whatif.py): the node the cycle's own code picks, verdicts
grouped per node, scores, preemption with the PDBs it touches, a workload's replicas
placed one by one, and a snapshot left exactly as it was."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.worker.whatif import WhatIfError, fit_report, read_request
from shared.api.pdb import PodDisruptionBudget
from shared.api.podgroup import SchedulingPodGroup
from shared.config import Profile
from shared.framework import whatif
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import FitError
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo
from shared.framework.whatif import WhatIfLimits, group_nodes, replica_pods, what_if
from shared.plugins import REGISTRY, gangscheduling
from shared.tools.cli.whatif import report_lines
from shared.tools.synthetic import make_scheduling_pod_group
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod


def framework(snap: ClusterSnapshot, pdbs: list[PodDisruptionBudget] | None = None) -> Framework:
    fw = Framework.from_profile(Profile(), REGISTRY)
    fw.set_snapshot(snap)
    fw.handle.providers.pdbs = list(pdbs or [])
    return fw


def cluster(
    nodes: Sequence[NodeBuilder | dict[str, Any]], pods: Sequence[PodBuilder] = ()
) -> ClusterSnapshot:
    infos = {}
    for b in nodes:
        raw = b if isinstance(b, dict) else b.obj()
        infos[raw["metadata"]["name"]] = info = NodeInfo(raw["metadata"]["name"])
        info.set_node(raw)
    for version, p in enumerate(pods, start=1):
        info = p.info(version)
        infos[info.pod.spec.node_name].add_pod(info)
    snap = ClusterSnapshot(infos.values())
    snap.fill_image_states()
    return snap


def tainted(name: str) -> dict[str, Any]:
    raw = make_node(name).capacity(cpu="8", memory="8Gi", pods=10).obj()
    raw["spec"] = {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
    return raw


def state_of(snap: ClusterSnapshot) -> dict[str, Any]:
    return {
        n.name: (sorted(n.pods), dict(n.requested), n.nonzero_cpu, n.nonzero_memory)
        for n in snap.node_infos
    }


def test_groups_nodes_by_their_failing_verdicts_largest_first() -> None:
    verdicts = {
        "a": {"NodeResourcesFit": "Unschedulable: Insufficient cpu", "NodePorts": "passed"},
        "b": {"NodeResourcesFit": "Unschedulable: Insufficient cpu"},
        "c": {"TaintToleration": "UnschedulableAndUnresolvable: untolerated taint"},
    }
    groups, omitted = group_nodes(verdicts, ["a", "b", "c", "d"])
    assert [(g["count"], g["nodes"]) for g in groups] == [(2, ["a", "b"]), (1, ["d"]), (1, ["c"])]
    assert groups[0]["verdicts"] == {"NodeResourcesFit": "Unschedulable: Insufficient cpu"}
    assert groups[1]["verdicts"] == {}  # fits
    assert omitted == 0
    capped, omitted = group_nodes(verdicts, ["a", "b", "c", "d"], WhatIfLimits(groups=1))
    assert len(capped) == 1 and omitted == 2


def test_reports_the_chosen_node_verdict_groups_and_scores() -> None:
    snap = cluster(
        [
            make_node("big").capacity(cpu="8", memory="8Gi", pods=10),
            make_node("small").capacity(cpu="1", memory="8Gi", pods=10),
            tainted("tainted"),
        ]
    )
    pod = make_pod("p").req(cpu="2").info()
    report = what_if(framework(snap), [pod], snap, node="small")
    assert report["chosen"] == "big" and report["best"] == ["big"] and report["feasible"] == 1
    groups = {tuple(g["nodes"]): g["verdicts"] for g in report["groups"]}
    assert list(groups[("small",)]) == ["NodeResourcesFit"]
    assert groups[("small",)]["NodeResourcesFit"].endswith(": Insufficient cpu")
    assert list(groups[("tainted",)]) == ["TaintToleration"]
    assert "untolerated taint" in groups[("tainted",)]["TaintToleration"]
    assert groups[("big",)] == {}
    [top] = report["scores"]
    assert top["node"] == "big" and top["plugins"]["TaintToleration"]["normalized"] == 100
    assert report["node"]["filter"]["NodeResourcesFit"].endswith("Insufficient cpu")
    assert "message" not in report


def test_a_pod_that_fits_nowhere_gets_the_failed_scheduling_message() -> None:
    snap = cluster([make_node(f"n{i}").capacity(cpu="1", pods=10) for i in range(3)])
    report = what_if(framework(snap), [make_pod("p").req(cpu="2").info()], snap)
    assert report["chosen"] is None and report["feasible"] == 0
    assert report["message"].startswith("0/3 nodes are available: 3 Insufficient cpu.")
    assert [g["count"] for g in report["groups"]] == [3]
    assert report["preemption"] is None  # nothing to preempt


def test_preemption_names_victims_and_the_pdbs_they_touch() -> None:
    low = make_pod("low").priority(0).req(cpu="900m").label("app", "db").node("n1")
    snap = cluster([make_node("n1").capacity(cpu="1", pods=10)], [low])
    budget = PodDisruptionBudget.model_validate(
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    high = make_pod("high").priority(1000).req(cpu="500m").info()
    report = what_if(framework(snap, [budget]), [high], snap)
    assert report["chosen"] is None
    pre = report["preemption"]
    assert pre["node"] == "n1" and [v["pod"] for v in pre["victims"]] == ["default/low"]
    assert pre["pdbs"] == [
        {"name": "default/db", "allowed": 0, "victims": ["default/low"], "violated": True}
    ]
    assert "default/low" in snap.get("n1").pods  # nothing was deleted


def test_a_gated_pod_is_reported_held_not_scheduled() -> None:
    snap = cluster([make_node("n1").capacity(cpu="4", pods=10)])
    raw = make_pod("p").obj()
    raw["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    report = what_if(framework(snap), [PodInfo.of(raw)], snap)
    assert report["gated"]["plugin"] == "SchedulingGates" and report["chosen"] is None


def test_workload_replicas_fill_nodes_one_by_one_and_leave_the_snapshot_as_it_was() -> None:
    snap = cluster([make_node(f"n{i}").capacity(cpu="2", pods=10) for i in range(3)])
    before = state_of(snap)
    pods = replica_pods(make_pod("web").req(cpu="1").label("app", "web").obj(), 8)
    report = what_if(framework(snap), pods, snap)
    replicas = report["replicas"]
    assert replicas["requested"] == 8 and replicas["fit"] == 6
    assert replicas["placements"] == {"n0": 2, "n1": 2, "n2": 2}
    assert report["message"].startswith("0/3 nodes are available: 3 Insufficient cpu.")
    assert state_of(snap) == before


@st.composite
def small_clusters(draw: st.DrawFn) -> tuple[list[NodeBuilder], list[PodBuilder], PodBuilder]:
    n = draw(st.integers(1, 6))
    nodes = [
        make_node(f"n{i}").capacity(cpu=str(draw(st.integers(1, 4))), pods=draw(st.integers(1, 4)))
        for i in range(n)
    ]
    placed = []
    for j in range(draw(st.integers(0, 6))):
        cpu = draw(st.sampled_from(["100m", "500m", "1"]))
        placed.append(make_pod(f"e{j}").req(cpu=cpu).node(f"n{draw(st.integers(0, n - 1))}"))
    pod = make_pod("p").req(cpu=draw(st.sampled_from(["100m", "1", "2", "3"])))
    return nodes, placed, pod


@settings(max_examples=40, deadline=None)
@given(small_clusters())
def test_what_if_agrees_with_the_scheduling_cycle(
    case: tuple[list[NodeBuilder], list[PodBuilder], PodBuilder],
) -> None:
    nodes, placed, pod = case
    snap = cluster(nodes, placed)
    fw = framework(snap)
    report = what_if(fw, [pod.info()], snap)
    try:
        chosen = Scheduler(fw, rng=random.Random(7)).schedule_pod(CycleState(), pod.info(), snap)
    except FitError as err:
        assert report["chosen"] is None and report["message"].startswith(err.message())
        return
    assert report["chosen"] is not None and chosen.suggested_host in report["best"]
    assert report["feasible"] == chosen.feasible_nodes


def test_replica_pods_are_named_apart() -> None:
    pods = replica_pods(make_pod("web").obj(), 3)
    assert [p.key for p in pods] == ["default/web", "default/web-whatif-1", "default/web-whatif-2"]
    assert len({p.pod.metadata.uid for p in pods}) == 3


@pytest.mark.parametrize("replicas", [1, 2])
def test_single_pod_reports_no_replica_section(replicas: int) -> None:
    snap = cluster([make_node("n1").capacity(cpu="4", pods=10)])
    report = what_if(framework(snap), replica_pods(make_pod("p").obj(), replicas), snap)
    assert ("replicas" in report) == (replicas > 1)


def by_names(*names: list[str]) -> dict[str, Any]:
    """A pod whose required node affinity names nodes (NodeAffinity's PreFilter reads it):
    one matchFields requirement per list, all in one term."""
    raw = make_pod("p").obj()
    fields = [{"key": "metadata.name", "operator": "In", "values": v} for v in names]
    raw["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": fields}]
            }
        }
    }
    return raw


def test_nodes_a_prefilter_leaves_out_are_grouped_as_not_candidates() -> None:
    snap = cluster([make_node(f"n{i}").capacity(cpu="4", pods=10) for i in range(3)])
    report = what_if(framework(snap), [PodInfo.of(by_names(["n1"]))], snap)
    assert report["chosen"] == "n1" and report["feasible"] == 1
    groups = {tuple(g["nodes"]): g["verdicts"] for g in report["groups"]}
    assert groups == {("n0", "n2"): {"PreFilter": "not a candidate"}, ("n1",): {}}


def test_a_prefilter_rejection_is_one_group_of_every_node() -> None:
    snap = cluster([make_node(f"n{i}").capacity(cpu="4", pods=10) for i in range(3)])
    report = what_if(framework(snap), [PodInfo.of(by_names(["n0"], ["n1"]))], snap)
    assert report["chosen"] is None and report["preFilter"]["plugin"] == "NodeAffinity"
    [group] = report["groups"]
    assert group["count"] == 3
    assert group["verdicts"]["NodeAffinity"].startswith("UnschedulableAndUnresolvable: ")
    assert report["message"].startswith("0/3 nodes are available: ")


def test_a_report_is_cut_to_fit_the_max_payload() -> None:
    groups = [{"count": 1, "verdicts": {"P": "x" * 50}, "nodes": [f"n{i}"]} for i in range(1000)]
    placements = {f"node-{i}": 1 for i in range(1000)}
    report = {"groups": groups, "scores": [], "best": [], "replicas": {"placements": placements}}
    body = fit_report(report, 5000)
    assert len(body) <= 5000
    fitted = json.loads(body)
    assert fitted["truncated"] and 0 < len(fitted["groups"]) < 1000
    assert fitted["groups"][0] == groups[0]  # the largest groups come first and stay
    small = {"groups": groups[:2], "scores": [], "best": []}
    assert "truncated" not in json.loads(fit_report(small, 5000))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"not json", "not JSON"),
        (b"[]", '"pod"'),
        (b'{"pod": {}, "replicas": 0}', "replicas"),
    ],
)
def test_a_request_it_cannot_read_is_refused_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(WhatIfError, match=reason):
        read_request(data)


# --- gangs: Permit holds a pod of an incomplete gang -----------------------------------------


def gang_framework(snap: ClusterSnapshot) -> Framework:
    profile = Profile.model_validate(
        {"plugins": {"multiPoint": {"enabled": [{"name": "GangScheduling"}]}}}
    )
    fw = Framework.from_profile(profile, REGISTRY)
    fw.set_snapshot(ClusterSnapshot([], snap.objects))  # what_if must set its own
    return fw


def gang_cluster(*placed: str) -> ClusterSnapshot:
    pods = [make_pod(n).node("n1").scheduling_group("train").req(cpu="1") for n in placed]
    snap = cluster([make_node("n1").capacity(cpu="8", pods=10)], pods)
    group = make_scheduling_pod_group("train", 3)
    snap.objects.pod_groups = {"default/train": SchedulingPodGroup.model_validate(group)}
    return snap


def gang_pod(name: str = "p", group: str = "train") -> dict[str, Any]:
    return make_pod(name).scheduling_group(group).req(cpu="1").obj()


@pytest.mark.parametrize(
    ("placed", "replicas", "waits"),
    [
        ((), 1, (1, 3)),  # today's answer was "held by PreEnqueue" for all of these
        (("m0",), 1, (2, 3)),
        ((), 2, (2, 3)),
        (("m0",), 2, None),  # 1 bound + 2 asked: the gang is complete, all bind
        ((), 3, None),
    ],
)
def test_a_pod_of_an_incomplete_gang_would_wait_at_permit_with_n_of_min_count_placed(
    placed: tuple[str, ...], replicas: int, waits: tuple[int, int] | None
) -> None:
    snap = gang_cluster(*placed)
    before = state_of(snap)
    fw = gang_framework(snap)
    report = what_if(fw, replica_pods(gang_pod(), replicas), snap)
    assert report["chosen"] == "n1" and "gated" not in report
    if waits is None:
        assert report["permit"] is None
    else:
        (wait,) = report["permit"]["wait"]
        assert wait == {
            "plugin": "GangScheduling",
            "message": "waiting for minCount pods from a gang to be waiting on permit",
            "timeoutSeconds": 100.0,
            "placed": waits[0],
            "minCount": waits[1],
        }
        lines = report_lines(report)
        assert any(
            "Would wait at Permit for GangScheduling" in line
            and f"({waits[0]} of minCount 3 placed, this pod included)" in line
            for line in lines
        ), lines
    assert state_of(snap) == before
    assert fw.handle.take_permit_signals() == []  # a complete gang's "allow" is not sent
    assert report.get("preEnqueue", {}).get("plugin") in (None, "GangScheduling")


def test_a_gang_pod_whose_pod_group_is_missing_is_still_reported_held() -> None:
    snap = gang_cluster()
    report = what_if(gang_framework(snap), [PodInfo.of(gang_pod(group="other"))], snap)
    assert report["gated"] == {
        "plugin": "GangScheduling",
        "message": 'waiting for pod\'s pod group "other" to appear in scheduling queue',
    }


def test_a_pod_in_no_gang_has_no_permit_section() -> None:
    snap = gang_cluster()
    report = what_if(gang_framework(snap), [make_pod("p").req(cpu="1").info(1)], snap)
    assert report["chosen"] == "n1" and report["permit"] is None and "preEnqueue" not in report


def test_the_gang_messages_what_if_knows_are_the_plugins() -> None:
    assert whatif.GANG_SCHEDULING == gangscheduling.NAME
    assert whatif.GANG_WAITING_FOR_PODS == gangscheduling.WAITING_FOR_PODS
