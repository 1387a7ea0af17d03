"""Pod signatures (KEP-5598's SignPod) and the OpportunisticBatching gate."""

from __future__ import annotations

import pytest

from shared.config import (
    OPPORTUNISTIC_BATCHING,
    ConfigError,
    Profile,
    SchedulerConfiguration,
    parse_config,
)
from shared.framework.runtime import Framework
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import SUCCESS, Status
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY
from tests.builders import PodBuilder, cluster_objects, make_node, make_pod

SERVICE = {
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"selector": {"app": "web"}},
}


def framework(profile: Profile | None = None, *objects: dict, pods: tuple = ()) -> Framework:
    fw = Framework.from_profile(profile or Profile(), REGISTRY)
    node = make_node("n1").info()
    for pod in pods:
        node.add_pod(pod.info())
    fw.set_snapshot(ClusterSnapshot([node], cluster_objects(*objects)))
    return fw


def replica(name: str) -> PodBuilder:
    return make_pod(name).label("app", "web").req(cpu="100m", memory="64Mi").image("nginx")


def sign(pod: PodBuilder, fw: Framework | None = None) -> bytes | None:
    return (fw or framework()).signer.sign(PodInfo.of(pod.obj()))


def test_replicas_of_one_template_share_a_signature() -> None:
    fw = framework()
    assert sign(replica("a").uid("1"), fw) is not None
    assert sign(replica("a").uid("1"), fw) == sign(replica("b").uid("2"), fw)


@pytest.mark.parametrize(
    "other",
    [
        replica("b").req(cpu="200m"),
        replica("b").image("redis"),
        replica("b").host_port(8080),
        replica("b").node("n1"),
    ],
    ids=["requests", "image", "host port", "node name"],
)
def test_what_a_plugin_reads_tells_signatures_apart(other: PodBuilder) -> None:
    fw = framework()
    assert sign(other, fw) != sign(replica("a"), fw)


def test_labels_and_namespace_count_once_pods_with_affinity_terms_may_match_them() -> None:
    other_labels = replica("b").label("tier", "front")
    other_namespace = make_pod("b", "other").label("app", "web").req(cpu="100m", memory="64Mi")
    other_namespace.image("nginx")
    plain = framework()
    assert sign(replica("a"), plain) == sign(other_labels, plain) == sign(other_namespace, plain)
    terms = framework(pods=(make_pod("x").node("n1").anti_affinity("tier", "front"),))
    assert (
        len({sign(replica("a"), terms), sign(other_labels, terms), sign(other_namespace, terms)})
        == 3
    )


@pytest.mark.parametrize(
    "pod",
    [
        replica("a").anti_affinity("app", "web"),
        replica("a").spread(1, "topology.kubernetes.io/zone", "app", "web"),
        replica("a").spread(1, "kubernetes.io/hostname", "app", "web", hard=False),
    ],
    ids=["inter-pod anti-affinity", "spread DoNotSchedule", "spread ScheduleAnyway"],
)
def test_pods_with_cross_node_inputs_are_not_signed(pod: PodBuilder) -> None:
    assert sign(pod) is None


def test_defaulted_spreading_refuses_only_the_pods_it_applies_to() -> None:
    """System default constraints apply once a Service selects the pod."""
    with_service = framework(None, SERVICE)
    assert sign(replica("a"), with_service) is None
    assert sign(make_pod("b").label("app", "db"), with_service) is not None


class NoSign:
    """A Filter plugin without sign_pod (upstream's batch test's "nosign")."""

    name = "NoSign"

    def filter(self, state: object, pod: PodInfo, node: object) -> Status:
        return SUCCESS


def test_a_plugin_that_cannot_sign_turns_signatures_off_for_its_profile() -> None:
    registry = {**REGISTRY, "NoSign": lambda args, handle: NoSign()}
    profile = parse_config(
        {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "NoSign"}]}}}]}
    ).profiles[0]
    fw = Framework.from_profile(profile, registry)
    assert fw.signer.unsupported == ["NoSign"]
    assert fw.signer.sign(PodInfo.of(replica("a").obj())) is None


def test_opportunistic_batching_gate_is_on_by_default_and_can_be_turned_off() -> None:
    assert SchedulerConfiguration().feature_enabled(OPPORTUNISTIC_BATCHING, {})
    off = parse_config({"featureGates": {OPPORTUNISTIC_BATCHING: False}})
    assert not off.feature_enabled(OPPORTUNISTIC_BATCHING, {})
    env = {"KSCHED_FEATURE_GATES": f"{OPPORTUNISTIC_BATCHING}=true"}
    assert off.feature_enabled(OPPORTUNISTIC_BATCHING, env)  # the environment wins
    with pytest.raises(ConfigError, match="unknown feature gate"):
        parse_config({"featureGates": {"NoSuchGate": True}})
    with pytest.raises(ConfigError, match="Name=true"):
        SchedulerConfiguration().feature_enabled(
            OPPORTUNISTIC_BATCHING, {"KSCHED_FEATURE_GATES": "OpportunisticBatching=maybe"}
        )
