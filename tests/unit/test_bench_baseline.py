"""The in-process baseline schedules every pod that fits, and only those."""

from __future__ import annotations

from shared.tools.bench.baseline import run_scheduling_basic


def test_every_pod_that_fits_is_bound() -> None:
    result = run_scheduling_basic(nodes=6, init_pods=6, pods=60)
    assert (result["bound"], result["unschedulable"]) == (60, 0)


def test_pods_beyond_the_cluster_are_unschedulable() -> None:
    # One node of 4 cpu and 110 pods, 2 pods on it already: 38 more default pods
    # (100m each) fill its cpu; the rest do not fit.
    result = run_scheduling_basic(nodes=1, init_pods=2, pods=50)
    assert (result["bound"], result["unschedulable"]) == (38, 12)
