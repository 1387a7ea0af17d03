"""Behaviour of the small node plugins that the conformance vectors leave out."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config import ConfigError
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY
from shared.tools.synthetic import make_node, make_pod


def node(name: str, **labels: str) -> NodeInfo:
    raw = make_node(name)
    raw["metadata"]["labels"].update(labels)
    info = NodeInfo(name)
    info.set_node(raw)
    return info


def plugin(name: str, args: dict[str, Any] | None = None) -> Any:
    return REGISTRY[name](args or {}, Handle())


@pytest.mark.parametrize(
    "name",
    [
        "PrioritySort",
        "SchedulingGates",
        "NodeUnschedulable",
        "NodeName",
        "NodePorts",
        "TaintToleration",
        "NodeAffinity",
        "DefaultBinder",
    ],
)
def test_unknown_args_are_refused_naming_the_field(name: str) -> None:
    with pytest.raises(ConfigError, match=rf"pluginConfig\[{name}\]\.args\.bogus: unknown field"):
        plugin(name, {"bogus": 1})


def test_scheduling_gates_message_lists_the_gates_like_go() -> None:
    pod = make_pod("p")
    pod["spec"]["schedulingGates"] = [{"name": "a"}, {"name": "b"}]
    status = plugin("SchedulingGates").pre_enqueue(PodInfo.of(pod))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ["waiting for scheduling gates: [a b]"]
    assert plugin("SchedulingGates").pre_enqueue(PodInfo.of(make_pod("q"))).ok


def test_added_affinity_is_enforced_for_every_pod() -> None:
    na = plugin(
        "NodeAffinity",
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "pool", "operator": "In", "values": ["batch"]}
                            ]
                        }
                    ]
                }
            }
        },
    )
    pod = PodInfo.of(make_pod("p"))
    state = CycleState()
    _, status = na.pre_filter(state, pod, [])
    assert status.ok  # not skipped: the enforced affinity applies
    assert na.filter(state, pod, node("a", pool="batch")).ok
    status = na.filter(state, pod, node("b", pool="web"))
    assert status.reasons == ["node(s) didn't match scheduler-enforced node affinity"]


def test_bad_added_affinity_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"args\.addedAffinity: .*operator"):
        plugin(
            "NodeAffinity",
            {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "k", "operator": "Near"}]}
                        ]
                    }
                }
            },
        )


def test_match_fields_narrow_prefilter_to_named_nodes() -> None:
    pod = make_pod("p")
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["a", "b"]}
                        ]
                    },
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]},
                ]
            }
        }
    }
    result, status = plugin("NodeAffinity").pre_filter(CycleState(), PodInfo.of(pod), [])
    assert status.ok and result is not None and result.node_names == {"a", "b", "c"}


def test_cordoned_node_takes_pods_that_tolerate_it() -> None:
    cordoned = node("c")
    assert cordoned.raw_node is not None
    cordoned.raw_node["spec"] = {"unschedulable": True}
    cordoned.set_node(cordoned.raw_node)
    nu = plugin("NodeUnschedulable")
    assert not nu.filter(CycleState(), PodInfo.of(make_pod("p")), cordoned).ok
    tolerant = make_pod("t")
    tolerant["spec"]["tolerations"] = [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert nu.filter(CycleState(), PodInfo.of(tolerant), cordoned).ok


async def test_default_binder_uses_the_binders_publish() -> None:
    handle = Handle()
    binder = REGISTRY["DefaultBinder"]({}, handle)
    pod = PodInfo.of(make_pod("p"))
    status = await binder.bind(CycleState(), pod, "n1")  # type: ignore[attr-defined]
    assert status.code == Code.ERROR
    seen: list[str] = []

    async def bind_pod(p: PodInfo, node_name: str):  # type: ignore[no-untyped-def]
        seen.append(f"{p.key}->{node_name}")
        from shared.framework.status import SUCCESS

        return SUCCESS

    handle.providers.bind_pod = bind_pod
    assert (await binder.bind(CycleState(), pod, "n1")).ok  # type: ignore[attr-defined]
    assert seen == ["default/p->n1"]
