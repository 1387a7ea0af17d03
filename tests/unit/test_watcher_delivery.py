"""How long the watcher waits for a delivery's reply before sending it again
(services/watcher/service.py delivery_timeout)."""

from __future__ import annotations

from services.watcher.service import DELIVERY_TIMEOUTS, delivery_timeout


def test_a_delivery_handed_to_a_silent_receiver_is_sent_again_within_seconds() -> None:
    """The first try waits a third of the services' 10 s: a request the servers handed
    to a leader being cut off is never answered."""
    assert delivery_timeout(0) <= 3.0


def test_a_slow_receiver_gets_longer_each_time_up_to_the_services_timeout() -> None:
    """A burst that makes a receiver slow costs each chunk at most two more copies:
    the waits grow to the 10 s they all were before, and stay there."""
    waits = [delivery_timeout(tries) for tries in range(10)]
    assert waits == sorted(waits)
    assert waits[len(DELIVERY_TIMEOUTS) - 1 :] == [10.0] * (11 - len(DELIVERY_TIMEOUTS))
