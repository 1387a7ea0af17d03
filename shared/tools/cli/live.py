"""What the CLI reads from a running ksched, over NATS only (compose publishes nothing
else): the cluster stream (current objects, then changes), a pod's events, and the
service instances found by nats.micro discovery with their health and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import json
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import nats
import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError

from shared.api.models import object_key
from shared.runtime.settings import server_list
from shared.subjects import (
    CLUSTER_PREFIX,
    CLUSTER_STREAM,
    EVENTS_STREAM,
    MICRO_PREFIX,
    NODES_PREFIX,
    PDBS_PREFIX,
    PODS_PREFIX,
    PRIORITYCLASSES_PREFIX,
    event_subject,
)

REPLAY_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 3.0
# After a lost server: tries per server (one every half second) before a command gives up.
RECONNECT_ATTEMPTS = 10
RECONNECT_WAIT_SECONDS = 0.5
# A JetStream API request that reaches a leader lost a moment ago goes unanswered, not
# queued (nats-server's Raft elects another 4-9 s after the leader falls silent): a
# command asks again, up to this many times nats-py's 5 s timeout.
API_TRIES = 3
DISCOVERY_WAIT_SECONDS = 0.5


T = TypeVar("T")


class CliError(Exception):
    """A user-facing failure: printed as one line, no traceback."""


async def connect(url: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> NATS:
    """Connect to any server of `url` (comma separated), failing fast with a readable
    error once every one of them refused (the services retry forever; a command should
    not). nats-py tries the servers in turn and reports each refusal: a command gives up
    only when all have refused, so one server down in a cluster goes unnoticed. Once
    connected, a lost server is replaced by another (a `get -w` outlives a failover)."""
    servers = server_list(url)
    errors: list[Exception] = []
    failed = asyncio.Event()

    async def remember(err: Exception) -> None:  # instead of nats-py's log line per try
        errors.append(err)
        if len(errors) >= len(servers):
            failed.set()

    connecting = asyncio.ensure_future(
        nats.connect(
            servers=servers,
            name="ksched-cli",
            connect_timeout=2,
            max_reconnect_attempts=RECONNECT_ATTEMPTS,
            reconnect_time_wait=RECONNECT_WAIT_SECONDS,
            error_cb=remember,
        )
    )
    failing = asyncio.ensure_future(failed.wait())
    await asyncio.wait({connecting, failing}, timeout=timeout, return_when=FIRST_COMPLETED)
    failing.cancel()
    if connecting.done() and connecting.exception() is None:
        return connecting.result()
    connecting.cancel()
    with contextlib.suppress(BaseException):
        await connecting
    cause = errors[-1] if errors else "timed out"
    raise CliError(
        f"cannot reach NATS at {url} ({cause}); is ksched running? (set --nats or KSCHED_NATS_URL)"
    )


async def answered(request: Callable[[], Awaitable[T]]) -> T:
    """A JetStream API request, asked again while it goes unanswered (see API_TRIES)."""
    for _ in range(API_TRIES - 1):
        with contextlib.suppress(nats.errors.TimeoutError):
            return await request()
    try:
        return await request()
    except nats.errors.TimeoutError:
        raise CliError("NATS did not answer: no JetStream leader for the stream?") from None


async def require_stream(js: JetStreamContext, stream: str = CLUSTER_STREAM) -> int:
    """The stream's message count; a clear error when no ksched ever created it."""
    try:
        info = await js.stream_info(stream)
    except NotFoundError:
        raise CliError(
            f"stream {stream} not found: no ksched service has started on this NATS "
            "(`ksched apply` or any service creates it)"
        ) from None
    return int(info.state.messages)


@dataclass
class Entry:
    obj: dict[str, Any]
    seq: int


CLUSTER_SCOPED = ("node", "priorityclass")  # named without a namespace
Change = Callable[[str, str, dict[str, Any], bool], None]  # (kind, key, object, deleted)


@dataclass
class ClusterWatch:
    """The current Pods and Nodes: the latest event per subject of the cluster stream,
    replayed, then followed (an informer's list-then-watch)."""

    pods: dict[str, Entry] = field(default_factory=dict)
    nodes: dict[str, Entry] = field(default_factory=dict)
    pdbs: dict[str, Entry] = field(default_factory=dict)
    priority_classes: dict[str, Entry] = field(default_factory=dict)
    on_change: Change | None = None
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self, js: JetStreamContext) -> None:
        if await answered(lambda: require_stream(js)) == 0:
            self.synced.set()
        await answered(
            lambda: js.subscribe(
                f"{CLUSTER_PREFIX}.>",
                cb=self._on_msg,
                ordered_consumer=True,
                deliver_policy=DeliverPolicy.ALL,
            )
        )
        try:
            await asyncio.wait_for(self.synced.wait(), REPLAY_TIMEOUT_SECONDS)
        except TimeoutError:
            raise CliError(f"reading stream {CLUSTER_STREAM} timed out") from None

    async def _on_msg(self, msg: Msg) -> None:
        synced = self.synced.is_set()
        if msg.metadata.num_pending == 0:
            self.synced.set()
        kind, table = self._table(msg.subject)
        if table is None:
            return
        try:
            event = json.loads(msg.data)
            obj = event["object"]
            meta = obj["metadata"]
            key = (
                meta["name"]
                if kind in CLUSTER_SCOPED
                else object_key(meta.get("namespace") or "", meta["name"])
            )
        except (ValueError, KeyError, TypeError):
            return  # the watcher reports bad events on ksched.errors
        deleted = event.get("type") == "DELETED"
        if deleted:
            table.pop(key, None)
        else:
            table[key] = Entry(obj, msg.metadata.sequence.stream)
        self.changed.set()
        if synced and self.on_change is not None:
            self.on_change(kind, key, obj, deleted)

    def _table(self, subject: str) -> tuple[str, dict[str, Entry] | None]:
        if subject.startswith(PODS_PREFIX + "."):
            return "pod", self.pods
        if subject.startswith(NODES_PREFIX + "."):
            return "node", self.nodes
        if subject.startswith(PDBS_PREFIX + "."):
            return "pdb", self.pdbs
        if subject.startswith(PRIORITYCLASSES_PREFIX + "."):
            return "priorityclass", self.priority_classes
        return "", None


async def read_cluster(js: JetStreamContext) -> ClusterWatch:
    watch = ClusterWatch()
    await watch.start(js)
    return watch


async def read_events(js: JetStreamContext, namespace: str, name: str) -> list[dict[str, Any]]:
    """The pod's Event objects still in the (age-limited) events stream, oldest first."""
    subject = event_subject(namespace, name)
    try:
        info = await answered(lambda: js.stream_info(EVENTS_STREAM, subjects_filter=subject))
    except NotFoundError:
        return []
    count = (info.state.subjects or {}).get(subject, 0) if info.state else 0
    if not count:
        return []
    sub = await answered(
        lambda: js.subscribe(subject, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL)
    )
    events = []
    try:
        for _ in range(count):
            msg = await sub.next_msg(timeout=5)
            with contextlib.suppress(ValueError):
                events.append(json.loads(msg.data))
    except TimeoutError:
        pass  # aged out meanwhile
    finally:
        await sub.unsubscribe()
    return events


# --- service instances (nats.micro) ----------------------------------------------


@dataclass
class Instance:
    service: str  # watcher, queue, ...
    id: str
    version: str
    host: str
    pid: str
    started: str = ""
    ready: bool = False
    reason: str = "no answer"
    requests: int = 0
    errors: int = 0
    endpoints: dict[str, str] = field(default_factory=dict)  # name -> subject


async def gather(
    nc: NATS, subject: str, wait: float = DISCOVERY_WAIT_SECONDS
) -> list[dict[str, Any]]:
    """Every reply to one request within `wait` seconds ($SRV.* answers once per
    instance)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(subject, b"", reply=inbox)
    replies: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    try:
        while (left := deadline - loop.time()) > 0:
            try:
                msg = await sub.next_msg(timeout=left)
            except TimeoutError:
                break
            with contextlib.suppress(ValueError):
                replies.append(json.loads(msg.data))
    finally:
        await sub.unsubscribe()
    return replies


async def discover(nc: NATS, wait: float = DISCOVERY_WAIT_SECONDS) -> list[Instance]:
    """Every ksched service instance: $SRV.INFO and $SRV.STATS, then each one's readyz."""
    infos, stats = await asyncio.gather(
        gather(nc, "$SRV.INFO", wait), gather(nc, "$SRV.STATS", wait)
    )
    by_id = {s.get("id"): s for s in stats}
    instances = []
    for info in infos:
        name = str(info.get("name", ""))
        if not name.startswith(MICRO_PREFIX):
            continue
        meta = info.get("metadata") or {}
        st = by_id.get(info.get("id"), {})
        instances.append(
            Instance(
                service=meta.get("service") or name.removeprefix(MICRO_PREFIX),
                id=str(info.get("id", "")),
                version=str(info.get("version", "")),
                host=meta.get("host", ""),
                pid=meta.get("pid", ""),
                started=str(st.get("started", "")),
                requests=sum(int(e.get("num_requests", 0)) for e in st.get("endpoints") or []),
                errors=sum(int(e.get("num_errors", 0)) for e in st.get("endpoints") or []),
                endpoints={e["name"]: e["subject"] for e in info.get("endpoints") or []},
            )
        )
    await asyncio.gather(*(_probe(nc, i) for i in instances))
    return sorted(instances, key=lambda i: (i.service, i.host, i.pid, i.id))


async def _probe(nc: NATS, instance: Instance) -> None:
    subject = instance.endpoints.get("readyz")
    if subject is None:
        instance.reason = "no readyz endpoint"
        return
    try:
        reply = json.loads((await nc.request(subject, b"", timeout=2)).data)
        instance.ready, instance.reason = bool(reply.get("ready")), str(reply.get("reason", ""))
    except Exception as err:
        instance.ready, instance.reason = False, f"no answer ({type(err).__name__})"


async def scrape(nc: NATS, instance: Instance) -> str:
    """The instance's Prometheus text, over NATS ("" if it does not answer)."""
    subject = instance.endpoints.get("metrics")
    if subject is None:
        return ""
    try:
        return str((await nc.request(subject, b"", timeout=2)).data.decode())
    except Exception:
        return ""
