"""Schemas of the internal messages between services (msgpack maps), defined once.

TypedDicts document the shape of each item; the comment over each subject gives
the request's envelope and its reply. Messages that more than one service builds or
reads have their builders here (a report, the bind work queue's message id).
Every batch is split to fit the server's max payload (shared/wire.py:pack_chunks).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

# --- watcher -> queue (QUEUE_EVENTS) ------------------------------------------
# {"events": [QueueEvent, ...], "epoch", "stamps": {watched, routed}}
# (+ "shard" from a watcher shard: its epoch and "through" are that shard's, sharding.py)
#   -> {"applied": n, "failed": [[index, reason]]}
# (stamps: the batch's stage times, shared/stages.py; the queue keeps them per pod.)
# (QUEUE_EVENTS and CACHE_EVENTS alike: an event that failed is named, the rest applied;
# a deposed watcher's epoch gets {"error": ...} and nothing applied).
# Every internal batch is split to fit the server's max payload (wire.pack_chunks).
QueueOp = Literal["upsert", "delete", "assigned", "move"]


class QueueEvent(TypedDict, total=False):
    op: QueueOp
    key: str
    uid: str
    seq: int
    pod: dict[str, Any]  # raw pod, for upsert
    # For upsert, delete and assigned: the pod's gang (shared/sharding.py pod_gang), which
    # picks its queue shard; absent for a pod in none.
    gang: str
    size: int  # for upsert: the pod's size as published, in bytes (pop replies are sized)
    # For move: the cluster event (kube's ClusterEvent, e.g. Node/UpdateNodeLabel,
    # AssignedPod/Add) and its objects, which queueing hints read. old is absent for
    # an Add, new for a Delete. A move may instead carry only `event`, a label such as
    # "AssignedPodDelete" (then hints see no objects).
    resource: str
    action: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    event: str


# --- watcher -> cache (CACHE_EVENTS) ------------------------------------------
# {"events": [CacheEvent, ...], "epoch"} (+ "shard", as the queue's)
#   -> {"applied": n, "freed": n (events that freed room), "failed": [[index, reason]]}
CacheOp = Literal[
    "node_upsert",
    "node_delete",
    "pod_upsert",
    "pod_delete",
    "podgroup_upsert",
    "podgroup_delete",
    "group_member",
    "pod_nominate",
]


class CacheEvent(TypedDict, total=False):
    op: CacheOp
    name: str  # node name, or pod key for pod ops
    node: dict[str, Any]  # raw node, for node_upsert
    uid: str
    seq: int
    node_name: str  # the pod's spec.nodeName, for pod_upsert
    pod: dict[str, Any]  # raw pod, for pod_upsert and pod_nominate
    nominated_node: str  # a pending pod's status.nominatedNodeName ("" cleared), pod_nominate
    podgroup: dict[str, Any]  # raw PodGroup, for podgroup_upsert (name: "ns/name")
    group: str  # for group_member: the pod `name` is (present) or is not in this group
    present: bool


# --- worker <-> queue (QUEUE_POP) ----------------------------------------------
class PopRequest(TypedDict):
    max: int
    wait_ms: int
    # how long the worker waits for the reply: a pop written later than that is put
    # back instead of answered (nobody would take its pods)
    timeout_ms: NotRequired[int]


class QueuedPod(TypedDict):
    key: str
    uid: str
    seq: int
    pod: dict[str, Any]
    attempts: int
    cycle: int
    initial_attempt_ts: float
    # The nominator's node for the pod; it may be ahead of the pod's own
    # status.nominatedNodeName (preemption reported it before the watcher saw the write).
    nominated_node: NotRequired[str]
    # The victims (pod keys) of the preemption that nominated it: any worker treats those
    # its snapshot still shows on nominated_node as terminating (docs/preemption.md).
    victims: NotRequired[list[str]]
    # Stage times so far (shared/stages.py): watched, routed, queued; popped is the reply's.
    stamps: NotRequired[dict[str, float]]


# {"pods": [QueuedPod, ...], "nominated_version": int, "popped": wall time}: a worker
# whose copy of the nominated pods is older than nominated_version asks QUEUE_NOMINATED
# again; popped is when the queue took the pods (a stage time, shared/stages.py).


# --- worker -> queue (QUEUE_NOMINATED) ------------------------------------------
# {"node": "<name>"} (optional: all nodes without it) ->
# {"version": int, "pods": [NominatedPod, ...]}
class NominatedPod(TypedDict):
    key: str
    uid: str
    node: str  # the nominated node (status.nominatedNodeName, or preemption's choice)
    priority: int
    seq: int
    pod: dict[str, Any]
    # The victims (pod keys) of its preemption on `node`, for kube's "terminating pod on
    # the nominated node" check in every worker.
    victims: NotRequired[list[str]]


# --- operator -> worker (WHATIF), JSON so that `nats req` can ask ---------------
# WhatIfRequest -> the report of shared/framework/whatif.py:what_if, or a nats.micro
# error (code 400 and the reason) for a request it cannot read.
class WhatIfRequest(TypedDict, total=False):
    pod: dict[str, Any]  # the pod; for a workload, the first of its pods
    replicas: int  # a workload: that many such pods, placed one by one (default 1)
    config: dict[str, Any]  # a KubeSchedulerConfiguration to use instead of the worker's
    node: str  # that node's full detail: every plugin's verdict and scores
    top: int  # best-scoring nodes listed (default whatif.TOP_SCORES)


# --- worker, binder -> queue (QUEUE_REPORT) ------------------------------------
# {"reports": [Report, ...], "move": "<event>" (optional)} -> {"accepted": n}
Outcome = Literal["assumed", "unschedulable", "error"]


class Report(TypedDict, total=False):
    key: str
    cycle: int
    outcome: Outcome
    message: str
    plugins: list[str]
    seq: int  # the pod's sequence after ksched's own status write
    nominated_node: str  # preemption nominated this node ("" clears the nomination)
    victims: list[str]  # with nominated_node: the pod keys preemption deleted there


# {"reports": [Report, ...], "move": "<event>" | None}


def report(
    key: str, cycle: int, outcome: Outcome, message: str = "", plugins: list[str] | None = None
) -> Report:
    return {
        "key": key,
        "cycle": cycle,
        "outcome": outcome,
        "message": message,
        "plugins": list(plugins or []),
    }


# --- worker -> cache (CACHE_ASSUME) -------------------------------------------
class Assumption(TypedDict, total=False):
    key: str
    uid: str
    seq: int
    node: str
    pod: dict[str, Any]
    profile: str
    # The node's generation in the snapshot the worker chose it from (optional): the
    # cache skips re-running the filters when it is unchanged and they are node-local.
    generation: NotRequired[int]
    # The incarnation of the cache's state that generation belongs to
    # (runtime/watermark.py): a generation of another one says nothing.
    incarnation: NotRequired[int]
    cycle: int  # the attempt: Permit verdicts and dead letters name it


class AssumeReply(TypedDict, total=False):
    key: str
    ok: bool
    plugin: str
    reasons: list[str]
    generation: int  # when ok: the node's generation with the pod committed on it
    nominated: bool  # when refused: pods nominated to the node counted (docs/preemption.md)


# {"assume": [Assumption, ...]} -> {"results": [AssumeReply, ...], "assumed": wall time}
# (assumed: when the cache committed the batch, a stage time, shared/stages.py)


# --- worker -> cache (CACHE_NOMINATE) -----------------------------------------
class NominationRequest(TypedDict):
    """A preemption's nomination, reserved before the worker writes it (cache.py
    reserve_nomination)."""

    key: str
    seq: int  # the pod's version the worker read: its status write is conditional on it
    pod: dict[str, Any]
    node: str
    victims: list[str]  # keys of the pods PostFilter chose to evict on `node`
    profile: str


class NominationReply(TypedDict, total=False):
    ok: bool
    plugin: str
    reasons: list[str]
    # when refused: the nominations already holding the room, [node, slim pod, seq]
    holders: list[tuple[str, bytes, int]]


# {"reserve": NominationRequest} -> NominationReply
# {"release": [key, seq]} -> {"released": bool}: the nomination's write failed


# --- binder, worker, queue -> cache (CACHE_BINDING) ----------------------------
# {"finish": [[key, uid], ...],             binder: bound, the assumption confirmed
#  "forget": [[key, uid], ...],             worker: committed, then Permit rejected
#  "forget_attempts": [[key, cycle], ...]}  binder: a failed bind or a dead letter;
#                                           queue: a lapsed attempt it fenced
#   -> {"forgotten": n}
# By cycle, only that attempt's assumption goes, not a later attempt of the same pod.


# --- worker/binder -> cache (CACHE_PERMIT), cache -> binders (PERMIT_VERDICTS) ----
# {"signals": [PermitSignal.to_wire(), ...], "query": [[key, cycle], ...]}
#   -> {"states": [PermitState, ...]} (one per query, in order)
# PERMIT_VERDICTS: {"states": [PermitState, ...]} for assumptions a signal changed.
class PermitState(TypedDict):
    key: str
    cycle: int
    assumed: bool  # False: that attempt is no longer assumed (forgotten, expired, replaced)
    allowed: list[str]
    rejected: list[str] | None  # [plugin, message]


# --- worker -> binder (BIND_SUBJECT, JetStream work queue) ----------------------
class BindRequest(TypedDict):
    key: str
    uid: str
    seq: int  # the pod version that was scheduled: the bind's precondition
    node: str
    cycle: int
    pod: dict[str, Any]
    profile: str
    assumed_at: float
    # Permit said Wait: plugin -> deadline (wall clock). Absent for pods Permit allowed.
    permit_waits: NotRequired[dict[str, float]]
    # Stage times up to the bind request (shared/stages.py): the binder adds its own and
    # writes them on the binding.
    stamps: NotRequired[dict[str, float]]


def bind_message_id(key: str, cycle: int, batch_of: int = 0) -> str:
    """The work queue's message id of an attempt ("<pod key>@<cycle>"), or of a batch
    of `batch_of` attempts led by it ("...+<n>"): a retried publish is then dropped."""
    msg_id = f"{key}@{cycle}"
    return f"{msg_id}+{batch_of}" if batch_of else msg_id


def attempt_of_message_id(msg_id: str) -> tuple[str, int] | None:
    """(pod key, cycle) of a one-attempt message id; None for a batch's or another id."""
    key, sep, cycle = msg_id.rpartition("@")
    if not sep or not key or not cycle.isdigit():
        return None
    return key, int(cycle)


class BindBatch(TypedDict):
    """The pods of one worker batch that Permit allowed, in one work-queue message (one
    publish, one ack); a pod told to wait travels alone, as a BindRequest."""

    requests: list[BindRequest]


def requests_in(body: Any) -> list[dict[str, Any]]:
    """The request maps a bind work-queue message holds (a BindBatch's, or the one
    BindRequest), unchecked: whatever an undecodable message still shows too."""
    if isinstance(body, dict) and isinstance(body.get("requests"), list):
        return [r for r in body["requests"] if isinstance(r, dict)]
    return [body] if isinstance(body, dict) else []
