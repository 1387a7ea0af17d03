"""Score normalization shared by plugins (kube-scheduler's plugins/helper)."""

from __future__ import annotations

from shared.framework.interface import NodeScore


def default_normalize_score(max_priority: int, reverse: bool, scores: list[NodeScore]) -> None:
    """framework/plugins/helper.DefaultNormalizeScore."""
    top = max((s.score for s in scores), default=0)
    if top == 0:
        if reverse:
            for s in scores:
                s.score = max_priority
        return
    for s in scores:
        s.score = max_priority * s.score // top
        if reverse:
            s.score = max_priority - s.score


def go_round(x: float) -> int:
    """Go's math.Round: half away from zero (Python's round() is half to even)."""
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)
