"""Score normalization shared by plugins (kube-scheduler's plugins/helper), and Go's
integer rounding and division that scores are computed with."""

from __future__ import annotations

import numpy as np

from shared.framework.columns import IntArray
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


def go_div(a: int, b: int) -> int:
    """Go's integer division, which truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def default_normalize_scores(max_priority: int, reverse: bool, scores: IntArray) -> IntArray:
    """default_normalize_score over an array (same integer arithmetic)."""
    top = int(scores.max()) if len(scores) else 0
    if top == 0:
        return np.full(len(scores), max_priority, dtype=np.int64) if reverse else scores
    normalized = max_priority * scores // top
    return max_priority - normalized if reverse else normalized
