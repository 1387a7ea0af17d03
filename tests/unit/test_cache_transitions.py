"""Each cache transition, case by case (kube-scheduler's backend/cache/cache_test.go is
the model): what a NodeInfo aggregates after Assume, FinishBinding, Expire, Forget, Add,
Update and Remove, node add/update/remove, image states and generations.

test_cache.py holds the first, shorter tests of the same transitions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from services.cache.cache import ADDED, ASSUMED, ASSUMED_POD_TTL, Cache, PodState
from services.cache.service import assumed_pod_ttl
from shared.api.resources import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST
from shared.config import Profile
from shared.framework.runtime import Framework
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import ImageStateSummary, NodeInfo, PodInfo
from shared.plugins import REGISTRY
from tests.builders import ZONE, PodBuilder, make_node, make_pod
from tests.unit.conftest import Clock

FW = Framework.from_profile(Profile(), REGISTRY)
MB = 1024 * 1024


@pytest.fixture
def cache(clock: Clock) -> Cache:
    c = Cache(clock)
    for name in ("node", "other"):
        c.add_or_update_node(
            make_node(name)
            .capacity(cpu="4", memory="4Gi", pods=10, example_com_foo=10, ephemeral_storage="1Gi")
            .obj()
        )
    return c


def base_pod(name: str, cpu: str = "100m", memory: str = "500", port: int = 80) -> PodBuilder:
    """makeBasePod: requests and one host port on 127.0.0.1/TCP."""
    pod = make_pod(name)
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if requests:
        pod.req(**requests)
    if port:
        pod.host_port(port, "127.0.0.1", "TCP")
    return pod


def assume(cache: Cache, pod: PodInfo, node: str = "node") -> None:
    result = cache.assume_pod(FW, pod, node, pod.pod.metadata.uid or "", 1)
    assert result.ok, result.status


def uid(pod: PodInfo) -> str:
    return pod.pod.metadata.uid or ""


@dataclass
class Aggregates:
    """What NodeInfo sums over its pods (kube's Requested, NonZeroRequested, UsedPorts)."""

    requested: dict[str, int]
    nonzero: tuple[int, int]
    ports: set[tuple[str, str, int]]
    pods: set[str]


def aggregates(info: NodeInfo) -> Aggregates:
    return Aggregates(
        dict(info.requested),
        (info.nonzero_cpu, info.nonzero_memory),
        set(info.used_ports),
        set(info.pods),
    )


EMPTY = Aggregates({}, (0, 0), set(), set())
LOCAL_80 = ("127.0.0.1", "TCP", 80)
LOCAL_8080 = ("127.0.0.1", "TCP", 8080)

# --- Assume (TestAssumePodScheduled) ----------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        pytest.param(
            [base_pod("p0")],
            Aggregates({"cpu": 100, "memory": 500}, (100, 500), {LOCAL_80}, {"default/p0"}),
            id="one pod with requests and a host port",
        ),
        pytest.param(
            [base_pod("p1"), base_pod("p2", "200m", "1Ki", 8080)],
            Aggregates(
                {"cpu": 300, "memory": 1524},
                (300, 1524),
                {LOCAL_80, LOCAL_8080},
                {"default/p1", "default/p2"},
            ),
            id="requests sum up, ports of both pods are used",
        ),
        pytest.param(
            [base_pod("p3", cpu="", memory="")],
            Aggregates(
                {},
                (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST),
                {LOCAL_80},
                {"default/p3"},
            ),
            id="no requests: zero requested, kube's defaults in the non-zero requests",
        ),
        pytest.param(
            [
                base_pod("p4").req(example_com_foo="3"),
                base_pod("p5", port=8080).req(example_com_foo="5"),
            ],
            Aggregates(
                {"cpu": 200, "memory": 1000, "example.com/foo": 8},
                (200, 1000),
                {LOCAL_80, LOCAL_8080},
                {"default/p4", "default/p5"},
            ),
            id="extended resources are requested, not in the non-zero requests",
        ),
        pytest.param(
            [make_pod("p6").req(ephemeral_storage="500")],
            Aggregates(
                {"ephemeral-storage": 500},
                (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST),
                set(),
                {"default/p6"},
            ),
            id="ephemeral storage (TestEphemeralStorageResource)",
        ),
    ],
)
def test_assume_aggregates_on_the_node_and_forget_takes_it_back(
    cache: Cache, pods: list[PodBuilder], want: Aggregates
) -> None:
    infos = [p.info() for p in pods]
    for pod in infos:
        assume(cache, pod)
        assert cache.pods[pod.key].state == ASSUMED
    assert aggregates(cache.nodes["node"]) == want
    for pod in infos:
        assert cache.forget_pod(pod.key, uid(pod))
        assert pod.key not in cache.pods
    assert aggregates(cache.nodes["node"]) == EMPTY


@pytest.mark.parametrize(
    ("requests", "nonzero"),
    [
        ({}, (100, 200 * MB)),
        ({"cpu": "250m"}, (250, 200 * MB)),
        ({"memory": "1Gi"}, (100, 1024 * MB)),
        ({"cpu": "0", "memory": "0"}, (0, 0)),  # an explicit zero is not defaulted
    ],
)
def test_non_zero_requests_default_only_what_is_missing(
    cache: Cache, requests: dict[str, str], nonzero: tuple[int, int]
) -> None:
    pod = make_pod("p").req(**requests).info() if requests else make_pod("p").info()
    assume(cache, pod)
    info = cache.nodes["node"]
    assert (info.nonzero_cpu, info.nonzero_memory) == nonzero


# --- FinishBinding and expiry (TestExpirePod) -------------------------------------------


@pytest.mark.parametrize("ttl", [None, 5.0])
def test_finished_binding_expires_after_the_ttl_and_frees_the_node(
    clock: Clock, ttl: float | None
) -> None:
    cache = Cache(clock) if ttl is None else Cache(clock, ttl=ttl)
    want_ttl = ASSUMED_POD_TTL if ttl is None else ttl
    assert cache.ttl == want_ttl == (30.0 if ttl is None else 5.0)
    cache.add_or_update_node(make_node("node").obj())
    pod = base_pod("p").info()
    assume(cache, pod)
    cache.finish_binding(pod.key, uid(pod))
    assert cache.pods[pod.key].deadline == clock.now + want_ttl
    clock.now += want_ttl - 0.5
    assert cache.cleanup_expired() == []
    generation = cache.nodes["node"].generation
    clock.now += 0.5
    assert cache.cleanup_expired() == [pod.key]
    assert pod.key not in cache.pods
    assert aggregates(cache.nodes["node"]) == EMPTY
    assert cache.nodes["node"].generation > generation


def test_an_expired_pod_is_added_back_when_its_binding_shows_up(cache: Cache, clock: Clock) -> None:
    pod = base_pod("p").info()
    assume(cache, pod)
    cache.finish_binding(pod.key, uid(pod))
    clock.now += ASSUMED_POD_TTL
    assert cache.cleanup_expired() == [pod.key]
    cache.add_pod(pod.key, uid(pod), "node", pod, 2)
    assert cache.pods[pod.key].state == ADDED
    assert aggregates(cache.nodes["node"]).pods == {pod.key}


def test_an_assumption_whose_binding_never_finished_waits_for_the_unbound_ttl(
    clock: Clock,
) -> None:
    cache = Cache(clock, ttl=30, unbound_ttl=120)
    cache.add_or_update_node(make_node("node").obj())
    pod = base_pod("p").info()
    assume(cache, pod)
    clock.now += 60
    assert cache.cleanup_expired() == []
    clock.now += 60
    assert cache.cleanup_expired() == [pod.key]


def test_finish_binding_changes_no_node_and_ignores_unknown_pods(cache: Cache) -> None:
    pod = base_pod("p").info()
    assume(cache, pod)
    generation = cache.generation
    cache.finish_binding(pod.key, "another-uid")
    cache.finish_binding("default/unknown", "u")
    assert not cache.pods[pod.key].binding_finished
    cache.finish_binding(pod.key, uid(pod))
    assert cache.pods[pod.key].binding_finished
    assert cache.generation == generation


def test_finish_binding_of_a_confirmed_pod_does_not_start_an_expiry(
    cache: Cache, clock: Clock
) -> None:
    pod = base_pod("p").info()
    assume(cache, pod)
    cache.add_pod(pod.key, uid(pod), "node", pod, 2)  # the watcher was faster
    cache.finish_binding(pod.key, uid(pod))
    clock.now += 10 * ASSUMED_POD_TTL
    assert cache.cleanup_expired() == []
    assert cache.pods[pod.key].deadline is None


def test_the_ttl_comes_from_the_environment() -> None:
    assert assumed_pod_ttl({}) == ASSUMED_POD_TTL == 30.0
    assert assumed_pod_ttl({"KSCHED_CACHE_ASSUMED_POD_TTL_SECONDS": "2.5"}) == 2.5
    for bad in ("0", "-1", "soon", "nan"):
        with pytest.raises(ValueError, match="KSCHED_CACHE_ASSUMED_POD_TTL_SECONDS"):
            assumed_pod_ttl({"KSCHED_CACHE_ASSUMED_POD_TTL_SECONDS": bad})


# --- Forget (TestForgetPod) -------------------------------------------------------------


def test_forget_twice_is_a_no_op_and_a_bound_pod_cannot_be_forgotten(cache: Cache) -> None:
    assumed, bound = base_pod("a").info(), base_pod("b", port=8080).info()
    assume(cache, assumed)
    cache.add_pod(bound.key, uid(bound), "node", bound, 3)
    assert cache.forget_pod(assumed.key, uid(assumed))
    assert not cache.forget_pod(assumed.key, uid(assumed))
    assert not cache.forget_pod(bound.key, uid(bound))
    assert aggregates(cache.nodes["node"]).pods == {bound.key}


# --- Add (TestAddPodWillConfirm, TestAddPodWillReplaceAssumed, ...) ---------------------


def test_add_confirms_one_of_two_assumed_pods(cache: Cache) -> None:
    first, second = base_pod("p1").info(), base_pod("p2", "200m", "1Ki", 8080).info()
    assume(cache, first)
    assume(cache, second)
    cache.add_pod(first.key, uid(first), "node", first, 2)
    assert cache.pods[first.key].state == ADDED
    assert cache.pods[second.key].state == ASSUMED
    assert cache.forget_pod(second.key, uid(second))
    assert aggregates(cache.nodes["node"]) == Aggregates(
        {"cpu": 100, "memory": 500}, (100, 500), {LOCAL_80}, {first.key}
    )


def test_add_always_stores_the_added_version_of_an_assumed_pod(cache: Cache) -> None:
    assumed = base_pod("p").info(1)
    added = base_pod("p").label("seen", "yes").info(2)
    assume(cache, assumed)
    cache.add_pod(added.key, uid(added), "node", added, 2)
    assert cache.nodes["node"].pods[added.key] is added
    assert cache.pods[added.key].pod is added


def test_add_moves_an_assumed_pod_that_was_bound_elsewhere_then_update_replaces_it(
    cache: Cache,
) -> None:
    assumed = make_pod("p").req(cpu="100m", memory="500").host_port(80).info(1)
    added = make_pod("p").req(cpu="100m", memory="500").host_port(80).node("other").info(2)
    updated = make_pod("p").req(cpu="200m", memory="500").host_port(90).node("other").info(3)
    assume(cache, assumed)
    before = cache.nodes["node"].generation
    cache.add_pod(added.key, uid(added), "other", added, 2)
    assert aggregates(cache.nodes["node"]) == EMPTY
    assert cache.nodes["node"].generation > before
    cache.add_pod(updated.key, uid(updated), "other", updated, 3)
    assert aggregates(cache.nodes["other"]) == Aggregates(
        {"cpu": 200, "memory": 500}, (200, 500), {("0.0.0.0", "TCP", 90)}, {updated.key}
    )


def test_add_of_an_unknown_bound_pod_counts_it(cache: Cache) -> None:
    pod = base_pod("p").info()
    cache.add_pod(pod.key, uid(pod), "node", pod, 1)
    assert cache.pods[pod.key].state == ADDED
    assert aggregates(cache.nodes["node"]).requested == {"cpu": 100, "memory": 500}


def test_a_replayed_add_changes_nothing(cache: Cache) -> None:
    pod = base_pod("p").info()
    cache.add_pod(pod.key, uid(pod), "node", pod, 4)
    generation = cache.generation
    cache.add_pod(pod.key, uid(pod), "node", pod, 4)
    assert cache.generation == generation
    assert aggregates(cache.nodes["node"]).requested == {"cpu": 100, "memory": 500}


# --- Update (TestUpdatePod) -------------------------------------------------------------


def test_update_replaces_requests_and_ports_each_time(cache: Cache) -> None:
    versions = [
        base_pod("p").info(1),
        base_pod("p", "200m", "1Ki", 8080).info(2),
        base_pod("p").info(3),
    ]
    wants = [
        Aggregates({"cpu": 200, "memory": 1024}, (200, 1024), {LOCAL_8080}, {"default/p"}),
        Aggregates({"cpu": 100, "memory": 500}, (100, 500), {LOCAL_80}, {"default/p"}),
    ]
    cache.add_pod("default/p", "uid-default-p", "node", versions[0], 1)
    for pod, want in zip(versions[1:], wants, strict=True):
        generation = cache.nodes["node"].generation
        cache.add_pod(pod.key, uid(pod), "node", pod, pod.version)
        assert aggregates(cache.nodes["node"]) == want
        assert cache.nodes["node"].generation > generation
        assert cache.pods[pod.key].pod is pod


# --- Remove (TestRemovePod) -------------------------------------------------------------


@pytest.mark.parametrize("assumed", [False, True], ids=["bound", "assumed"])
def test_remove_takes_the_pod_off_its_node(cache: Cache, assumed: bool) -> None:
    pod = base_pod("p").info()
    if assumed:
        assume(cache, pod)
    else:
        cache.add_pod(pod.key, uid(pod), "node", pod, 1)
    generation = cache.nodes["node"].generation
    assert cache.remove_pod(pod.key)
    assert pod.key not in cache.pods
    assert aggregates(cache.nodes["node"]) == EMPTY
    assert cache.nodes["node"].generation > generation
    assert not cache.remove_pod(pod.key)


def test_a_pod_added_before_its_node_is_accounted_on_a_node_to_come(cache: Cache) -> None:
    pod = base_pod("p").node("late").info()
    cache.add_pod(pod.key, uid(pod), "late", pod, 1)
    assert cache.nodes["late"].raw_node is None
    assert "late" not in {n.name for n in cache.schedulable_nodes()}
    cache.add_or_update_node(make_node("late").obj())
    assert aggregates(cache.nodes["late"]).requested == {"cpu": 100, "memory": 500}
    assert "late" in {n.name for n in cache.schedulable_nodes()}


# --- Nodes (TestNodeOperators) ----------------------------------------------------------


def images_node(name: str, images: dict[str, int], cpu: str = "1") -> dict:
    node = make_node(name).capacity(cpu=cpu, memory="100", example_com_foo=1)
    for image, size in images.items():
        node.image(image, size)
    return node.obj()


IMAGES_1 = {"gcr.io/80:latest": 80 * MB, "gcr.io/300:latest": 300 * MB}
IMAGES_2 = {"gcr.io/600:latest": 600 * MB, "gcr.io/80:latest": 80 * MB}


def test_node_add_update_remove_keeps_pods_and_image_states(clock: Clock) -> None:
    cache = Cache(clock)
    for i, images in enumerate((IMAGES_1, IMAGES_2, IMAGES_1, IMAGES_2), start=1):
        cache.add_or_update_node(images_node(f"test-node-{i}", images))
    pod = make_pod("pod1").req(cpu="500m", memory="50").host_port(80).info()
    cache.add_pod(pod.key, uid(pod), "test-node-1", pod, 1)

    # Step 1: the node is there, its images counted across nodes.
    info = cache.nodes["test-node-1"]
    assert info.allocatable == {"cpu": 1000, "memory": 100, "pods": 110, "example.com/foo": 1}
    assert cache.image_states_of("test-node-1") == {
        "gcr.io/80:latest": ImageStateSummary(80 * MB, 4),
        "gcr.io/300:latest": ImageStateSummary(300 * MB, 2),
    }

    # Step 2: an update changes allocatable, moves the generation, keeps the pod.
    generation = info.generation
    cache.add_or_update_node(images_node("test-node-1", IMAGES_1, cpu="2"))
    assert cache.nodes["test-node-1"].allocatable["cpu"] == 2000
    assert cache.nodes["test-node-1"].generation > generation
    assert aggregates(cache.nodes["test-node-1"]).requested == {"cpu": 500, "memory": 50}

    # Step 3: removed with a pod on it: a ghost entry keeps the accounting, no node.
    cache.remove_node("test-node-1")
    ghost = cache.nodes["test-node-1"]
    assert ghost.raw_node is None
    assert aggregates(ghost).requested == {"cpu": 500, "memory": 50}
    assert [n.name for n in cache.schedulable_nodes()] == [
        "test-node-2",
        "test-node-3",
        "test-node-4",
    ]
    assert cache.image_states_of("test-node-1") == {}
    assert cache.image_states_of("test-node-3")["gcr.io/80:latest"] == ImageStateSummary(80 * MB, 3)
    assert cache.image_states_of("test-node-3")["gcr.io/300:latest"] == ImageStateSummary(
        300 * MB, 1
    )
    assert pod.key in cache.pods
    cache.remove_node("test-node-1")  # removing it again changes nothing
    assert cache.nodes["test-node-1"] is ghost

    # Step 4: removing the pod of the removed node drops the ghost.
    assert cache.remove_pod(pod.key)
    assert "test-node-1" not in cache.nodes


def test_image_states_follow_node_updates(cache: Cache) -> None:
    cache.add_or_update_node(images_node("node", {"a:1": 10}))
    cache.add_or_update_node(images_node("other", {"a:1": 10, "b:1": 20}))
    assert cache.image_states_of("node") == {"a:1": ImageStateSummary(10, 2)}
    cache.add_or_update_node(images_node("other", {"b:1": 20}))  # image a:1 went away
    assert cache.image_states_of("node") == {"a:1": ImageStateSummary(10, 1)}
    assert cache.image_states_of("other") == {"b:1": ImageStateSummary(20, 1)}
    cache.remove_node("other")
    assert set(cache.image_states) == {"a:1"}


def test_pods_with_affinity_are_listed_on_their_node(cache: Cache) -> None:
    anti = make_pod("anti").label("app", "db").anti_affinity("app", "db").info()
    plain = make_pod("plain").info()
    for pod in (anti, plain):
        cache.add_pod(pod.key, uid(pod), "node", pod, 1)
    info = cache.nodes["node"]
    assert [p.key for p in info.pods_with_affinity] == [anti.key]
    assert [p.key for p in info.pods_with_required_anti_affinity] == [anti.key]
    assert [n.name for n in cache.cluster().have_pods_with_required_anti_affinity] == ["node"]
    cache.remove_pod(anti.key)
    assert info.pods_with_required_anti_affinity == []
    assert cache.cluster().have_pods_with_required_anti_affinity == []


# --- Host ports (HostPortInfo) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("held", "wanted", "fits"),
    [
        pytest.param(("127.0.0.1", "TCP"), ("127.0.0.1", "TCP"), False, id="same ip"),
        pytest.param(("127.0.0.1", "TCP"), ("127.0.0.2", "TCP"), True, id="another ip"),
        pytest.param(("127.0.0.1", "TCP"), ("", "TCP"), False, id="0.0.0.0 takes every ip"),
        pytest.param(("", ""), ("127.0.0.1", "TCP"), False, id="held on 0.0.0.0"),
        pytest.param(("", "TCP"), ("", "UDP"), True, id="another protocol"),
        pytest.param(("127.0.0.1", "UDP"), ("", "UDP"), False, id="0.0.0.0 over udp"),
    ],
)
def test_host_ports_are_validated_with_0000_semantics(
    cache: Cache, held: tuple[str, str], wanted: tuple[str, str], fits: bool
) -> None:
    assume(cache, make_pod("held").host_port(80, *held).info())
    result = cache.assume_pod(FW, make_pod("new").host_port(80, *wanted).info(), "node", "u", 1)
    assert result.ok is fits
    if not fits:
        assert result.status is not None and result.status.plugin == "NodePorts"


def test_used_ports_default_to_0000_tcp_and_are_counted_per_pod(cache: Cache) -> None:
    a = make_pod("a").host_port(80, "10.0.0.1").info()
    b = make_pod("b").host_port(80, "10.0.0.2").host_port(53, protocol="UDP").info()
    assume(cache, a)
    assume(cache, b)
    assert cache.nodes["node"].used_ports == Counter(
        {("10.0.0.1", "TCP", 80): 1, ("10.0.0.2", "TCP", 80): 1, ("0.0.0.0", "UDP", 53): 1}
    )
    cache.remove_pod(b.key)
    assert set(cache.nodes["node"].used_ports) == {("10.0.0.1", "TCP", 80)}


# --- Validation against committed state: other nodes count too ---------------------------


def zoned_cache(clock: Clock) -> Cache:
    cache = Cache(clock)
    for name, zone in (("a1", "zone-a"), ("a2", "zone-a"), ("b1", "zone-b")):
        cache.add_or_update_node(make_node(name).zone(zone).obj())
    return cache


def test_assume_refuses_a_zone_anti_affinity_clash_on_another_node(clock: Clock) -> None:
    cache = zoned_cache(clock)
    db = [make_pod(f"db{i}").label("app", "db").anti_affinity("app", "db", ZONE) for i in range(3)]
    assume(cache, db[0].info(), "a1")
    refused = cache.assume_pod(FW, db[1].info(), "a2", "u1", 1)
    assert not refused.ok and refused.status is not None
    assert refused.status.plugin == "InterPodAffinity"
    assume(cache, db[2].info(), "b1")


def test_assume_refuses_a_spread_beyond_max_skew(clock: Clock) -> None:
    cache = zoned_cache(clock)
    web = [make_pod(f"web{i}").label("app", "web").spread(1, ZONE, "app", "web") for i in range(3)]
    assume(cache, web[0].info(), "a1")
    refused = cache.assume_pod(FW, web[1].info(), "a2", "u1", 1)
    assert not refused.ok and refused.status is not None
    assert refused.status.plugin == "PodTopologySpread"
    assume(cache, web[1].info(), "b1")
    assume(cache, web[2].info(), "a2")


# --- Generations: every change moves them, nothing else does ----------------------------


def _assumed(cache: Cache) -> PodInfo:
    pod = base_pod("p").info()
    assume(cache, pod)
    return pod


def _update(c: Cache, p: PodInfo) -> None:
    c.add_pod(p.key, uid(p), "node", p, 2)
    c.take_dirty()
    c.add_pod(p.key, uid(p), "node", base_pod("p", "300m").info(3), 3)


def _expire(c: Cache, p: PodInfo) -> None:
    c.finish_binding(p.key, uid(p))
    c.clock.now += ASSUMED_POD_TTL  # type: ignore[attr-defined]
    assert c.cleanup_expired() == [p.key]


CHANGES = {
    "add node": lambda c, p: c.add_or_update_node(make_node("node").capacity(cpu="8").obj()),
    "update node": lambda c, p: c.add_or_update_node(make_node("node").zone("z").obj()),
    "assume": lambda c, p: assume(c, base_pod("q", port=81).info()),
    "forget": lambda c, p: c.forget_pod(p.key, uid(p)),
    "update": _update,
    "remove": lambda c, p: c.remove_pod(p.key),
    "expire": _expire,
    "remove node": lambda c, p: c.remove_node("node"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_every_change_moves_the_node_generation(cache: Cache, change: str) -> None:
    pod = _assumed(cache)
    cache.take_dirty()
    before, other = cache.nodes["node"].generation, cache.nodes["other"].generation
    CHANGES[change](cache, pod)
    nodes, _ = cache.take_dirty()
    assert "node" in nodes and "other" not in nodes
    assert cache.generation > before
    assert cache.nodes["other"].generation == other
    assert cache.nodes["node"].generation == cache.generation


NO_CHANGES = {
    "refused assume": lambda c, p: c.assume_pod(FW, base_pod("q").info(), "node", "uq", 1),
    "finish binding": lambda c, p: c.finish_binding(p.key, uid(p)),
    "add (confirm)": lambda c, p: c.add_pod(p.key, uid(p), "node", p, 2),
    "forget of another uid": lambda c, p: c.forget_pod(p.key, "stranger"),
    "remove of an unknown pod": lambda c, p: c.remove_pod("default/unknown"),
    "remove of an unknown node": lambda c, p: c.remove_node("unknown"),
    "expiry before the deadline": lambda c, p: c.cleanup_expired(),
}


@pytest.mark.parametrize("change", list(NO_CHANGES))
def test_what_changes_no_node_keeps_the_generations(cache: Cache, change: str) -> None:
    pod = _assumed(cache)  # holds host port 80: the refused assume wants it too
    cache.take_dirty()
    generation = cache.generation
    NO_CHANGES[change](cache, pod)
    assert cache.generation == generation
    assert cache.take_dirty()[0] == set()


def test_a_confirmed_binding_keeps_the_node_record_but_not_the_assumption(
    cache: Cache,
) -> None:
    """The bound pod is the pod assumed: no worker needs to re-read the node for it."""
    pod = _assumed(cache)
    cache.take_dirty()
    generation, requested = cache.generation, dict(cache.nodes["node"].requested)
    cache.add_pod(pod.key, uid(pod), "node", pod.with_version(2), 2)
    nodes, pods = cache.take_dirty()
    assert (nodes, pods) == (set(), {pod.key})
    assert cache.pods[pod.key].state == ADDED and pod.key not in cache.assumed
    assert cache.generation == generation and cache.nodes["node"].requested == requested
    assert cache.cleanup_expired() == []  # bound: never expires
    assert cache.remove_pod(pod.key)
    assert cache.nodes["node"].generation > generation and pod.key not in cache.nodes["node"].pods


def test_generations_are_global_and_increasing(cache: Cache) -> None:
    seen = [cache.nodes["node"].generation, cache.nodes["other"].generation]
    for i in range(4):
        pod = make_pod(f"p{i}").info()
        assume(cache, pod, "node" if i % 2 else "other")
        seen.append(cache.generation)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


# --- The commit order (what the scale-out invariant test replays) ----------------------


def test_placed_at_orders_the_commits_and_survives_confirmation_and_restore(
    cache: Cache, clock: Clock
) -> None:
    a, b, c = (base_pod(n, port=0).info() for n in "abc")
    assume(cache, a)
    assume(cache, b, "other")
    cache.add_pod(c.key, uid(c), "other", c, 5)  # bound by someone else: placed when seen
    order = [cache.pods[p.key].placed_at for p in (a, b, c)]
    assert order == sorted(order) and len(set(order)) == 3
    cache.add_pod(a.key, uid(a), "node", a, 6)  # confirmed where assumed: same placement
    assert cache.pods[a.key].placed_at == order[0]
    cache.add_pod(b.key, uid(b), "node", b, 7)  # bound elsewhere: a new placement
    assert cache.pods[b.key].placed_at > order[2]
    copy = Cache(clock)
    copy.restore(
        [n.raw_node for n in cache.nodes.values() if n.raw_node],
        [PodState.from_record(s.to_record()) for s in cache.pods.values()],
        cache.generation,
    )
    assert {k: s.placed_at for k, s in copy.pods.items()} == {
        k: s.placed_at for k, s in cache.pods.items()
    }


def test_the_validation_snapshot_sees_every_transition(cache: Cache, clock: Clock) -> None:
    """The ClusterSnapshot the cache validates against stays equal to a rebuilt one."""
    cache.cluster()
    pod = base_pod("p").info()
    assume(cache, pod)
    cache.add_pod(pod.key, uid(pod), "other", pod, 2)
    cache.remove_node("other")
    kept = cache.cluster()
    fresh = ClusterSnapshot(cache.nodes.values())
    assert [n.name for n in kept.nodes] == [n.name for n in fresh.nodes] == ["node"]
    assert kept.columns.requested("cpu").tolist() == fresh.columns.requested("cpu").tolist()
