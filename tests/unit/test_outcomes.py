"""The outcome table's pure parts: a pod as ksched left it, the verdict against
Kubernetes' outcome, when waiting longer cannot change it, waves, the markdown."""

from __future__ import annotations

from typing import Any

import pytest

from shared.tools.outcomes import (
    BOUND,
    CREATED,
    DELETED,
    GATED,
    PENDING,
    REFUSED,
    WAITING,
    Expected,
    PodOutcome,
    Row,
    Run,
    first_line,
    judge,
    plan_waves,
    pod_outcome,
    refusal_detail,
    render_table,
    settled,
)

MSG = "0/4 nodes are available: 4 Insufficient cpu. preemption: 0/4 nodes are available: 4 x."


def pod(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": spec, "status": status or {}}


def condition(reason: str, message: str = "") -> dict[str, Any]:
    cond = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
    return {"conditions": [cond]}


@pytest.mark.parametrize(
    ("obj", "deleted", "refusal", "expected"),
    [
        (None, False, "", PodOutcome(WAITING)),
        (None, False, "no PriorityClass", PodOutcome(REFUSED, message="no PriorityClass")),
        (pod({"nodeName": "n1", "priority": 5}), False, "", PodOutcome(BOUND, "n1", priority=5)),
        (pod({"nodeName": "n1"}), True, "", PodOutcome(DELETED)),
        (pod({}, condition("Unschedulable", MSG)), False, "", PodOutcome(PENDING, message=MSG)),
        (pod({"schedulingGates": [{"name": "g"}]}), False, "", PodOutcome(GATED)),
        (pod({}, condition("SchedulingGated")), False, "", PodOutcome(GATED)),
        (pod({}), False, "", PodOutcome(WAITING)),
    ],
    ids=["unseen", "refused", "bound", "deleted", "pending", "gates", "gated-condition", "none"],
)
def test_pod_outcome(
    obj: dict[str, Any] | None, deleted: bool, refusal: str, expected: PodOutcome
) -> None:
    assert pod_outcome(obj, deleted, refusal) == expected


def bound(*nodes: str, priority: int | None = None) -> tuple[PodOutcome, ...]:
    return tuple(PodOutcome(BOUND, n, priority=priority) for n in nodes)


FORBIDDEN = 'pods "web-" is forbidden: no PriorityClass with name x was found'


@pytest.mark.parametrize(
    ("expected", "run", "verdict"),
    [
        (Expected(BOUND), Run(0, pods=bound("n3")), ""),
        (Expected(BOUND, nodes=frozenset({"n1"})), Run(0, pods=bound("n3")), "bound on n3"),
        (Expected(BOUND, pods=2), Run(0, pods=bound("n1")), "1 pods instead of 2"),
        (Expected(BOUND, pods=2, distinct=True), Run(0, pods=bound("n1", "n1")), "not one per"),
        (Expected(BOUND, priority=-1000), Run(0, pods=bound("n1", priority=0)), "priority 0"),
        (Expected(BOUND, victims=1), Run(0, pods=bound("n1"), victims=1), ""),
        (Expected(BOUND, victims=1), Run(0, pods=bound("n1")), "preempted 0 instead of 1"),
        (Expected(PENDING, message=MSG), Run(0, pods=(PodOutcome(PENDING, message=MSG),)), ""),
        (
            Expected(PENDING, message=MSG),
            Run(0, pods=(PodOutcome(PENDING, message="m"),)),
            "another message: m",
        ),
        (Expected(PENDING, message=MSG), Run(0, pods=bound("n1")), "bound on n1"),
        (Expected(GATED), Run(0, pods=(PodOutcome(GATED),)), ""),
        (Expected(CREATED), Run(0), ""),
        (Expected(CREATED), Run(1, "error: kind: Unsupported"), "the verb failed"),
        # the API server's refusal matches on its detail: names are generated
        (
            Expected(REFUSED, message=FORBIDDEN),
            Run(1, "error: f: no PriorityClass with name x was found"),
            "",
        ),
        (
            Expected(REFUSED, message=FORBIDDEN),
            Run(0, pods=(PodOutcome(REFUSED, message=FORBIDDEN.replace("web-", "web-1")),)),
            "",
        ),
        (Expected(REFUSED, message=FORBIDDEN), Run(0, pods=bound("n1")), "accepted"),
        (Expected(REFUSED, message=FORBIDDEN), Run(1, "error: other"), "the verb failed: other"),
    ],
)
def test_judge(expected: Expected, run: Run, verdict: str) -> None:
    got = judge(expected, run)
    assert (got == "") if not verdict else (verdict in got), got


def test_settled_waits_while_a_decision_may_still_come() -> None:
    pending = Run(0, pods=(PodOutcome(PENDING, message="m"),))
    assert not settled(Expected(BOUND), pending)  # preemption may still bind it
    assert settled(Expected(PENDING, message=MSG), pending)  # a wrong message stays wrong
    assert settled(Expected(PENDING, message=MSG), Run(0, pods=bound("n1")))  # bound is final
    assert not settled(Expected(BOUND), Run(0, pods=(PodOutcome(WAITING),)))
    assert settled(Expected(BOUND), Run(1, "error: x"))
    assert not settled(Expected(BOUND), Run(0))  # no pod listed yet


def test_refusal_detail_drops_the_object_name() -> None:
    assert refusal_detail(FORBIDDEN) == "no PriorityClass with name x was found"
    assert refusal_detail('The Pod "p" is invalid: spec.x: Required value') == (
        "spec.x: Required value"
    )
    assert refusal_detail("plain") == "plain"


def test_first_line_finds_the_error_after_argparse_usage() -> None:
    assert first_line("usage: ksched [-h]\nksched: error: invalid choice: 'create'\n") == (
        "invalid choice: 'create'"
    )
    assert first_line("\nsomething went wrong\nmore\n") == "something went wrong"


def test_plan_waves_keeps_names_apart_and_lone_cases_alone() -> None:
    items = [
        (frozenset({"Pod//nginx"}), False),
        (frozenset({"Pod//a"}), False),
        (frozenset({"Pod//nginx"}), False),  # same name: next wave
        (frozenset({"Pod//b"}), True),  # alone
        (frozenset(), False),  # names nothing: first wave
    ]
    assert plan_waves(items) == [[0, 1, 4], [2], [3]]


def test_render_table_marks_matches_and_differences() -> None:
    rows = [
        Row("a.yaml", Expected(BOUND, nodes=frozenset({"n1"})), Run(0, pods=bound("n1")), "why"),
        Row("b|c.yaml", Expected(CREATED), Run(1, "error: kind: Unsupported value"), "why"),
    ]
    assert render_table(rows).splitlines() == [
        "| manifest | Kubernetes outcome | ksched outcome | match |",
        "|---|---|---|---|",
        "| `a.yaml` | bound on n1 | bound on n1 | yes |",
        "| `b\\|c.yaml` | created (no pods) | refused: kind: Unsupported value | no |",
    ]


def test_render_table_shortens_long_cells() -> None:
    row = Row("a.yaml", Expected(CREATED), Run(1, "error: " + "x" * 500), "why")
    cell = render_table([row]).splitlines()[2].split(" | ")[2]
    assert len(cell) == 240 and cell.endswith("…")
