"""Leader election's state machine (runtime/lease.py): kube's lease, renew deadline, retry."""

from __future__ import annotations

import pytest

from shared.runtime.lease import Lease, LeaseConfig, Observed, Role

CONFIG = LeaseConfig()  # 15 s / 10 s / 2 s


def seen(acquired: bool, epoch: int = 1, holder: str = "me", remaining: float = 15.0) -> Observed:
    return Observed(acquired, epoch, holder, remaining)


def leader(now: float = 0.0) -> Lease:
    lease = Lease(CONFIG, "me")
    lease.observe(now, seen(True, epoch=7))
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


def test_acquiring_makes_a_leader_with_the_epoch() -> None:
    lease = Lease(CONFIG, "me")
    assert lease.role is Role.STANDBY
    lease.observe(0, seen(True, epoch=7))
    assert (lease.role, lease.epoch) == (Role.LEADING, 7)


def test_a_leader_renews_every_retry_period() -> None:
    assert leader().next_try_in(0) == 2.0


def test_a_leader_keeps_leading_through_failed_tries_until_the_renew_deadline() -> None:
    lease = leader(0)
    lease.failed(9.9)
    assert lease.leading
    assert lease.next_try_in(9.9) == pytest.approx(0.1)  # one last try before the deadline
    lease.failed(10.0)
    assert lease.role is Role.LOST


def test_a_renewal_moves_the_deadline() -> None:
    lease = leader(0)
    lease.observe(8, seen(True, epoch=7))
    lease.failed(17)
    assert lease.leading


def test_a_leader_that_sees_another_holder_is_lost_for_good() -> None:
    lease = leader(0)
    lease.observe(1, seen(False, epoch=8, holder="other"))
    assert lease.role is Role.LOST
    lease.observe(2, seen(True, epoch=9))
    assert lease.role is Role.LOST


def test_a_standby_tries_again_when_the_holders_lease_lapses() -> None:
    lease = Lease(CONFIG, "me")
    lease.observe(0, seen(False, holder="other", remaining=0.7))
    assert lease.role is Role.STANDBY
    assert lease.next_try_in(0) == pytest.approx(0.75)
    lease.observe(1, seen(False, holder="other", remaining=14))
    assert lease.next_try_in(1) == 2.0


def test_a_standby_with_redis_down_retries_every_retry_period() -> None:
    lease = Lease(CONFIG, "me")
    lease.failed(0)
    assert (lease.role, lease.next_try_in(0)) == (Role.STANDBY, 2.0)


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
