"""The worker's pop size: batches sized to finish well within the queue's lease."""

from __future__ import annotations

from services.worker.service import BATCH, BATCH_SECONDS, batch_size


def test_fast_pods_fill_a_whole_batch() -> None:
    assert batch_size(0.0) == BATCH  # nothing measured yet
    assert batch_size(0.002) == BATCH


def test_slow_pods_shrink_the_batch_to_its_time_budget() -> None:
    assert batch_size(0.1) == int(BATCH_SECONDS / 0.1)
    assert batch_size(0.1) * 0.1 <= BATCH_SECONDS


def test_at_least_one_pod_however_slow() -> None:
    assert batch_size(60.0) == 1
