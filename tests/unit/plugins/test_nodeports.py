"""NodePorts conflict rules (HostPortInfo.CheckConflict) beyond the vectors."""

from __future__ import annotations

from typing import Any

import pytest

from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.nodeports import ERR_REASON, conflicts, new


def port(host_port: int, host_ip: str = "", protocol: str = "") -> dict[str, Any]:
    p: dict[str, Any] = {"containerPort": 80, "hostPort": host_port}
    if host_ip:
        p["hostIP"] = host_ip
    if protocol:
        p["protocol"] = protocol
    return p


def pod(name: str, *ports: dict[str, Any], node: str = "", sidecar: bool = False) -> PodInfo:
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "ports": list(ports)}]}
    if sidecar:  # an init container that keeps running holds its ports
        spec = {
            "nodeName": node,
            "initContainers": [{"name": "s", "restartPolicy": "Always", "ports": list(ports)}],
            "containers": [{"name": "c"}],
        }
    return PodInfo.of({"metadata": {"name": name}, "spec": spec})


@pytest.mark.parametrize(
    ("wanted", "used", "conflict"),
    [
        (("1.2.3.4", "TCP", 80), [("1.2.3.4", "TCP", 80)], True),
        (("1.2.3.4", "TCP", 80), [("1.2.3.5", "TCP", 80)], False),
        (("1.2.3.4", "TCP", 80), [("0.0.0.0", "TCP", 80)], True),
        (("0.0.0.0", "TCP", 80), [("1.2.3.5", "TCP", 80)], True),
        (("0.0.0.0", "TCP", 80), [("1.2.3.5", "UDP", 80)], False),
        (("0.0.0.0", "TCP", 80), [("1.2.3.5", "TCP", 81)], False),
    ],
)
def test_check_conflict(
    wanted: tuple[str, str, int], used: list[tuple[str, str, int]], conflict: bool
) -> None:
    assert conflicts([wanted], set(used)) is conflict


@pytest.mark.parametrize("run_pre_filter", [True, False])
def test_filter_sees_ports_of_pods_on_the_node_including_sidecars(run_pre_filter: bool) -> None:
    info = NodeInfo("n")
    info.set_node({"metadata": {"name": "n"}})
    info.add_pod(pod("old", port(8080, "10.0.0.1", "UDP"), node="n", sidecar=True))
    np = new({}, Handle())
    cases = [
        (pod("p1", port(8080)), True),  # 0.0.0.0/TCP: another protocol
        (pod("p2", port(8080, protocol="UDP")), False),  # 0.0.0.0 clashes with every IP
        (pod("p3", port(8080, "10.0.0.2", "UDP")), True),
        (pod("p4", port(8080, "10.0.0.1", "UDP")), False),
    ]
    for p, fits in cases:
        state = CycleState()
        if run_pre_filter:
            assert np.pre_filter(state, p, [info])[1].ok
        status = np.filter(state, p, info)
        assert status.ok is fits, p.key
        if not fits:
            assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, [ERR_REASON])


def test_pre_filter_skips_pods_without_host_ports() -> None:
    _, status = new({}, Handle()).pre_filter(CycleState(), pod("p", port(0)), [])
    assert status.code == Code.SKIP
