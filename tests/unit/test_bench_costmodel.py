"""docs/scale.md's cost model: the processes a rate needs, and where it stops."""

from __future__ import annotations

import pytest

from shared.tools.bench.costmodel import (
    Costs,
    Sample,
    best,
    ceiling,
    curve,
    fit,
    fitted,
    plan,
    text_chart,
)

# watcher, queue, cache, binder, nats; worker fixed and per worker; redis fixed and per worker
COSTS = Costs(0.2, 0.1, 0.1, 0.1, 0.1, 0.5, 0.1, 0.05, 0.01)


def test_a_plan_counts_each_process_kind_from_its_cost_per_pod() -> None:
    p = plan(COSTS, 5000)
    assert p is not None
    # a worker has 1000 - 5000 * 0.1 = 500 ms a second left: 5000 * 0.5 / 500 = 5 workers
    assert (p.workers, p.binders, p.shards) == (5, 1, 1)
    # redis: 0.05 + 0.01 * 4 = 0.09 ms a pod, 450 ms a second: one instance
    assert p.redis_instances == 1
    per_pod = 0.2 + 0.1 + 0.1 + 0.1 + 0.1 + (0.5 + 0.5) + 0.09
    assert p.cores == pytest.approx(5000 * per_pod / 1000)


def test_past_the_refresh_ceiling_no_number_of_workers_carries_the_rate() -> None:
    assert ceiling(COSTS) == pytest.approx(10_000)
    assert plan(COSTS, 10_000) is None
    best_plan = best(COSTS, cores=10_000)
    assert best_plan is not None and best_plan.rate < 10_000


def test_the_best_plan_fits_the_cores_and_the_next_step_does_not() -> None:
    p = best(COSTS, cores=8)
    assert p is not None and p.cores <= 8
    after = plan(COSTS, p.rate + 100)
    assert after is None or after.cores > 8


def test_the_curve_grows_with_machines_until_the_refresh_ceiling() -> None:
    rates = curve(COSTS, [1, 2, 4, 1000], cores_per_machine=8)
    assert rates[0] < rates[1] < rates[2]
    assert rates[3] < ceiling(COSTS)  # machines never pass the refresh term's wall


def test_the_text_chart_draws_bars_in_proportion() -> None:
    chart = text_chart("x", [1, 2], [500.0, 1000.0], width=10).splitlines()
    assert chart[1].count("#") == 5 and chart[2].count("#") == 10


def run(workers: int, worker: float, redis: float, watcher: float = 0.1) -> Sample:
    roles = {"watcher": watcher, "queue": 0.06, "cache": 0.07, "binder": 0.09}
    return Sample(workers, {**roles, "nats-server": 0.05, "worker": worker, "redis-server": redis})


def test_the_fit_finds_the_worker_and_redis_lines_and_averages_the_rest() -> None:
    samples = [run(w, 0.2 + 0.02 * w, 0.02 + 0.001 * (w - 1), 0.1 + 0.01 * w) for w in (1, 2, 4)]
    costs = fit(samples)
    assert costs.worker_fixed == pytest.approx(0.2)
    assert costs.worker_per_worker == pytest.approx(0.02)
    assert costs.redis_fixed == pytest.approx(0.02)
    assert costs.redis_per_worker == pytest.approx(0.001)
    assert costs.watcher == pytest.approx(0.1 + 0.01 * 7 / 3)
    assert (costs.queue, costs.cache, costs.binder, costs.nats) == pytest.approx(
        (0.06, 0.07, 0.09, 0.05)
    )


def test_a_slope_the_noise_made_negative_counts_as_none() -> None:
    costs = fit([run(1, 0.25, 0.02), run(2, 0.24, 0.02)])
    assert costs.worker_per_worker == 0.0 and ceiling(costs) == float("inf")


def test_one_worker_count_fits_no_line() -> None:
    with pytest.raises(ValueError, match="two worker counts"):
        fit([run(2, 0.23, 0.02), run(2, 0.24, 0.02)])


def test_a_larger_cluster_adds_the_cycles_growth_to_every_worker() -> None:
    samples = [run(w, 0.2 + 0.02 * w, 0.02) for w in (1, 2)]
    here, larger = fitted(samples, 5000, {5000: 0.2, 100_000: 0.7})
    assert here[1].worker_fixed == pytest.approx(0.2)
    assert larger[1].worker_fixed == pytest.approx(0.7)
    assert larger[0].startswith("100000 nodes")
    assert best(larger[1], 80).rate < best(here[1], 80).rate  # type: ignore[union-attr]
