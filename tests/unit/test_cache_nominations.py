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
