"""NodeName: PreFilter narrows the candidates to the named node."""

from __future__ import annotations

from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.nodename import ERR_REASON, new


def node(name: str) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node({"metadata": {"name": name}})
    return info


def test_pre_filter_result_is_the_named_node() -> None:
    named = PodInfo.of({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}})
    result, status = new({}, Handle()).pre_filter(CycleState(), named, [node("n1"), node("n2")])
    assert status.ok and result is not None and result.node_names == {"n1"}
    result, status = new({}, Handle()).pre_filter(CycleState(), PodInfo.of({}), [node("n1")])
    assert status.code == Code.SUCCESS and result is None  # not Skip: Filter still runs


def test_filter_rejects_other_nodes_unresolvably() -> None:
    named = PodInfo.of({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}})
    nn = new({}, Handle())
    assert nn.filter(CycleState(), named, node("n1")).ok
    status = nn.filter(CycleState(), named, node("n2"))
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON])
    assert nn.filter(CycleState(), PodInfo.of({}), node("n2")).ok
