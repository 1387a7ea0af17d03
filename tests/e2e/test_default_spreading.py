"""PodTopologySpread's default constraints, live: the Kubernetes documentation's
zookeeper StatefulSet (tests/data/manifests/zookeeper.yaml, unchanged: two Services, a
PodDisruptionBudget, the StatefulSet) applied with `ksched apply` on a three-zone
cluster whose one big node would take every replica by resource scores alone.

kube-scheduler's system defaults (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway)
take their selector from the Services selecting the pods and from the StatefulSet that
owns them: the replicas spread over the zones. With the docs' configuration that turns
the defaults off (`defaultingType: List`, `defaultConstraints: []`), they pile up on the
big node. The manifest's pod anti-affinity selects `app=zk`, a label its pods do not
carry, so it keeps nothing apart.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS

from shared.subjects import ERRORS_STREAM
from shared.tools.client import PodTracker, publish_node
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_node
from tests.conftest import make_test_stack
from tests.e2e.test_cli_e2e import ksched
from tests.unit.test_cli_apply_objects import SKIPPED_KINDS, SKIPPED_WARNINGS

pytestmark = pytest.mark.e2e

ZOOKEEPER = Path(__file__).resolve().parents[1] / "data" / "manifests" / "zookeeper.yaml"
REPLICAS = ("default/zk-0", "default/zk-1", "default/zk-2")
# The Kubernetes docs' configuration disabling cluster-level default constraints
# (schedcfg-podtopologyspread-no-defaults).
NO_DEFAULTS = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    pluginConfig:
      - name: PodTopologySpread
        args:
          defaultConstraints: []
          defaultingType: List
"""
# One big node (zone-a) the resource scores always prefer, two small ones elsewhere.
NODES = (
    make_node("big", cpu="64", memory="256Gi", zone="zone-a"),
    make_node("small-b", cpu="4", memory="16Gi", zone="zone-b"),
    make_node("small-c", cpu="4", memory="16Gi", zone="zone-c"),
)


def one_worker_stack(workdir: Path, config: str | None) -> LocalStack:
    """One worker: its lanes share one snapshot, so each replica is placed seeing the
    ones placed before it, as kube-scheduler's one-pod-at-a-time cycle does (two
    workers may place two replicas at once, each blind to the other)."""
    stack = make_test_stack(workdir, config=config)
    stack.workers = 1
    return stack


@pytest.fixture
def default_stack(tmp_path: Path) -> Iterator[LocalStack]:
    with running(one_worker_stack(tmp_path / "stack", None)) as st:
        yield st


@pytest.fixture
def no_defaults_stack(tmp_path: Path) -> Iterator[LocalStack]:
    with running(one_worker_stack(tmp_path / "stack", NO_DEFAULTS)) as st:
        yield st


async def apply_zookeeper(stack: LocalStack, path: Path = ZOOKEEPER) -> dict[str, str]:
    """Publish the nodes, apply `path` (the manifest, or a directory holding it); the
    replicas' nodes once bound."""
    nc: NATS = await nats.connect(stack.nats_url)
    tracker = PodTracker()
    await tracker.start(nc)
    try:
        js = nc.jetstream()
        for node in NODES:
            await publish_node(js, node)
        code, out, err = await ksched(stack.nats_url, "apply", "-f", str(path))
        assert code == 0, err
        unmodelled = [
            "Warning: statefulset.apps/zk: ksched does not model spec.updateStrategy, "
            "spec.podManagementPolicy, spec.volumeClaimTemplates (ignored)"
        ]
        assert err.splitlines() == (SKIPPED_WARNINGS if path.is_dir() else []) + unmodelled
        assert out.splitlines() == [
            "service/zk-hs created",
            "service/zk-cs created",
            "poddisruptionbudget.policy/zk-pdb created",
            "statefulset.apps/zk created",
            "  pod/zk-0 created",
            "  pod/zk-1 created",
            "  pod/zk-2 created",
        ]
        bound = await tracker.wait_until(lambda t: all(k in t.bound() for k in REPLICAS), 60)
        assert bound, f"bound: {tracker.bound()}"
        # nothing the file holds was refused at the door
        assert (await js.stream_info(ERRORS_STREAM)).state.messages == 0
        return {k: tracker.bound()[k] for k in REPLICAS}
    finally:
        await nc.close()


@pytest.mark.timeout(180)
async def test_system_default_constraints_spread_the_zookeeper_replicas_over_zones(
    default_stack: LocalStack, tmp_path: Path
) -> None:
    """`apply -f DIR`: the other file's kinds are skipped with a warning each."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "a-other-kinds.yaml").write_text(SKIPPED_KINDS)
    shutil.copy(ZOOKEEPER, manifests / "zookeeper.yaml")
    placed = await apply_zookeeper(default_stack, manifests)
    assert sorted(placed.values()) == ["big", "small-b", "small-c"], placed


@pytest.mark.timeout(180)
async def test_without_default_constraints_the_replicas_pile_up_on_the_big_node(
    no_defaults_stack: LocalStack,
) -> None:
    placed = await apply_zookeeper(no_defaults_stack)
    assert set(placed.values()) == {"big"}, placed
