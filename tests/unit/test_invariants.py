"""The after-the-fact checks of invariant 3 (shared/tools/invariants.py) find what they should."""

from __future__ import annotations

from typing import Any

import pytest

from services.cache.cache import ADDED
from shared.tools.invariants import audit, replay
from shared.tools.observe import CACHE_ADDED
from tests.builders import HOSTNAME, ZONE, PodBuilder, make_node, make_pod

NODES = [
    make_node("a1").capacity(cpu="1", memory="1Gi", pods=2).zone("zone-a").obj(),
    make_node("a2").capacity(cpu="1", memory="1Gi", pods=2).zone("zone-a").obj(),
    make_node("b1").capacity(cpu="1", memory="1Gi", pods=2).zone("zone-b").obj(),
]


def pods(*builders: PodBuilder) -> dict[str, dict[str, Any]]:
    return {f"default/{b.obj()['metadata']['name']}": b.obj() for b in builders}


def web(name: str) -> PodBuilder:
    return make_pod(name).label("app", "web").spread(1, ZONE, "app", "web")


def db(name: str, topology_key: str = HOSTNAME) -> PodBuilder:
    return make_pod(name).label("app", "db").anti_affinity("app", "db", topology_key)


@pytest.mark.parametrize(
    ("placed", "bound", "found"),
    [
        pytest.param(
            pods(make_pod("x").req(cpu="600m"), make_pod("y").req(cpu="600m")),
            {"default/x": "a1", "default/y": "a1"},
            ["a1 overcommitted: cpu 1200 > 1000"],
            id="cpu",
        ),
        pytest.param(
            pods(make_pod("x"), make_pod("y"), make_pod("z")),
            {"default/x": "b1", "default/y": "b1", "default/z": "b1"},
            ["b1 overcommitted: pods 3 > 2"],
            id="pod count",
        ),
        pytest.param(
            pods(make_pod("x").req(memory="2Gi")),
            {"default/x": "nowhere"},
            ["nowhere overcommitted: bound to a node that does not exist"],
            id="unknown node",
        ),
        pytest.param(
            pods(make_pod("x").host_port(80, "10.0.0.1"), make_pod("y").host_port(80)),
            {"default/x": "a1", "default/y": "a1"},
            ["a1: default/y and default/x both hold ('0.0.0.0', 'TCP', 80)"],
            id="host port on 0.0.0.0",
        ),
        pytest.param(
            pods(db("x", ZONE), make_pod("y").label("app", "db")),
            {"default/x": "a1", "default/y": "a2"},
            [
                "default/x on a1 and default/y on a2 share topology.kubernetes.io/zone=zone-a "
                "against default/x's anti-affinity"
            ],
            id="anti-affinity of the pod placed first",
        ),
        pytest.param(
            pods(web("x"), web("y")),
            {"default/x": "a1", "default/y": "a2"},
            [
                "pods of default/x's spread over topology.kubernetes.io/zone (maxSkew 1) "
                "are skewed: {'zone-a': 2, 'zone-b': 0}"
            ],
            id="spread",
        ),
    ],
)
def test_audit_finds_each_kind_of_violation(
    placed: dict[str, dict[str, Any]], bound: dict[str, str], found: list[str]
) -> None:
    assert audit(NODES, placed, bound).lines() == found


def test_audit_accepts_a_valid_state() -> None:
    placed = pods(
        web("w1"),
        web("w2"),
        db("d1"),
        db("d2"),
        make_pod("p1").host_port(80, "10.0.0.1"),
        make_pod("p2").host_port(80, "10.0.0.2"),
    )
    bound = {
        "default/w1": "a1",
        "default/w2": "b1",
        "default/d1": "a1",
        "default/d2": "a2",
        "default/p1": "a2",
        "default/p2": "b1",
    }
    report = audit(NODES, placed, bound)
    assert report.ok and report.violated_constraints == 0, report.lines()


def test_replay_refuses_an_order_no_serial_scheduler_takes() -> None:
    """The same final state in two orders: zone-a, zone-b, zone-a is fine; zone-a twice
    first breaks maxSkew 1 at the second pod."""
    three = pods(web("x"), web("y"), web("z"))
    good = [(three["default/x"], "a1"), (three["default/y"], "b1"), (three["default/z"], "a2")]
    assert replay(NODES, good) == []
    bad = [good[0], good[2], good[1]]
    assert replay(NODES, bad) == [
        "default/z on a2: node(s) didn't match pod topology spread constraints"
    ]


def test_observe_reads_the_cache_state_the_cache_writes() -> None:
    assert CACHE_ADDED == ADDED
