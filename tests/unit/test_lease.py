"""Leader election's state machine (runtime/lease.py): kube's lease, renew deadline and
retry period, an epoch per term taken with a compare-and-set, and observed time by each
candidate's own clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest

from shared.runtime.lease import Lease, LeaseConfig, LeaseRecord, Role, micro_time

CONFIG = LeaseConfig()  # 15 s / 10 s / 2 s
WALL = 1_700_000_000.0


def held(holder: str = "other", epoch: int = 4) -> LeaseRecord:
    return LeaseRecord(holder, epoch, 15.0, micro_time(WALL), micro_time(WALL), 3)


def leader(started: float = 0.0, epoch: int = 7) -> Lease:
    """A candidate whose claim of a released epoch-(epoch - 1) record landed at revision 10."""
    lease = Lease(CONFIG, "me")
    assert lease.read(started, held("", epoch - 1), 9)
    lease.wrote(started, lease.claim(WALL), 10)
    return lease


def test_kube_defaults() -> None:
    assert (CONFIG.lease_duration, CONFIG.renew_deadline, CONFIG.retry_period) == (15, 10, 2)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (15.0, 10.0, 2.0)),
        (
            {
                "KSCHED_LEADER_ELECT_LEASE_DURATION": "3s",
                "KSCHED_LEADER_ELECT_RENEW_DEADLINE": "2",
                "KSCHED_LEADER_ELECT_RETRY_PERIOD": "0.5",
            },
            (3.0, 2.0, 0.5),
        ),
    ],
)
def test_config_from_env(env: dict[str, str], expected: tuple[float, float, float]) -> None:
    c = LeaseConfig.from_env(env)
    assert (c.lease_duration, c.renew_deadline, c.retry_period) == expected


@pytest.mark.parametrize(
    "env",
    [
        {"KSCHED_LEADER_ELECT_RENEW_DEADLINE": "20"},  # past the lease duration
        {"KSCHED_LEADER_ELECT_RETRY_PERIOD": "10"},  # not below the renew deadline
        {"KSCHED_LEADER_ELECT_LEASE_DURATION": "soon"},
    ],
)
def test_inconsistent_config_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        LeaseConfig.from_env(env)


# --- the record ---------------------------------------------------------------------


def test_the_record_speaks_kubes_leader_election_record() -> None:
    record = held("a", 4)
    assert json.loads(record.encode()) == {
        "holderIdentity": "a",
        "epoch": 4,
        "leaseDurationSeconds": 15.0,
        "acquireTime": "2023-11-14T22:13:20.000000Z",
        "renewTime": "2023-11-14T22:13:20.000000Z",
        "renewCount": 3,
    }
    assert LeaseRecord.decode(record.encode()) == record


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        b'{"epoch": 3}',
        b'{"holderIdentity": "a", "epoch": true}',
        b'{"holderIdentity": "a", "epoch": -1}',
        b'{"holderIdentity": 7, "epoch": 1}',
    ],
)
def test_a_record_that_is_not_ours_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        LeaseRecord.decode(raw)


# --- taking the lease ---------------------------------------------------------------


def test_the_first_candidate_creates_the_record_with_epoch_one() -> None:
    lease = Lease(CONFIG, "me")
    assert lease.read(0, None, 0)
    claim = lease.claim(WALL)
    assert (claim.holder, claim.epoch, claim.renew_count) == ("me", 1, 0)
    lease.wrote(0, claim, 1)
    assert (lease.role, lease.epoch, lease.revision) == (Role.LEADING, 1, 1)


def test_a_takeover_starts_above_the_records_epoch_and_the_fenced_stores() -> None:
    lease = Lease(CONFIG, "me")
    assert lease.read(0, held("", 4), 9)
    assert lease.claim(WALL).epoch == 5
    assert lease.claim(WALL, floor=11).epoch == 12  # Redis has seen 11 (an older bucket)
    assert lease.claim(WALL, floor=2).epoch == 5  # a Redis that lost writes: the bucket wins


def test_a_standby_takes_over_once_the_record_is_unchanged_for_a_lease_by_its_clock() -> None:
    lease = Lease(CONFIG, "me")
    assert not lease.read(100, held(), 5)  # first seen at 100, whatever renewTime says
    assert not lease.read(114.9, held(), 5)
    assert lease.read(115, held(), 5)
    assert lease.claim(WALL).epoch == 5


def test_every_renewal_restarts_the_standbys_count() -> None:
    lease = Lease(CONFIG, "me")
    assert not lease.read(100, held(), 5)
    assert not lease.read(110, replace(held(), renew_count=4), 6)  # renewed: revision 6
    assert not lease.read(120, replace(held(), renew_count=4), 6)
    assert lease.read(125, replace(held(), renew_count=4), 6)


@pytest.mark.parametrize(
    "record",
    [held("", 4), held("me", 4)],
    ids=["released", "held by an earlier process of this identity"],
)
def test_a_standby_takes_a_released_lease_at_once(record: LeaseRecord) -> None:
    lease = Lease(CONFIG, "me")
    assert lease.read(0, record, 5)
    assert lease.claim(WALL).epoch == 5


# --- leading ------------------------------------------------------------------------


def test_a_leader_renews_its_record_keeping_the_epoch() -> None:
    lease = leader(0)
    assert lease.read(2, lease.record, 10)
    renewal = lease.claim(WALL + 2)
    assert (renewal.holder, renewal.epoch, renewal.renew_count) == ("me", 7, 1)
    assert renewal.acquire_time == micro_time(WALL) and renewal.renew_time == micro_time(WALL + 2)
    lease.wrote(2, renewal, 11)
    assert (lease.role, lease.epoch, lease.revision, lease.renewed_at) == (Role.LEADING, 7, 11, 2)


@pytest.mark.parametrize(
    "record",
    [held("other", 8), held("me", 8), None],
    ids=["another holder", "our identity, a newer term", "record gone"],
)
def test_a_leader_that_reads_another_term_is_lost_for_good(record: LeaseRecord | None) -> None:
    lease = leader(0)
    assert not lease.read(1, record, 12)
    assert lease.role is Role.LOST
    assert not lease.read(2, held("", 8), 13)
    lease.wrote(2, held("me", 9), 14)
    assert lease.role is Role.LOST


def test_a_leader_keeps_leading_through_failed_tries_until_the_renew_deadline() -> None:
    lease = leader(0)
    lease.failed(9.9)
    assert lease.leading and lease.current(9.9)
    assert lease.next_try_in(9.9) == pytest.approx(0.1)  # one last try before the deadline
    lease.failed(10.0)
    assert lease.role is Role.LOST and not lease.current(10.0)


def lost_unanswered(lease: Lease) -> None:
    lease.failed(10.0)


def lost_taken_over(lease: Lease) -> None:
    lease.read(2, held("other", 8), 11)


def lost_fenced(lease: Lease) -> None:
    lease.fenced()


@pytest.mark.parametrize(
    ("lose", "because"),
    [
        (lost_unanswered, "not renewed within the renew deadline (10 s)"),
        (lost_taken_over, "taken over by other (epoch 8)"),
        (lost_fenced, "fenced"),
    ],
)
def test_a_lost_lease_says_why(lose: Callable[[Lease], None], because: str) -> None:
    """Unanswered tries leave the record read last naming this leader: its holder is no
    reason (a lease bucket without a Raft leader for longer than the renew deadline
    read as 'holder now <itself>')."""
    lease = leader(0)
    lose(lease)
    assert lease.role is Role.LOST
    assert lease.lost_because.startswith(because)


def test_the_renew_deadline_counts_from_when_the_renewal_was_sent() -> None:
    lease = leader(0)
    assert lease.read(8, lease.record, 10)
    lease.wrote(8, lease.claim(WALL), 11)  # sent at 8, its answer came much later
    assert lease.current(17.9) and not lease.current(18)


def test_a_leader_frozen_past_its_renew_deadline_writes_nothing() -> None:
    """Its lease thread has not noticed anything yet: it was frozen too."""
    lease = leader(0)
    assert lease.leading and not lease.current(30)


def test_the_leader_stops_writing_before_any_standby_can_take_over() -> None:
    """However the tries interleave: a standby counts from when it saw the leader's
    last renewal, which was sent before that; the leader counts from the sending."""
    ours = leader(0)
    for seen_at in (0.0, 0.5, 1.99):
        standby = Lease(CONFIG, "other")
        standby.read(seen_at, ours.record, ours.revision)
        for tick in range(0, 400):
            now = tick / 10
            taking_over = standby.read(now, ours.record, ours.revision)
            assert not (taking_over and ours.current(now)), (seen_at, now)


def test_a_leader_releases_its_record_without_a_holder_and_keeps_the_epoch() -> None:
    lease = leader(0)
    released = lease.released(WALL + 5)
    assert released is not None
    assert (released.holder, released.epoch) == ("", 7)
    assert Lease(CONFIG, "me").released(WALL) is None  # a standby holds nothing


# --- timing of tries ----------------------------------------------------------------


def test_a_leader_renews_every_retry_period() -> None:
    assert leader().next_try_in(0) == 2.0


def test_a_standby_tries_again_when_the_holders_lease_lapses_by_its_clock() -> None:
    lease = Lease(CONFIG, "me")
    lease.read(0, held(), 5)
    assert lease.next_try_in(14.3) == pytest.approx(0.75)
    assert lease.next_try_in(1) == 2.0
    lease.read(16, held("", 5), 6)
    assert lease.next_try_in(16) == 2.0


def test_a_standby_with_the_bucket_unreachable_retries_every_retry_period() -> None:
    lease = Lease(CONFIG, "me")
    lease.failed(0)
    assert (lease.role, lease.next_try_in(0)) == (Role.STANDBY, 2.0)


# --- progress -----------------------------------------------------------------------


def test_a_leader_gives_up_when_stalled_at_two_renewals_in_a_row() -> None:
    lease = leader(0)
    assert not lease.stalled(None)
    assert not lease.stalled("wedged")  # seen once: probes see it first
    assert not lease.stalled(None)  # the unit of work ended: no failover
    assert not lease.stalled("wedged")
    assert lease.stalled("still wedged")
    assert lease.role is Role.LEADING  # the elector releases first, then gives up
    lease.give_up()
    assert lease.role is Role.LOST


def test_a_standby_never_gives_up_a_lease_it_does_not_hold() -> None:
    lease = Lease(CONFIG, "me")
    assert not lease.stalled("wedged")
    assert not lease.stalled("wedged")


# --- a silent lease store -----------------------------------------------------------


def test_a_leader_keeps_its_lease_while_the_store_leaves_its_tries_unanswered() -> None:
    """The bucket without a Raft leader (4-9 s) answers nobody: no rival can be handed
    a term, so a leader that keeps asking keeps leading past its renew deadline."""
    lease = leader(0)
    for sent in (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0):  # one try a retry period
        lease.failed(sent + lease.budget(sent), unanswered_since=sent)
        assert lease.leading, (sent, lease.lost_because)
    assert lease.current(14.0 + 9.9) and not lease.current(14.0 + 10.0)
    assert lease.read(25, lease.record, 10)  # the store answers: still ours, renewed
    lease.wrote(25, lease.claim(WALL), 11)
    assert lease.current(34.9)


def test_a_try_sent_after_the_renew_deadline_keeps_nothing() -> None:
    """A leader frozen past its deadline (its lease thread too) does not get its lease
    back from a try it sends once thawed, answered or not."""
    lease = leader(0)
    lease.failed(31, unanswered_since=30)
    assert lease.role is Role.LOST and not lease.current(30.5)


def test_a_try_that_failed_otherwise_keeps_the_renew_deadline() -> None:
    """Only silence is no verdict: a try that failed for another reason (a record that
    is not ours, Redis refusing) counts as before."""
    lease = leader(0)
    lease.failed(9.0)
    lease.failed(10.0)
    assert lease.role is Role.LOST


def test_a_standby_that_met_the_silence_gives_the_holder_time_to_renew() -> None:
    """When the store answers again, the holder had no chance to renew: a standby that
    found the store silent counts anew, with the margin between the renew deadline and
    the lease duration left for the holder to renew in. Without the silence, the
    lease duration counts from when the revision was first seen."""
    patient = Lease(CONFIG, "me")
    assert not patient.read(0, held(), 5)
    patient.failed(8, unanswered_since=6)  # the store electing its leader
    assert not patient.read(15, held(), 5)  # same revision: 15 s since first seen
    assert not patient.read(19.9, held(), 5)
    assert patient.read(20, held(), 5)  # the holder did not renew within 5 s

    hasty = Lease(CONFIG, "me")
    assert not hasty.read(0, held(), 5)
    assert hasty.read(15, held(), 5)


def test_a_renewal_first_seen_after_the_silence_leaves_the_holder_the_same_margin() -> None:
    """The holder's last renewal landed after the standby's last read (sent just before
    the store's leader died): read once the store answers, it is a revision the standby
    never saw, and it landed at some point before or during the silence. The holder gets
    the same margin as for the record seen before, not a whole lease duration from now."""
    standby = Lease(CONFIG, "me")
    assert not standby.read(0, held(), 5)
    standby.failed(8, unanswered_since=6)  # the store electing its leader
    renewed = replace(held(), renew_count=4)
    assert not standby.read(15, renewed, 6)  # the revision is new: the holder may renew
    assert not standby.read(19.9, renewed, 6)
    assert standby.read(20, renewed, 6)  # it did not within 5 s: not 30 s after the first

    unsilenced = Lease(CONFIG, "me")
    assert not unsilenced.read(0, held(), 5)
    assert not unsilenced.read(15, renewed, 6)  # a new revision without silence
    assert not unsilenced.read(29.9, renewed, 6)  # counts a whole lease duration
    assert unsilenced.read(30, renewed, 6)


def test_the_holder_renews_before_a_standby_that_met_the_silence_takes_over() -> None:
    """However the store's silence ends: the holder asks again every half retry period
    (runtime/elector.py) and so renews within the standby's margin."""
    ours = leader(0)
    for sent in range(2, 12):
        ours.failed(float(sent) + 1, unanswered_since=float(sent))
    back = 12.5  # the store answers everyone from here
    standby = Lease(CONFIG, "other")
    standby.read(0, ours.record, ours.revision)
    standby.failed(12, unanswered_since=11)
    assert not standby.read(back, ours.record, ours.revision)
    renewal_at = back + CONFIG.retry_period / 2
    assert ours.read(renewal_at, ours.record, ours.revision)
    assert ours.current(renewal_at)
    for tick in range(int(back * 10), int(renewal_at * 10) + 1):
        assert not standby.read(tick / 10, ours.record, ours.revision), tick / 10


def test_tries_that_each_hang_until_their_budget_keep_the_lease() -> None:
    """The elector's cadence: a try a retry period after the last, each left unanswered
    until its budget runs out (a write sent as the bucket lost its leader: sent once,
    never asked again). Counted from when each was sent, the next try would start just
    at the deadline and keep nothing (a chaos-hosts run lost leases so at a heal)."""
    lease = leader(0)
    now = 0.0
    for _ in range(10):
        sent = now + lease.next_try_in(now)
        now = sent + max(lease.budget(sent), 0.1)
        lease.failed(now, unanswered_since=sent, unanswered_until=now)
        assert lease.leading, (sent, lease.lost_because)
    assert now > 3 * CONFIG.renew_deadline
