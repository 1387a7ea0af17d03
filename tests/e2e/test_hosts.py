"""ksched on three hosts made of network namespaces (shared/tools/hosts.py): a short
chaos-hosts run. One host is cut off under load, then healed; another fault kills
every process of a host. After each: no pod lost, none bound twice, no node
overcommitted, pods bind again after the fault, and the cut-off host's binders wrote
no binding while cut off (though they bind before and after). `make chaos-hosts` runs
every fault, longer. Needs root and `ip netns` (as in CI); skipped otherwise."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.tools.chaos import CHAOS_ENV
from shared.tools.chaoshosts import HostsChaosConfig, run_hosts_chaos
from shared.tools.hosts import Hosts
from shared.tools.netns import HostNet, clear_leftovers, sh, unavailable_reason
from tests.conftest import skip_without

pytestmark = [
    pytest.mark.e2e,
    skip_without(unavailable_reason()),
    pytest.mark.timeout(600),
]

SHORT = HostsChaosConfig(
    faults=("partition", "kill-host"),
    nodes=40,
    rate=8,
    before=3,
    after=6,
    cut_seconds=10,
)


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    env = {**CHAOS_ENV, "KSCHED_LOG_LEVEL": "info"}
    running = Hosts(HostNet.create(3), tmp_path, env, sentinel_url=SHORT.sentinel)
    try:
        running.start()
        yield running
    finally:
        running.stop()


async def test_partition_and_host_loss_keep_the_invariants(hosts: Hosts) -> None:
    report = await run_hosts_chaos(hosts, SHORT)
    text = "\n".join(report.lines())
    partition, kill_host = report.rows
    for row in report.rows:
        assert row.pods > 0 and not row.blocked, text
        assert not row.lost and not row.double_bound, text
        assert not row.overcommitted and not row.violated, text
        assert row.rebind_seconds is not None, text
    # The cut-off side wrote no binding while cut off, and the check is not vacuous:
    # its binders do bind (their writes carry their names) before and after the cut.
    assert partition.minority_binds == 0, text
    assert partition.outside_binds > 0, text
    assert kill_host.bound > 0, text


def test_leftovers_of_a_crashed_run_are_cleared() -> None:
    """A run whose owner died leaves namespaces, a bridge and a FORWARD rule behind;
    the next run clears them."""
    made = subprocess.run(
        [
            sys.executable,
            "-c",
            "from shared.tools.netns import HostNet; print(HostNet.create(2).owner)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    owner = int(made.stdout)
    assert f"ksched-{owner}-h1" in sh("ip", "netns", "list")
    assert owner in clear_leftovers()
    assert f"ksched-{owner}-" not in sh("ip", "netns", "list")
    assert f"ksbr{owner}" not in sh("ip", "-o", "link")
    assert f"ksched-hosts-{owner}" not in sh("iptables", "-S", "FORWARD")
