"""What the CLI reads from a running ksched, over NATS only (compose publishes nothing
else): the cluster stream (current objects, then changes), a pod's events, and the
service instances found by nats.micro discovery with their health and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import nats
import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError, ServiceUnavailableError

from shared.api.names import object_key
from shared.runtime.natsurl import server_list
from shared.runtime.timeouts import within
from shared.sharding import misplaced_partition
from shared.subjects import (
    CLUSTER_STREAM,
    MICRO_PREFIX,
    QUEUE_PENDING,
    QUEUE_SERVICE_NAME,
    WHOLE_STREAM,
    object_of_subject,
)

REPLAY_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 3.0
# Discovery has no count of instances to wait for: answers are collected until none
# came for DISCOVERY_QUIET_SECONDS (a local instance answers within a few ms), at
# most DISCOVERY_WAIT_SECONDS; `ksched status --wait S` listens S seconds instead.
# After a lost server: tries per server (one every half second) before a command gives up.
RECONNECT_ATTEMPTS = 10
RECONNECT_WAIT_SECONDS = 0.5
# A JetStream API request sent while a Raft group elects its leader (4-9 s after the
# old one fell silent) goes unanswered, or is refused at once with 503 "JetStream
# system temporarily unavailable" when the group is JetStream's own meta group: a
# command asks again, a pause apart, for this long before it gives up.
API_PATIENCE_SECONDS = 15.0
API_RETRY_PAUSE_SECONDS = 0.25
# What a request that may be answered when asked again raises.
NOT_YET_ANSWERED = (nats.errors.TimeoutError, ServiceUnavailableError, NoRespondersError)
DISCOVERY_WAIT_SECONDS = 0.5
DISCOVERY_QUIET_SECONDS = 0.1


T = TypeVar("T")


class CliError(Exception):
    """A user-facing failure: printed as one line, `error: ...`, no traceback."""


class ServerError(CliError):
    """An error kubectl shows as the API server's (`Error from server (NotFound): ...`):
    printed as it is, without the `error: ` prefix."""


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


async def answered(
    request: Callable[[], Awaitable[T]], patience: float = API_PATIENCE_SECONDS
) -> T:
    """A JetStream API request, asked again while it goes unanswered or JetStream says
    it is temporarily unavailable, for `patience` seconds (see API_PATIENCE_SECONDS)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while True:
        try:
            return await request()
        except NOT_YET_ANSWERED as err:
            if loop.time() + API_RETRY_PAUSE_SECONDS >= deadline:
                raise CliError(
                    f"NATS did not answer ({describe(err)}): no JetStream leader for the stream?"
                ) from None
        await asyncio.sleep(API_RETRY_PAUSE_SECONDS)


def describe(err: Exception) -> str:
    return str(err) or type(err).__name__


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
    at: dt.datetime | None = None  # when the stream stored this version


Change = Callable[[str, str, dict[str, Any], bool], None]  # (kind, key, object, deleted)


@dataclass
class ClusterWatch:
    """The current Pods and Nodes: the latest event per subject of the cluster stream,
    replayed, then followed (an informer's list-then-watch)."""

    pods: dict[str, Entry] = field(default_factory=dict)
    nodes: dict[str, Entry] = field(default_factory=dict)
    pdbs: dict[str, Entry] = field(default_factory=dict)
    priority_classes: dict[str, Entry] = field(default_factory=dict)
    services: dict[str, Entry] = field(default_factory=dict)
    replica_sets: dict[str, Entry] = field(default_factory=dict)
    stateful_sets: dict[str, Entry] = field(default_factory=dict)
    replication_controllers: dict[str, Entry] = field(default_factory=dict)
    workloads: dict[str, Entry] = field(default_factory=dict)
    on_change: Change | None = None
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self, js: JetStreamContext) -> None:
        if await answered(lambda: require_stream(js)) == 0:
            self.synced.set()
        await answered(
            lambda: js.subscribe(
                WHOLE_STREAM,
                stream=CLUSTER_STREAM,
                cb=self._on_msg,
                ordered_consumer=True,
                deliver_policy=DeliverPolicy.ALL,
            )
        )
        try:
            await within(self.synced.wait(), REPLAY_TIMEOUT_SECONDS)
        except TimeoutError:
            raise CliError(f"reading stream {CLUSTER_STREAM} timed out") from None

    async def _on_msg(self, msg: Msg) -> None:
        synced = self.synced.is_set()
        if msg.metadata.num_pending == 0:
            self.synced.set()
        named = object_of_subject(msg.subject)
        table = self._tables().get(named[0]) if named else None
        if named is None or table is None or misplaced_partition(msg.subject):
            return  # a misplaced pod subject: refused by the watcher, never a pod
        kind, namespace, name = named
        try:
            event = json.loads(msg.data)
            obj = event["object"]
            meta = obj.get("metadata") or {}
        except (ValueError, KeyError, TypeError, AttributeError):
            return  # the watcher reports bad events on ksched.errors (and undoes them)
        # The subject names the object, as the API server's URL does (an object naming
        # another is refused): its key, and the names the object leaves out.
        if namespace:
            key, names = object_key(namespace, name), {"namespace": namespace, "name": name}
        else:
            key, names = name, {"name": name}
        if not isinstance(meta, dict) or not isinstance(obj, dict):
            return
        obj = {**obj, "metadata": {**meta, **{k: v for k, v in names.items() if not meta.get(k)}}}
        deleted = event.get("type") == "DELETED"
        if deleted:
            table.pop(key, None)
        else:
            table[key] = Entry(obj, msg.metadata.sequence.stream, msg.metadata.timestamp)
        self.changed.set()
        if synced and self.on_change is not None:
            self.on_change(kind, key, obj, deleted)

    def _tables(self) -> dict[str, dict[str, Entry]]:
        """The table of each kind the view keeps."""
        return {
            "pod": self.pods,
            "node": self.nodes,
            "pdb": self.pdbs,
            "priorityclass": self.priority_classes,
            "service": self.services,
            "replicaset": self.replica_sets,
            "statefulset": self.stateful_sets,
            "replicationcontroller": self.replication_controllers,
            "workload": self.workloads,
        }


async def read_cluster(js: JetStreamContext) -> ClusterWatch:
    watch = ClusterWatch()
    await watch.start(js)
    return watch


async def read_events(js: JetStreamContext, subject: str) -> list[dict[str, Any]]:
    """The Event objects on `subject` (wildcards allowed) still in the age-limited
    events stream, oldest first."""
    try:
        sub = await answered(
            lambda: js.subscribe(subject, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL)
        )
    except NotFoundError:  # no events stream: no ksched service ever ran here
        return []
    events = []
    try:
        # what was pushed to us already counts as delivered, no longer as pending
        info = await sub.consumer_info()
        delivered = info.delivered.consumer_seq if info.delivered else 0
        pending = (info.num_pending or 0) + (delivered or 0)
        while pending:
            msg = await sub.next_msg(timeout=5)
            pending = msg.metadata.num_pending
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
    config: str = ""  # the KubeSchedulerConfiguration it loaded ("defaults": none)
    profiles: str = ""  # its profiles' schedulerNames, comma separated


async def gather(nc: NATS, subject: str, wait: float | None = None) -> list[dict[str, Any]]:
    """Every reply to one request ($SRV.* answers once per instance): for `wait`
    seconds, or by default until the answers stop coming (see DISCOVERY_QUIET_SECONDS)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(subject, b"", reply=inbox)
    replies: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (DISCOVERY_WAIT_SECONDS if wait is None else wait)
    try:
        while (left := deadline - loop.time()) > 0:
            if wait is None and replies:
                left = min(left, DISCOVERY_QUIET_SECONDS)
            try:
                msg = await sub.next_msg(timeout=left)
            except TimeoutError:
                break
            with contextlib.suppress(ValueError):
                replies.append(json.loads(msg.data))
    finally:
        await sub.unsubscribe()
    return replies


async def discover(nc: NATS, wait: float | None = None) -> list[Instance]:
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
                endpoints=micro_endpoints(info),
                config=meta.get("config", ""),
                profiles=meta.get("profiles", ""),
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


# --- the queue's inspection endpoints, over every queue shard -----------------------


def queue_endpoint_subjects(leaders: list[dict[str, str]], endpoint: str, one: str) -> list[str]:
    """Where the queue's leaders answer `endpoint`, from each queue instance's endpoints
    (name -> subject): one subject, or one per queue shard
    (`ksched.internal.queue.<s>.<endpoint>`); `one`, the unsharded queue's, when no
    instance names it (a standby only, an older queue)."""
    return sorted({e[endpoint] for e in leaders if endpoint in e}) or [one]


def micro_endpoints(info: dict[str, Any]) -> dict[str, str]:
    """An instance's endpoints by name, from its $SRV.INFO answer."""
    return {str(e.get("name")): str(e.get("subject")) for e in info.get("endpoints") or []}


async def queue_pending(
    nc: NATS, query: dict[str, Any] | None = None, timeout: float = 5
) -> dict[str, Any]:
    """kube's PendingPods of the whole queue: every queue shard's `pending` answer,
    merged (services/queue/inspect.py). NoRespondersError while a shard has no leader
    serving it yet."""
    from services.queue.inspect import merge_pending  # the queue's modules: only when asked

    query = query or {}
    infos = await gather(nc, f"$SRV.INFO.{QUEUE_SERVICE_NAME}")
    subjects = queue_endpoint_subjects(
        [micro_endpoints(i) for i in infos], "pending", QUEUE_PENDING
    )
    data = json.dumps(query).encode()
    replies = await asyncio.gather(*(nc.request(s, data, timeout=timeout) for s in subjects))
    return merge_pending([json.loads(r.data) for r in replies], query)
