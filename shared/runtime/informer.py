"""A process's own copy of some kinds of cluster objects, kept current from the cluster
stream: an informer's list-then-watch, with an ordered consumer per subject prefix that
starts from the latest message of each subject and then follows.

Used for what plugins read besides nodes and pods: PodDisruptionBudgets (preemption),
Services and the pods' controllers (PodTopologySpread's default constraints). A
malformed event is skipped here (the watcher refuses it on ksched.errors) and drops the
object: its last good version is outdated.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from shared.api.events import (
    BadEvent,
    ClusterObject,
    SubjectRef,
    decode_cluster_event,
    parse_subject,
)
from shared.api.immutable import immutable_errors, immutable_fields
from shared.api.owners import OWNER_MODELS, Controller, Service
from shared.api.podgroup import SchedulingPodGroup
from shared.api.workload import Workload
from shared.framework.interface import ClusterObjects
from shared.runtime.timeouts import within
from shared.subjects import (
    CLUSTER_STREAM,
    REPLICASETS_PREFIX,
    REPLICATIONCONTROLLERS_PREFIX,
    SERVICES_PREFIX,
    STATEFULSETS_PREFIX,
    WORKLOAD_PODGROUPS_PREFIX,
    WORKLOADS_PREFIX,
)

log = logging.getLogger("ksched.informer")

# How long `start` waits for what the stream held (WaitForCacheSync) before serving anyway.
SYNC_TIMEOUT_SECONDS = 30.0
# Consumers that deliver nothing for this long while the stream holds objects for them
# are taken for lost (made through a server that went silent): `start` fails, and the
# caller makes them again, rather than waiting out SYNC_TIMEOUT_SECONDS without them.
STALL_SECONDS = 3.0
OWNER_PREFIXES = (
    SERVICES_PREFIX,
    REPLICASETS_PREFIX,
    STATEFULSETS_PREFIX,
    REPLICATIONCONTROLLERS_PREFIX,
    WORKLOADS_PREFIX,  # not owners: the Workloads GangScheduling reads
    WORKLOAD_PODGROUPS_PREFIX,  # and its PodGroups (v1alpha2, v1beta1)
)
_OWNER_KINDS = {kind.lower(): kind for kind in OWNER_MODELS}  # subject kind -> Kind

# Called for every event: the object, or None when it went (deleted, or refused).
Handler = Callable[[SubjectRef, ClusterObject | None], None]


class Informer:
    def __init__(
        self, js: JetStreamContext, prefixes: Sequence[str], handler: Handler, what: str
    ) -> None:
        self.js = js
        self.prefixes = prefixes
        self.handler = handler
        self.what = what
        self._progress = asyncio.Event()  # set by every delivery

    async def start(self) -> None:
        """Subscribe, and return once the objects the stream held are read.

        A start that fails takes back the subscriptions it made, so that the caller's
        retry starts over instead of following a prefix twice for the process's life:
        a request unanswered (one sent while the stream elects its leader never is: the
        context's timeout says how long that costs), or consumers that deliver nothing
        for STALL_SECONDS although the stream holds objects for them."""
        self._progress = asyncio.Event()
        synced: list[asyncio.Event] = []
        subs: list[JetStreamContext.PushSubscription] = []
        try:
            for prefix in self.prefixes:
                done = asyncio.Event()
                info = await self.js.stream_info(CLUSTER_STREAM, subjects_filter=f"{prefix}.>")
                if not info.state.subjects:
                    done.set()  # nothing to list
                sub = await self.js.subscribe(
                    f"{prefix}.>",
                    stream=CLUSTER_STREAM,
                    cb=self._callback(done),
                    ordered_consumer=True,
                    deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
                )
                subs.append(sub)
                synced.append(done)
            await self._wait_synced(synced)
        except BaseException:
            for sub in subs:
                with contextlib.suppress(Exception):  # the connection may be gone too
                    await sub.unsubscribe()
            raise

    async def _wait_synced(self, synced: list[asyncio.Event]) -> None:
        """Until every prefix's consumer has delivered what the stream held; past
        SYNC_TIMEOUT_SECONDS of slow but going deliveries, serve anyway."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SYNC_TIMEOUT_SECONDS
        while not all(done.is_set() for done in synced):
            left = deadline - loop.time()
            if left <= 0:
                log.warning("%s not all read in %.0f s; going on", self.what, SYNC_TIMEOUT_SECONDS)
                return
            self._progress.clear()
            try:
                await within(self._progress.wait(), min(STALL_SECONDS, left))
            except TimeoutError:
                if deadline - loop.time() > 0:
                    raise TimeoutError(
                        f"{self.what}: nothing delivered in {STALL_SECONDS:g} s"
                    ) from None
        log.info("%s read", self.what)

    def _callback(self, synced: asyncio.Event) -> Callable[[Msg], Awaitable[None]]:
        async def on_msg(msg: Msg) -> None:
            self.on_msg(msg)
            self._progress.set()
            if msg.metadata.num_pending == 0:
                synced.set()

        return on_msg

    def on_msg(self, msg: Msg) -> None:
        try:
            ref = parse_subject(msg.subject)
        except BadEvent:
            return
        try:
            ev = decode_cluster_event(msg.subject, msg.data, msg.headers, 0)
            obj = None if ev.type == "DELETED" else ev.obj
        except BadEvent:
            obj = None
        try:
            self.handler(ref, obj)
        except Exception:  # a bug here must not stop the subscription
            log.exception("%s: %s not applied", self.what, msg.subject)


def owners_handler(objects: ClusterObjects) -> Handler:
    """Keeps `objects`' Services, controllers, Workloads and PodGroups equal to the
    stream's. An update that changes a Workload's or PodGroup's immutable fields is
    not taken: the watcher refuses it and puts the old object back in the stream, and
    meanwhile this copy keeps the old one too. (A v1beta1 gang's new minCount is no
    such change: shared/api/immutable.py.)"""
    gang_objects: dict[str, dict[str, Any]] = {
        "workload": objects.workloads,
        "workloadpodgroup": objects.pod_groups,
    }

    def on_change(ref: SubjectRef, obj: ClusterObject | None) -> None:
        table = gang_objects.get(ref.kind)
        if table is not None:
            key = f"{ref.namespace}/{ref.name}"
            if not isinstance(obj, Workload | SchedulingPodGroup):
                table.pop(key, None)
            elif not _changes_immutable(ref.kind, table.get(key), obj):
                table[key] = obj
        elif isinstance(obj, Service | Controller):
            objects.put(obj)
        else:
            objects.remove(_OWNER_KINDS[ref.kind], ref.namespace, ref.name)

    return on_change


def _changes_immutable(
    kind: str, old: Workload | SchedulingPodGroup | None, new: Workload | SchedulingPodGroup
) -> bool:
    if old is None or (old.metadata.uid and old.metadata.uid != new.metadata.uid):
        return False
    before = immutable_fields(kind, old.model_dump(by_alias=True, exclude_none=True))
    after = immutable_fields(kind, new.model_dump(by_alias=True, exclude_none=True))
    return before is not None and after is not None and bool(immutable_errors(kind, before, after))


async def watch_owners(
    js: JetStreamContext, objects: ClusterObjects, then: Handler | None = None
) -> None:
    """Start keeping `objects` current; returns once the stream's are read. `then` is
    called after each change (the queue re-checks the pods a Workload gates)."""
    handler = owners_handler(objects)
    if then is not None:
        handler = _chained(handler, then)
    informer = Informer(js, OWNER_PREFIXES, handler, "services, controllers and workloads")
    await informer.start()


def _chained(first: Handler, then: Handler) -> Handler:
    def on_change(ref: SubjectRef, obj: ClusterObject | None) -> None:
        first(ref, obj)
        then(ref, obj)

    return on_change
