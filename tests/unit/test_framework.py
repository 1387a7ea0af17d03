"""The cycle's pure parts: Filter/Score over nodes, selectHost, the FitError message."""

from __future__ import annotations

import random

import pytest

from services.worker.schedule_one import schedule_pod
from shared.cli.workload import make_node, make_pod
from shared.framework.framework import FitError, default_framework, select_host
from shared.framework.types import NodeInfo, PodInfo

FW = default_framework("default-scheduler")


def node(name: str, cpu: str = "2", memory: str = "4Gi", pods: int = 110) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node(make_node(name, cpu=cpu, memory=memory, pods=pods))
    return info


def test_least_allocated_prefers_the_emptier_node() -> None:
    busy, idle = node("busy"), node("idle")
    busy.add_pod(PodInfo.of(make_pod("x", cpu="1500m", memory="1Gi")))
    chosen = schedule_pod(FW, PodInfo.of(make_pod("p")), [busy, idle], random.Random(1))
    assert chosen.name == "idle"


def test_message_is_kube_schedulers_histogram_sorted_as_strings() -> None:
    small = node("small", cpu="1", memory="64Mi")
    full = node("full", pods=1)
    full.add_pod(PodInfo.of(make_pod("x", cpu="10m", memory="1Mi")))
    fine_but_cpu = node("c", cpu="1")
    pod = PodInfo.of(make_pod("p", cpu="1500m", memory="128Mi"))
    with pytest.raises(FitError) as info:
        schedule_pod(FW, pod, [small, full, fine_but_cpu], random.Random(1))
    assert info.value.message() == (
        "0/3 nodes are available: 1 Insufficient memory, 1 Too many pods, 2 Insufficient cpu."
    )


def test_no_nodes() -> None:
    with pytest.raises(FitError) as info:
        schedule_pod(FW, PodInfo.of(make_pod("p")), [], random.Random(1))
    assert info.value.message() == "no nodes available to schedule pods"


def test_select_host_breaks_ties_uniformly() -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    rng = random.Random(3)
    picks = [select_host(nodes, [5, 9, 9, 1], rng).name for _ in range(2000)]
    assert set(picks) == {"n1", "n2"}
    assert 800 < picks.count("n1") < 1200
