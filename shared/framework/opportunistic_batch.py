"""Opportunistic batching (KEP-5598, kube-scheduler's framework/runtime/batch.go), exact.

Upstream keeps, after a cycle, the sorted scored nodes of a signed pod; the next pod of
the same signature (next cycle, within 500 ms) is handed the next node of that list as
a hint, but only if the node the previous pod took now rejects it: if it still fits
there, its new score there is unknown. Here the previous pod's results are brought up to
date instead, so that the next pod's decision is the one a full cycle makes, exactly:

- Filter: the verdicts of every node are kept; the nodes changed since (the change log
  of the ClusterSnapshot: the previous pod's own node, or any other pod placed or
  forgotten meanwhile) are filtered again, one by one.
- Score: each plugin's raw scores are kept per node (batch.RawScores); the changed
  nodes are scored again; NormalizeScore, weights and selectHost then run as in a full
  cycle over the sampled nodes, with the same rotating start index and the same RNG
  draw, so a batched and an unbatched run choose the same nodes.

This holds because a signed pod's verdict and raw score on a node read only that node
and the pod: plugins whose results read other nodes refuse to sign (signature.py), and
a change that may move other nodes' results starts over: a node replaced (not just its
pods), a node holding pods with (anti-)affinity terms, another snapshot, other nominated
pods, too many changed nodes, or results older than MAX_BATCH_AGE (upstream's bound).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from shared.framework.batch import BatchFilterResult, RawScores
from shared.framework.columns import BoolArray, IntArray, NodeColumns
from shared.framework.cycle_state import CycleState
from shared.framework.runtime import Framework
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo

MAX_BATCH_AGE = 0.5  # seconds, upstream's maxBatchAge
MAX_CHANGED_NODES = 32  # beyond this a full cycle costs less than filtering one by one

# scheduler_batch_attempts_total{result}, upstream's values
HINT_USED = "hint_used"
NO_HINT = "no_hint"
# scheduler_batch_cache_flushed_total{reason}
POD_NOT_BATCHABLE = "pod_not_batchable"
POD_INCOMPATIBLE = "pod_incompatible"
POD_FAILED = "pod_failed"
EXPIRED = "expired"
SNAPSHOT_CHANGED = "snapshot_changed"
NODES_CHANGED = "nodes_changed"
NO_FEASIBLE_NODE = "no_feasible_node"


@dataclass
class _Results:
    """What the last signed pod's cycle found, and against which state."""

    signature: bytes
    snapshot: ClusterSnapshot
    columns: NodeColumns
    infos: list[NodeInfo]  # the columns' NodeInfo objects then: replaced ones differ
    position: int  # the snapshot's change log position then
    affinity_nodes: frozenset[str]
    nominated: object  # the nominated pods map then (replaced, never changed in place)
    feasible: BoolArray
    first_rejecter: IntArray
    raw: RawScores
    created: float


class OpportunisticBatch:
    """One profile's batching state: the results of the last signed pod."""

    def __init__(
        self,
        fw: Framework,
        *,
        max_age: float = MAX_BATCH_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fw = fw
        self.max_age = max_age
        self.clock = clock
        self._last: _Results | None = None
        self.attempts: Counter[str] = Counter()  # by result
        self.flushes: Counter[str] = Counter()  # by reason

    def sign(self, pod: PodInfo) -> bytes | None:
        return self.fw.signer.sign(pod)

    def reuse(
        self, state: CycleState, pod: PodInfo, snapshot: ClusterSnapshot, signature: bytes | None
    ) -> tuple[BatchFilterResult, RawScores] | None:
        """The last signed pod's Filter verdicts and raw scores, brought up to date for
        this pod; None (and the results dropped) if they cannot be."""
        last = self._last
        reason = self._unusable(last, snapshot, signature) if last is not None else None
        if reason is not None:
            self.flush(reason)
        if last is None or reason is not None:
            self.attempts[NO_HINT] += 1
            return None
        changed = self._changed_rows(last, snapshot)
        if changed is None or not self._refilter(state, pod, last, changed):
            self.attempts[NO_HINT] += 1
            return None
        last.raw.forget(changed)
        last.position = snapshot.log_position
        last.affinity_nodes = snapshot.affinity_node_names
        self.attempts[HINT_USED] += 1
        return BatchFilterResult(last.feasible, last.first_rejecter), last.raw

    def store(
        self,
        signature: bytes | None,
        snapshot: ClusterSnapshot,
        result: BatchFilterResult,
        raw: RawScores | None,
    ) -> None:
        """Keep a cycle's results for the next pod of its signature (StoreScheduleResults)."""
        if signature is None or raw is None:
            self.flush(POD_NOT_BATCHABLE)
            return
        if self._last is not None and self._last.raw is raw:
            return  # reused: brought up to date in `reuse`
        columns = snapshot.columns
        self._last = _Results(
            signature,
            snapshot,
            columns,
            list(columns.infos),
            snapshot.log_position,
            snapshot.affinity_node_names,
            self.fw.handle.nominated,
            result.feasible,
            result.first_rejecter,
            raw,
            self.clock(),
        )

    def flush(self, reason: str) -> None:
        if self._last is not None:
            self.flushes[reason] += 1
            self._last = None

    def _unusable(
        self, last: _Results, snapshot: ClusterSnapshot, signature: bytes | None
    ) -> str | None:
        if signature is None:
            return POD_NOT_BATCHABLE
        if signature != last.signature:
            return POD_INCOMPATIBLE
        if (
            snapshot is not last.snapshot
            or snapshot.built_columns is not last.columns
            or self.fw.handle.nominated is not last.nominated
        ):
            return SNAPSHOT_CHANGED
        if self.clock() - last.created > self.max_age:
            return EXPIRED
        return None

    def _changed_rows(self, last: _Results, snapshot: ClusterSnapshot) -> IntArray | None:
        """Rows of the nodes whose pods changed since; None (flushed) if another change
        may have moved the results of other nodes."""
        since = snapshot.changes_since(last.position)
        names = set(since[0]) if since is not None else None
        if names is None or len(names) > MAX_CHANGED_NODES:
            self.flush(NODES_CHANGED)
            return None
        affinity = last.affinity_nodes | snapshot.affinity_node_names
        rows = []
        for name in names:
            row = last.columns.index.get(name)
            if row is None or last.columns.infos[row] is not last.infos[row] or name in affinity:
                self.flush(NODES_CHANGED)
                return None
            rows.append(row)
        return np.array(sorted(rows), dtype=np.int64)

    def _refilter(self, state: CycleState, pod: PodInfo, last: _Results, rows: IntArray) -> bool:
        """Filter the changed rows again (with nominated pods, as the batch path does);
        False (flushed) on an error, or when no node is left: a full cycle then gives the
        error or the FitError's per-node reasons."""
        for row in rows.tolist():
            status = self.fw.run_filter_plugins_with_nominated_pods(
                state, pod, last.columns.infos[row]
            )
            if status.code == Code.ERROR:
                self.flush(POD_FAILED)
                return False
            last.feasible[row] = status.ok
            last.first_rejecter[row] = -1
        if not last.feasible.any():
            self.flush(NO_FEASIBLE_NODE)
            return False
        return True
