"""Preemption's I/O: the act phase after DefaultPreemption chose a node, and the
PodDisruptionBudgets its evaluator reads.

The act phase (kube's prepareCandidate), after the preemptor's own status write
(PodScheduled=False, status.nominatedNodeName) succeeded:
1. each victim still placed on the node (same uid) is deleted: DELETED on its
   subject with kube's DisruptionTarget condition, conditional on its latest
   sequence, and a `Preempted` event;
2. lower-priority pods nominated to that node lose their nomination (a
   conditional status write), so that they look elsewhere.
Both go through the cluster stream: the watcher, cache and queue see them like
anyone's writes. A victim that changed or went meanwhile is left alone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from prometheus_client import Counter, Histogram

from services.worker.attempt import Attempt
from shared.api.events import BadEvent, ClusterObject, SubjectRef, decode_cluster_event
from shared.api.models import object_key
from shared.api.pdb import PodDisruptionBudget
from shared.api.podstatus import (
    EVENT_PREEMPTED,
    make_event,
    preempted_message,
    preempted_victim,
    scheduler_name,
    with_nominated_node,
)
from shared.framework.diagnosis import FitError
from shared.framework.handle import HandleProviders
from shared.framework.types import PodInfo
from shared.messages import NominationReply, NominationRequest
from shared.plugins.defaultpreemption import NOT_ELIGIBLE_TERMINATING
from shared.runtime.informer import Informer
from shared.runtime.publish import Conflict, own_write_headers, publish_event, write_pod
from shared.runtime.rpc import request
from shared.sharding import stored_pod_subject
from shared.snapshot import Snapshot
from shared.subjects import (
    CACHE_NOMINATE,
    CLUSTER_STREAM,
    PDBS_PREFIX,
    pod_subject,
)
from shared.wire import dump_json

log = logging.getLogger("ksched.worker.preempt")


async def latest_pod(js: JetStreamContext, pod: PodInfo) -> tuple[dict[str, Any], int] | None:
    """The pod's current object and sequence on its subject; None if it is gone."""
    meta = pod.pod.metadata
    subject = stored_pod_subject(meta.namespace, meta.name)
    try:
        last = await js.get_last_msg(CLUSTER_STREAM, subject)
        ev = decode_cluster_event(subject, last.data or b"", last.headers, last.seq or 0)
    except (NotFoundError, BadEvent):
        return None
    except Exception as err:  # NATS busy or away: act as if gone; the preemptor retries
        log.warning("latest version of %s not read: %s", pod.key, err)
        return None
    if ev.type == "DELETED" or ev.obj.metadata.uid != meta.uid:
        return None
    return ev.raw, ev.seq


async def delete_victim(nc: NATS, victim: PodInfo, preemptor: dict[str, Any], node: str) -> bool:
    """Delete the victim if it is still the pod placed on `node`; True if deleted."""
    js = nc.jetstream()
    found = await latest_pod(js, victim)
    if found is None or (found[0].get("spec") or {}).get("nodeName") != node:
        return False
    raw, seq = found
    body = dump_json(
        {"type": "DELETED", "object": preempted_victim(raw, scheduler_name(preemptor))}
    )
    meta = victim.pod.metadata
    try:
        await js.publish(
            pod_subject(meta.namespace, meta.name),
            body,
            headers=own_write_headers(seq),
        )
    except Exception as err:  # changed meanwhile (or NATS away): the preemptor retries
        log.info("victim %s not deleted: %s", victim.key, err)
        return False
    message = preempted_message(preemptor, node)
    await publish_event(
        nc, make_event(raw, EVENT_PREEMPTED, message, warning=False, action="Preempting")
    )
    return True


async def clear_nomination(js: JetStreamContext, pod: PodInfo, node: str) -> None:
    """Remove status.nominatedNodeName from a pod still nominated to `node`."""
    found = await latest_pod(js, pod)
    if found is None:
        return
    raw, seq = found
    if (raw.get("status") or {}).get("nominatedNodeName") != node:
        return
    updated = with_nominated_node(raw, "")
    if updated is None:
        return
    try:
        await write_pod(js, updated, seq)
    except Conflict:
        pass  # it changed: its own update re-evaluates it
    except Exception as err:
        log.warning("nomination of %s not cleared: %s", pod.key, err)


async def act(
    nc: NATS,
    preemptor: dict[str, Any],
    node: str,
    victims: list[PodInfo],
    lower_nominated: list[PodInfo],
) -> int:
    """Delete the victims and clear the lower nominations; how many victims went."""
    js = nc.jetstream()
    deleted = await asyncio.gather(*(delete_victim(nc, v, preemptor, node) for v in victims))
    await asyncio.gather(*(clear_nomination(js, p, node) for p in lower_nominated))
    return sum(deleted)


class PdbLister:
    """Keeps `pdbs` (the list the frameworks' handles share) equal to the budgets an
    Informer on the PDB subjects reports."""

    def __init__(self, pdbs: list[PodDisruptionBudget]) -> None:
        self.pdbs = pdbs
        self._by_key: dict[str, PodDisruptionBudget] = {}

    def on_change(self, ref: SubjectRef, obj: ClusterObject | None) -> None:
        key = object_key(ref.namespace, ref.name)
        if isinstance(obj, PodDisruptionBudget):
            self._by_key[key] = obj
        else:
            self._by_key.pop(key, None)
        self.pdbs[:] = list(self._by_key.values())


async def watch_pdbs(js: JetStreamContext, pdbs: list[PodDisruptionBudget]) -> None:
    """Start keeping `pdbs` current; returns once the stream's are read."""
    await Informer(js, (PDBS_PREFIX,), PdbLister(pdbs).on_change, "PodDisruptionBudgets").start()


class PreemptionPhase:
    """PostFilter (DefaultPreemption) for pods that fit nowhere, and its act phase once
    the preemptor's nomination is written. It keeps the providers' `terminating` (the
    victims this worker deleted that its snapshot still shows) and `nominated` (a
    nomination counts locally at once)."""

    def __init__(
        self,
        nc: NATS,
        snapshot: Snapshot,
        providers: HandleProviders,
        attempts: Counter,
        victims: Histogram,
    ) -> None:
        self.nc = nc
        self.snapshot = snapshot
        self.providers = providers
        self.attempts = attempts
        self.victims = victims

    def post_filter(self, a: Attempt, err: FitError) -> None:
        """PostFilter for a pod that fits nowhere; only on this path, so the hot path
        pays nothing. A nomination counts locally at once, so that the rest of the batch
        (and the other lane) leave the room to the preemptor."""
        if a.waits_for_room or self._room_shared_with_nominations(a):
            # kube's "terminating pod on the nominated node": other pods nominated there
            # count against it while their victims (which this worker may not know of
            # yet) are still going; it waits for them instead of preempting again.
            err.diagnosis.post_filter_msg = NOT_ELIGIBLE_TERMINATING
            return
        if a.framework.post_filters and err.num_all_nodes:
            self.attempts.inc()
        a.preemption = a.scheduler.run_post_filter(a.state, a.pod, err)
        if a.preemption is not None:
            self.nominate_locally(a.pod, a.preemption.nominated_node_name)

    async def reserve(self, a: Attempt, err: FitError) -> None:
        """The nomination PostFilter chose, reserved at the cache before it is written
        (cache.py reserve_nomination). Refused when pods nominated there first hold the
        room (this worker had not heard of them yet): PostFilter runs once more with
        them counted, as kube's would have. Refused again, or unanswered: no
        preemption this time; the pod is retried after its backoff."""
        for retry in (True, False):
            if a.preemption is None or not a.preemption.nominated_node_name:
                return
            node = a.preemption.nominated_node_name
            reply = await self._ask_reservation(a, node)
            if reply is not None and reply.get("ok"):
                return
            self.nominate_locally(a.pod, "")
            a.preemption = None
            if reply is None:
                return
            log.info(
                "nomination to %s refused: %s",
                node,
                "; ".join(reply.get("reasons", [])),
                extra={"pod": a.pod.key, "cycle": a.cycle},
            )
            for held_node, slim, seq in reply.get("holders", []):
                self.nominate_locally(PodInfo.of_slim(slim, seq), held_node)
            if retry:
                self.post_filter(a, err)

    async def _ask_reservation(self, a: Attempt, node: str) -> NominationReply | None:
        assert a.preemption is not None
        ask: NominationRequest = {
            "key": a.pod.key,
            "seq": a.qp["seq"],
            "pod": a.qp["pod"],
            "node": node,
            "victims": [v.key for v in a.preemption.victims],
            "profile": a.framework.profile,
        }
        try:
            reply: NominationReply = await request(
                self.nc, CACHE_NOMINATE, {"reserve": ask}, timeout=10
            )
        except Exception as err:  # the cache is away: no preemption this time
            log.warning("nomination of %s not reserved: %s", a.pod.key, err)
            return None
        return reply

    async def release(self, a: Attempt) -> None:
        """The reserved nomination was not written (the pod changed meanwhile): its
        room goes back at once rather than after RESERVATION_TTL."""
        self.nominate_locally(a.pod, "")
        try:
            await request(self.nc, CACHE_NOMINATE, {"release": [a.pod.key, a.qp["seq"]]})
        except Exception as err:  # it lapses by itself
            log.warning("nomination of %s not released: %s", a.pod.key, err)

    def _room_shared_with_nominations(self, a: Attempt) -> bool:
        """Whether the pod fits its nominated node but for the other pods nominated there
        (of equal or higher priority): its own room is there, shared with theirs."""
        node = a.pod.pod.status.nominated_node_name
        others = a.framework.nominated_pods_for(a.pod, node) if node else []
        if not others:
            return False
        priority = a.pod.pod.spec.priority
        if any(p.pod.spec.priority == priority for p in others):
            # a pod of its own priority nominated there goes first (nomination_order):
            # the room is that pod's. Kube's own check decides (PostFilter): wait while
            # victims on the node are still terminating (room for both may be coming),
            # else preempt again — waiting for that pod would never give the room back.
            return False
        info = self.snapshot.cluster().get(node)
        return info is not None and a.framework.run_filter_plugins(a.state, a.pod, info).ok

    def nominate_locally(self, pod: PodInfo, node: str) -> None:
        uid = pod.pod.metadata.uid
        nominated = {
            n: [p for p in pods if p.pod.metadata.uid != uid]
            for n, pods in self.providers.nominated.items()
        }
        if node:
            nominated.setdefault(node, []).append(pod)
        self.providers.nominated = {n: pods for n, pods in nominated.items() if pods}

    def prune_terminating(self) -> None:
        """Forget victims the refreshed snapshot no longer shows (their deletion landed)."""
        if not self.providers.terminating:
            return
        cluster = self.snapshot.cluster()
        for key, node in list(self.providers.terminating.items()):
            info = cluster.get(node)
            if info is None or key not in info.pods:
                del self.providers.terminating[key]

    async def act_on(self, a: Attempt, node: str) -> None:
        """The act phase, once the preemptor's nomination is written: the victims go."""
        assert a.preemption is not None
        victims = a.preemption.victims
        for v in victims:
            self.providers.terminating[v.key] = node
        deleted = await act(self.nc, a.qp["pod"], node, victims, a.preemption.lower_nominated)
        a.victims_gone = deleted < len(victims)
        self.victims.observe(len(victims))
        log.info(
            "preempted %d of %d victims on %s",
            deleted,
            len(victims),
            node,
            extra={"pod": a.pod.key, "cycle": a.cycle},
        )
