"""Cache transitions (kube-scheduler's cache_test is the model)."""

from __future__ import annotations

import pytest

from services.cache.cache import ADDED, ASSUMED, Cache
from shared.config import Profile, parse_config
from shared.framework.runtime import Framework
from shared.framework.status import Code
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY
from shared.tools.synthetic import make_node, make_pod
from tests.unit.conftest import Clock


@pytest.fixture
def cache(clock: Clock) -> Cache:
    c = Cache(clock, ttl=30, unbound_ttl=300)
    c.add_or_update_node(make_node("n1", cpu="1", memory="1Gi", pods=3))
    c.add_or_update_node(make_node("n2", cpu="1", memory="1Gi", pods=3))
    return c


FW = Framework.from_profile(Profile(), REGISTRY)


def pod(name: str, cpu: str = "400m") -> PodInfo:
    return PodInfo.of(make_pod(name, cpu=cpu, memory="10Mi"))


def test_assume_counts_the_pod_on_its_node_at_once(cache: Cache) -> None:
    assert cache.assume_pod(FW, pod("a"), "n1", "uid-a", 1).ok
    assert cache.nodes["n1"].requested["cpu"] == 400
    assert cache.pods["default/a"].state == ASSUMED


def test_assume_validates_against_committed_state(cache: Cache) -> None:
    assert cache.assume_pod(FW, pod("a", "700m"), "n1", "ua", 1).ok
    result = cache.assume_pod(FW, pod("b", "700m"), "n1", "ub", 1)
    assert not result.ok
    assert result.status is not None and result.status.reasons == ["Insufficient cpu"]
    assert result.status.plugin == "NodeResourcesFit"
    assert cache.nodes["n1"].requested["cpu"] == 700


def test_a_change_that_leaves_room_is_no_conflict(cache: Cache) -> None:
    assert cache.assume_pod(FW, pod("a", "300m"), "n1", "ua", 1).ok
    assert cache.assume_pod(FW, pod("b", "300m"), "n1", "ub", 1).ok


def test_generation_moves_with_every_change(cache: Cache) -> None:
    before = cache.nodes["n1"].generation
    cache.assume_pod(FW, pod("a"), "n1", "ua", 1)
    assert cache.nodes["n1"].generation > before
    assert cache.nodes["n1"].generation == cache.generation


def test_forget_frees_the_room(cache: Cache) -> None:
    cache.assume_pod(FW, pod("a"), "n1", "ua", 1)
    assert cache.forget_pod("default/a", "ua")
    assert cache.nodes["n1"].requested.get("cpu", 0) == 0
    assert "default/a" not in cache.pods


def test_forget_of_another_uid_is_ignored(cache: Cache) -> None:
    cache.assume_pod(FW, pod("a"), "n1", "ua", 1)
    assert not cache.forget_pod("default/a", "someone-else")
    assert cache.nodes["n1"].requested["cpu"] == 400


def test_add_confirms_an_assumed_pod(cache: Cache) -> None:
    p = pod("a")
    cache.assume_pod(FW, p, "n1", "ua", 1)
    cache.finish_binding("default/a", "ua")
    cache.add_pod("default/a", "ua", "n1", p, 2)
    assert cache.pods["default/a"].state == ADDED
    assert cache.nodes["n1"].requested["cpu"] == 400
    assert cache.nodes["n1"].num_pods == 1


def test_add_moves_a_pod_that_landed_elsewhere(cache: Cache) -> None:
    p = pod("a")
    cache.assume_pod(FW, p, "n1", "ua", 1)
    cache.add_pod("default/a", "ua", "n2", p, 2)
    assert cache.nodes["n1"].requested.get("cpu", 0) == 0
    assert cache.nodes["n2"].requested["cpu"] == 400


def test_finished_binding_expires_after_ttl(cache: Cache, clock: Clock) -> None:
    cache.assume_pod(FW, pod("a"), "n1", "ua", 1)
    cache.finish_binding("default/a", "ua")
    clock.now += 29
    assert cache.cleanup_expired() == []
    clock.now += 2
    assert cache.cleanup_expired() == ["default/a"]
    assert cache.nodes["n1"].num_pods == 0


def test_confirmed_pod_never_expires(cache: Cache, clock: Clock) -> None:
    p = pod("a")
    cache.assume_pod(FW, p, "n1", "ua", 1)
    cache.finish_binding("default/a", "ua")
    cache.add_pod("default/a", "ua", "n1", p, 2)
    clock.now += 3600
    assert cache.cleanup_expired() == []


def test_unfinished_assumption_expires_after_unbound_ttl(cache: Cache, clock: Clock) -> None:
    cache.assume_pod(FW, pod("a"), "n1", "ua", 1)
    clock.now += 301
    assert cache.cleanup_expired() == ["default/a"]


def test_reassume_replaces_a_stale_assumption(cache: Cache) -> None:
    cache.assume_pod(FW, pod("a"), "n1", "ua", 1)
    assert cache.assume_pod(FW, pod("a"), "n2", "ua", 1).ok
    assert cache.nodes["n1"].requested.get("cpu", 0) == 0
    assert cache.nodes["n2"].requested["cpu"] == 400


def test_an_attempt_forgotten_before_its_assume_came_is_refused(cache: Cache) -> None:
    """The queue fenced attempt 7 and asked to forget it while its assume was still on
    the way (held through a NATS server's death): let in late, it held room that
    nobody would forget until the unbound TTL, and the pods it kept out stayed parked."""
    assert not cache.forget_attempt("default/a", 7)
    result = cache.assume_pod(FW, pod("a"), "n1", "ua", 1, cycle=7)
    assert not result.ok
    assert cache.nodes["n1"].requested.get("cpu", 0) == 0
    assert cache.assume_pod(FW, pod("a"), "n2", "ua", 1, cycle=8).ok  # the next attempt


def test_a_late_assume_of_a_forgotten_attempt_keeps_the_newer_one(cache: Cache) -> None:
    assert cache.assume_pod(FW, pod("a"), "n2", "ua", 1, cycle=8).ok
    assert not cache.forget_attempt("default/a", 7)  # not the one assumed
    assert not cache.assume_pod(FW, pod("a"), "n1", "ua", 1, cycle=7).ok
    assert cache.pods["default/a"].cycle == 8
    assert cache.nodes["n2"].requested["cpu"] == 400


def test_a_forgotten_attempt_is_remembered_for_the_unbound_ttl(cache: Cache, clock: Clock) -> None:
    cache.forget_attempt("default/a", 7)
    clock.now += 301
    cache.cleanup_expired()
    assert cache.forgotten_attempts == {}


def test_bound_pod_cannot_be_assumed_again(cache: Cache) -> None:
    p = pod("a")
    cache.add_pod("default/a", "ua", "n1", p, 2)
    assert not cache.assume_pod(FW, p, "n2", "ua", 2).ok


def test_removed_node_keeps_its_pods_accounting(cache: Cache) -> None:
    p = pod("a")
    cache.add_pod("default/a", "ua", "n1", p, 2)
    cache.remove_node("n1")
    assert "n1" in cache.nodes and cache.nodes["n1"].raw_node is None
    assert [n.name for n in cache.schedulable_nodes()] == ["n2"]
    assert not cache.assume_pod(FW, pod("b"), "n1", "ub", 1).ok
    cache.remove_pod("default/a")
    assert "n1" not in cache.nodes


def test_too_many_pods(cache: Cache) -> None:
    for i in range(3):
        assert cache.assume_pod(FW, pod(f"p{i}", "10m"), "n1", f"u{i}", 1).ok
    result = cache.assume_pod(FW, pod("p3", "10m"), "n1", "u3", 1)
    assert result.status is not None and result.status.reasons == ["Too many pods"]


def test_stale_add_is_ignored(cache: Cache) -> None:
    p = pod("a")
    cache.add_pod("default/a", "ua", "n1", p, 5)
    cache.add_pod("default/a", "ua", "n2", p, 4)
    assert cache.pods["default/a"].node == "n1"


def test_dirty_tracking_and_restore_round_trip(cache: Cache, clock: Clock) -> None:
    cache.assume_pod(FW, pod("a"), "n1", "ua", 1)
    nodes, pods = cache.take_dirty()
    assert "n1" in nodes and "default/a" in pods
    copy = Cache(clock)
    copy.restore(
        [n.raw_node for n in cache.nodes.values() if n.raw_node],
        list(cache.pods.values()),
        cache.generation,
    )
    assert copy.nodes["n1"].requested == cache.nodes["n1"].requested
    assert copy.generation == cache.generation


# --- the worker's verdict, kept when nothing it depended on moved --------------------


def _anti(name: str) -> dict:
    raw = make_pod(name, labels={"color": "green"})
    term = {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "zone"}
    raw["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return raw


def test_verdict_holds_only_for_the_generation_the_worker_read(cache: Cache) -> None:
    seen = cache.nodes["n1"].generation
    plain = make_pod("p", cpu="100m")
    assert cache.verdict_holds(FW, plain, "n1", seen)
    assert not cache.verdict_holds(FW, plain, "n1", None)  # an older worker: validate
    assert not cache.verdict_holds(FW, plain, "nope", seen)
    cache.assume_pod(FW, pod("a"), "n1", "ua", 1)  # the node moved on since
    assert not cache.verdict_holds(FW, plain, "n1", seen)
    assert cache.verdict_holds(FW, plain, "n1", cache.nodes["n1"].generation)


def test_verdict_is_checked_again_when_other_nodes_matter(cache: Cache) -> None:
    seen = cache.nodes["n1"].generation
    assert not cache.verdict_holds(FW, _anti("x"), "n1", seen)
    spread = make_pod("s")
    spread["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    ]
    assert not cache.verdict_holds(FW, spread, "n1", seen)
    # a pod with required anti-affinity on another node may repel this one
    assert cache.assume_pod(FW, PodInfo.of(_anti("y")), "n2", "uy", 1).ok
    assert not cache.verdict_holds(FW, make_pod("p"), "n1", seen)
    cache.forget_pod("default/y", "uy")
    assert cache.verdict_holds(FW, make_pod("p"), "n1", seen)


def test_verdict_is_checked_again_under_unknown_plugins(cache: Cache) -> None:
    seen = cache.nodes["n1"].generation
    fw = Framework.from_profile(Profile(), REGISTRY)
    fw.filter_names = fw.filter_names | {"SomeoneElsesFilter"}
    assert not cache.verdict_holds(fw, make_pod("p"), "n1", seen)


def test_an_unvalidated_assume_counts_like_a_validated_one(cache: Cache) -> None:
    assert cache.assume_pod(
        FW, PodInfo.lazy(make_pod("a", cpu="700m")), "n1", "ua", 1, validate=False
    ).ok
    assert cache.nodes["n1"].requested["cpu"] == 700
    assert not cache.assume_pod(FW, pod("b", "700m"), "n1", "ub", 1).ok


def test_an_attempt_older_than_the_assumed_one_is_refused(cache: Cache) -> None:
    """A fenced attempt woken late (its pod was written again, so it schedules an older
    version) may not take the pod's room from the newer attempt that holds it."""
    assert cache.assume_pod(FW, pod("a"), "n2", "ua", 9, cycle=2).ok
    late = cache.assume_pod(FW, pod("a"), "n1", "ua", 5, cycle=1)
    assert not late.ok
    assert late.status is not None and late.status.reasons == ["a newer attempt holds the pod"]
    assert cache.pods["default/a"].node == "n2"
    assert cache.nodes["n1"].requested.get("cpu", 0) == 0
    # the same version again (a conflict retry) still replaces the assumption
    assert cache.assume_pod(FW, pod("a"), "n1", "ua", 9, cycle=2).ok
    assert cache.pods["default/a"].node == "n1"
    assert cache.nodes["n2"].requested.get("cpu", 0) == 0


# PodTopologySpread with a hard default constraint (List defaulting): zone maxSkew 1.
HARD_DEFAULTS = Framework.from_profile(
    parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "PodTopologySpread",
                            "args": {
                                "defaultingType": "List",
                                "defaultConstraints": [
                                    {
                                        "maxSkew": 1,
                                        "topologyKey": "topology.kubernetes.io/zone",
                                        "whenUnsatisfiable": "DoNotSchedule",
                                    }
                                ],
                            },
                        }
                    ]
                }
            ],
        }
    ).profiles[0],
    REGISTRY,
)
WEB_SERVICE = {"kind": "Service", "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}}}


def _zoned_cache(clock: Clock) -> Cache:
    c = Cache(clock, ttl=30, unbound_ttl=300)
    for name, zone in (("a1", "zone-a"), ("b1", "zone-b")):
        c.add_or_update_node(make_node(name, cpu="4", memory="4Gi", pods=10, zone=zone))
    return c


def test_hard_default_spreading_is_validated_with_the_services_the_cache_knows(
    clock: Clock,
) -> None:
    """The cache's objects are those its informer keeps: a Service selecting the pods gives
    the default constraint its selector, and the second web pod may not join the first."""
    cache = _zoned_cache(clock)
    web = [PodInfo.of(make_pod(f"w{i}", labels={"app": "web"})) for i in range(2)]
    assert cache.assume_pod(HARD_DEFAULTS, web[0], "a1", "u0", 1).ok
    seen = cache.nodes["a1"].generation
    assert cache.verdict_holds(HARD_DEFAULTS, web[1].raw, "a1", seen)  # nothing selects yet
    cache.objects.add(WEB_SERVICE)
    assert not cache.verdict_holds(HARD_DEFAULTS, web[1].raw, "a1", seen)
    result = cache.assume_pod(HARD_DEFAULTS, web[1], "a1", "u1", 1)
    assert not result.ok and result.status is not None
    assert result.status.code == Code.UNSCHEDULABLE
    assert cache.assume_pod(HARD_DEFAULTS, web[1], "b1", "u1", 1).ok


def test_system_default_spreading_only_scores_so_the_verdict_holds(clock: Clock) -> None:
    cache = _zoned_cache(clock)
    cache.objects.add(WEB_SERVICE)
    seen = cache.nodes["a1"].generation
    assert cache.verdict_holds(FW, make_pod("w", labels={"app": "web"}), "a1", seen)
