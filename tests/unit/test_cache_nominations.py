"""The cache's nominations (services/cache/nominations.py): room a preemption freed is
reserved at assume for the nominated pod, against pods of lower or equal priority only,
until the nomination lapses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from services.cache.cache import Cache
from services.cache.nominations import Nomination
from shared.config import Profile
from shared.framework.runtime import Framework, nomination_order
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY
from shared.tools.synthetic import make_node, make_pod
from tests.unit.conftest import Clock

FW = Framework.from_profile(Profile(), REGISTRY)
PREEMPTOR = "default/high"


def pod(name: str, priority: int, cpu: str = "600m", seq: int = 1) -> PodInfo:
    return PodInfo.of(make_pod(name, cpu=cpu, memory="10Mi", priority=priority), seq)


@pytest.fixture
def cache(clock: Clock) -> Cache:
    """n1 (1 cpu) with its room nominated to a priority-10 pod that needs 600m."""
    c = Cache(clock, nomination_ttl=60)
    c.add_or_update_node(make_node("n1", cpu="1", memory="1Gi", pods=10))
    c.add_or_update_node(make_node("n2", cpu="1", memory="1Gi", pods=10))
    c.nominate_pod(PREEMPTOR, "n1", pod("high", 10))
    return c


def assume(cache: Cache, p: PodInfo, node: str = "n1") -> bool:
    return cache.assume_pod(FW, p, node, p.pod.metadata.uid or "", p.version).ok


@pytest.mark.parametrize(
    ("priority", "fits"),
    [
        pytest.param(0, False, id="lower priority: the room is reserved"),
        pytest.param(10, False, id="equal priority: reserved too (kube's >=)"),
        pytest.param(11, True, id="higher priority: the nomination does not count"),
    ],
)
def test_a_nomination_reserves_room_against_lower_or_equal_priority(
    cache: Cache, priority: int, fits: bool
) -> None:
    result = cache.assume_pod(FW, pod("filler", priority), "n1", "uf", 1)
    assert result.ok is fits
    assert result.nominated is not fits  # the worker learns why: a nomination it missed
    assert assume(cache, pod("elsewhere", 0), "n2")  # other nodes are not reserved


def test_the_nominated_pod_itself_takes_its_room_and_the_reservation_ends(cache: Cache) -> None:
    assert assume(cache, pod("high", 10))
    assert len(cache.nominations) == 0  # assumed: counted for real, not nominated
    assert not assume(cache, pod("filler", 0, cpu="600m"))  # now simply full


LAPSES: dict[str, Callable[[Cache, Clock], None]] = {
    "bound elsewhere": lambda c, _: c.add_pod(PREEMPTOR, "uid", "n2", pod("high", 10), 2),
    "deleted": lambda c, _: c.remove_pod(PREEMPTOR),
    "nomination cleared": lambda c, _: c.nominate_pod(PREEMPTOR, "", pod("high", 10, seq=2)),
    "nominated elsewhere": lambda c, _: c.nominate_pod(PREEMPTOR, "n2", pod("high", 10, seq=2)),
    "expired": lambda _, clock: setattr(clock, "now", clock.now + 61),
}


@pytest.mark.parametrize("lapse", LAPSES.values(), ids=LAPSES.keys())
def test_a_nomination_lapses(
    cache: Cache, clock: Clock, lapse: Callable[[Cache, Clock], None]
) -> None:
    lapse(cache, clock)
    cache.cleanup_expired()
    assert assume(cache, pod("filler", 0))


def test_an_older_nomination_event_changes_nothing(cache: Cache) -> None:
    cache.nominate_pod(PREEMPTOR, "n1", pod("high", 10, seq=5))
    cache.nominate_pod(PREEMPTOR, "", pod("high", 10, seq=4))  # replayed, older
    assert not assume(cache, pod("filler", 0))


def test_a_placed_pod_is_not_nominated_by_a_late_event(cache: Cache) -> None:
    assert assume(cache, pod("other", 20), "n2")
    cache.nominate_pod("default/other", "n1", pod("other", 20))  # its assume came first
    assert assume(cache, pod("filler", 0, cpu="300m"))


def test_the_worker_verdict_is_checked_again_on_a_nominated_node(cache: Cache) -> None:
    """A worker that did not know the nomination saw the same generation: its verdict
    cannot stand for the node."""
    raw = make_pod("filler", cpu="600m", priority=0)
    assert not cache.verdict_holds(FW, raw, "n1", cache.nodes["n1"].generation)
    assert cache.verdict_holds(FW, raw, "n2", cache.nodes["n2"].generation)


def test_nominations_survive_a_restore(cache: Cache, clock: Clock) -> None:
    records = {
        k: Nomination.from_record(n.to_record()) for k, n in cache.nominations.by_key.items()
    }
    assert cache.nominations.take_dirty() == {PREEMPTOR}
    copy = Cache(clock)
    copy.restore([n.raw_node for n in cache.nodes.values() if n.raw_node], [], 0, records)
    assert not assume(copy, pod("filler", 0))
    assert assume(copy, pod("high", 10))


def test_two_pods_of_one_priority_nominated_to_one_room_do_not_wait_for_each_other(
    cache: Cache,
) -> None:
    """Two workers preempting at once nominated "high" and "twin" (same priority) to n1,
    which has room for one. One of them, the same one everywhere, takes it."""
    twin = pod("twin", 10)
    cache.nominate_pod("default/twin", "n1", twin)
    high = cache.nominations.by_key[PREEMPTOR].pod
    first, second = sorted([high, twin], key=nomination_order)
    FW.handle.providers.nominated = cache.nominations.by_node  # what assume reads
    assert FW.nominated_pods_for(first, "n1") == []  # its own priority after it: not counted
    assert [p.key for p in FW.nominated_pods_for(second, "n1")] == [first.key]
    assert not assume(cache, second)  # the room is the first one's
    assert assume(cache, first)
    assert not assume(cache, second)  # and now it is taken


def test_a_pod_not_nominated_there_still_counts_every_nomination_of_its_priority(
    cache: Cache,
) -> None:
    cache.nominate_pod("default/twin", "n1", pod("twin", 10))
    other = pod("aaaa", 10)  # not nominated: kube's rule, whatever its order
    FW.handle.providers.nominated = cache.nominations.by_node
    assert len(FW.nominated_pods_for(other, "n1")) == 2
    assert not assume(cache, other)


# --- a preemption's nomination reserved before it is written (reserve_nomination) ---


@pytest.fixture
def full(clock: Clock) -> Cache:
    """n1 and n2 (4 cpu) each full of four 1-cpu priority-0 pods; nothing nominated."""
    c = Cache(clock)
    for n in ("n1", "n2"):
        c.add_or_update_node(make_node(n, cpu="4", memory="4Gi", pods=10))
        for i in range(4):
            low = pod(f"low-{n}-{i}", 0, cpu="1")
            c.add_pod(low.key, f"u-{n}-{i}", n, low, 1)
    return c


def reserve(cache: Cache, name: str, node: str, victims: list[str], cpu: str = "3") -> bool:
    return cache.reserve_nomination(FW, pod(name, 10, cpu=cpu), node, victims).ok


def victims(node: str, *indexes: int) -> list[str]:
    return [f"default/low-{node}-{i}" for i in indexes]


def test_a_second_preemptor_of_equal_priority_is_refused_the_same_victims(full: Cache) -> None:
    """Two workers' PostFilters, neither aware of the other's nomination, chose the same
    node and victims for two pods of one priority: the first nomination holds the room,
    the second is refused and told who holds it."""
    assert reserve(full, "a", "n1", victims("n1", 0, 1, 2))
    result = full.reserve_nomination(FW, pod("b", 10, cpu="3"), "n1", victims("n1", 0, 1, 2))
    assert not result.ok
    assert [(n.node, n.pod.key) for n in result.holders] == [("n1", "default/a")]
    assert reserve(full, "b", "n2", victims("n2", 0, 1, 2))  # elsewhere it is free


def test_the_check_holds_once_the_victims_are_gone_too(full: Cache) -> None:
    assert reserve(full, "a", "n1", victims("n1", 0, 1, 2))
    for key in victims("n1", 0, 1, 2):  # their deletions reached the cache
        full.remove_pod(key)
    assert not reserve(full, "b", "n1", victims("n1", 0, 1, 2))


def test_room_for_both_is_given_to_both(full: Cache) -> None:
    """Two 1-cpu preemptors on one node, the second's dry run counting the first there
    and its victim still present (as kube's does): both fit."""
    assert reserve(full, "a", "n1", victims("n1", 0), cpu="1")
    assert not reserve(full, "b", "n1", victims("n1", 1), cpu="1")  # a's victim not yet gone
    assert reserve(full, "b", "n1", victims("n1", 1, 2), cpu="1")
    assert not reserve(full, "c", "n1", victims("n1", 0), cpu="1")  # a's victim again


def test_a_higher_priority_preemptor_is_not_held_back_by_a_lower_nomination(
    full: Cache,
) -> None:
    assert reserve(full, "a", "n1", victims("n1", 0, 1, 2))
    higher = pod("vip", 20, cpu="3")
    assert full.reserve_nomination(FW, higher, "n1", victims("n1", 0, 1, 2)).ok


def test_a_reservation_holds_the_room_against_assumes(full: Cache) -> None:
    assert reserve(full, "a", "n1", victims("n1", 0, 1, 2))
    for key in victims("n1", 0, 1, 2):
        full.remove_pod(key)
    filler = pod("filler", 10, cpu="1")
    assert not full.assume_pod(FW, filler, "n1", "uf", 1).ok


def test_a_reservation_never_written_lapses_or_is_released(full: Cache, clock: Clock) -> None:
    assert reserve(full, "a", "n1", victims("n1", 0, 1, 2))
    assert not full.release_nomination("default/a", 2)  # not the reserved version
    assert full.release_nomination("default/a", 1)
    assert reserve(full, "b", "n1", victims("n1", 0, 1, 2))
    clock.now += 31  # RESERVATION_TTL: the watcher never brought b's written nomination
    full.cleanup_expired()
    assert reserve(full, "c", "n1", victims("n1", 0, 1, 2))


def test_the_written_nomination_replaces_the_reservation(full: Cache, clock: Clock) -> None:
    assert reserve(full, "a", "n1", victims("n1", 0, 1, 2))
    full.nominate_pod("default/a", "n1", pod("a", 10, cpu="3", seq=2))  # the watcher's
    assert not full.release_nomination("default/a", 1)  # a late release leaves it
    clock.now += 31
    full.cleanup_expired()
    assert not reserve(full, "b", "n1", victims("n1", 0, 1, 2))  # still held


def test_an_older_version_is_refused(full: Cache) -> None:
    full.nominate_pod("default/a", "n2", pod("a", 10, cpu="3", seq=5))
    assert not full.reserve_nomination(FW, pod("a", 10, cpu="3", seq=4), "n1", []).ok
