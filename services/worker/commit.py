"""The commit of a batch: assume at the cache (validate-then-commit, the one
serialization point), then the committed pods to the binders (JetStream work queue)."""

from __future__ import annotations

import asyncio
import logging
import time

from prometheus_client import Counter

from services.worker.attempt import Attempt
from shared.messages import Assumption, bind_message_id
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import chunks_for, request_all
from shared.runtime.service import Runtime
from shared.snapshot import Snapshot
from shared.stages import ASSUMED, SCHEDULED
from shared.subjects import BIND_SUBJECT, CACHE_ASSUME, MSG_ID_HEADER
from shared.wire import pack

log = logging.getLogger("ksched.worker")


class Committer:
    def __init__(self, rt: Runtime, snapshot: Snapshot, conflicts: Counter) -> None:
        self.rt = rt
        self.snapshot = snapshot
        self.conflicts = conflicts

    async def assume(
        self, placed: list[Attempt], committed: list[Attempt]
    ) -> tuple[list[Attempt], list[Attempt]]:
        """Commit `placed` at the cache; the committed join `committed`. Returns the
        refused (conflicts) and the unanswered (the cache is away: a new leader taking
        over, or writing its state again after Redis lost it), their local assumption
        and Reserve undone: the first are retried at once, the others later."""
        batch = [self._assumption(a) for a in placed]
        scheduled = time.time()  # the batch's stage time (shared/stages.py)
        for a in placed:
            a.stamps[SCHEDULED] = scheduled
        try:
            replies = await request_all(self.rt.nc, CACHE_ASSUME, batch, "assume", timeout=10)
            results = [(r, reply.get(ASSUMED)) for reply in replies for r in reply["results"]]
        except Exception as err:
            log.warning("assume not answered: %s", err)
            for a in placed:
                self._undo(a)
            return [], placed
        refused = []
        for a, (result, assumed) in zip(placed, results, strict=True):
            if result["ok"]:
                if assumed is not None:
                    a.stamps[ASSUMED] = assumed
                self.snapshot.committed(a.pod.key, result.get("generation"))
                committed.append(a)
            else:
                self.conflicts.labels(result.get("plugin", "")).inc()
                a.reserved_room = bool(result.get("nominated"))
                nominated = a.pod.pod.status.nominated_node_name
                a.waits_for_room = a.waits_for_room or (a.reserved_room and a.node == nominated)
                self._undo(a)
                refused.append(a)
        return refused, []

    def _undo(self, a: Attempt) -> None:
        self.snapshot.forget(a.pod, a.node, a.cycle)
        a.framework.run_reserve_plugins_unreserve(a.state, a.pod, a.node)
        # kube assumes before Reserve, so a failed assume runs no Unreserve there;
        # ksched runs it only to undo Reserve, and drops what it asks of waiting pods.
        a.framework.handle.take_permit_signals()

    def _assumption(self, a: Attempt) -> Assumption:
        return {
            "key": a.pod.key,
            "uid": a.qp["uid"],
            "seq": a.qp["seq"],
            "node": a.node,
            "pod": a.qp["pod"],
            "profile": a.framework.profile,
            "cycle": a.cycle,
            "generation": self.snapshot.nodes[a.node].generation,
            "incarnation": self.snapshot.incarnation,
        }

    async def hand_to_binders(self, committed: list[Attempt]) -> None:
        """Pods Permit allowed go in as few messages as fit; each pod told to wait in
        its own, as binders hold waiting pods by message. Message ids make a retried
        publish of the same attempt(s) a no-op."""
        now = time.time()
        ready = [a for a in committed if not a.waits]
        sends = []
        first = 0
        requests = [a.bind_request(now) for a in ready]
        for chunk in chunks_for(self.rt.nc, requests, "requests"):  # to fit max_payload
            lead = ready[first]
            msg_id = bind_message_id(lead.pod.key, lead.cycle, batch_of=chunk.items)
            sends.append(self._publish(chunk.data, msg_id))
            first += chunk.items
        sends += [
            self._publish(pack(a.bind_request(now)), bind_message_id(a.pod.key, a.cycle))
            for a in committed
            if a.waits
        ]
        await asyncio.gather(*sends)

    async def _publish(self, data: bytes, msg_id: str) -> None:
        await retry_forever(
            "hand to binders",
            lambda: self.rt.js.publish(BIND_SUBJECT, data, headers={MSG_ID_HEADER: msg_id}),
            max_delay=1.0,
        )
