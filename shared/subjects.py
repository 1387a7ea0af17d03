"""Every NATS subject and JetStream stream ksched uses, defined once.

Public subjects (DESIGN.md, contract): the cluster stream users publish watch
events to, the events stream, and the error subjects. Internal subjects carry
msgpack between services and may change freely.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# --- public: cluster state (the "API server") --------------------------------
CLUSTER_STREAM = "KSCHED_CLUSTER"
CLUSTER_PREFIX = "ksched.cluster"
NODES_PREFIX = f"{CLUSTER_PREFIX}.nodes"
PODS_PREFIX = f"{CLUSTER_PREFIX}.pods"
PDBS_PREFIX = f"{CLUSTER_PREFIX}.pdbs"  # policy/v1 PodDisruptionBudgets, read by workers
PODGROUPS_PREFIX = f"{CLUSTER_PREFIX}.podgroups"  # scheduling.x-k8s.io PodGroups
# scheduling.k8s.io Workloads, v1alpha1, v1alpha2 or v1beta1 by apiVersion (the
# GangScheduling plugin), read by queue and workers
WORKLOADS_PREFIX = f"{CLUSTER_PREFIX}.workloads"
# scheduling.k8s.io PodGroups (v1alpha2, v1beta1; GangScheduling), read by queue and
# workers; a subject of their own, apart from scheduling.x-k8s.io's on PODGROUPS_PREFIX: the same
# ns/name may exist in both API groups
WORKLOAD_PODGROUPS_PREFIX = f"{CLUSTER_PREFIX}.workloadpodgroups"
# scheduling.k8s.io/v1 PriorityClasses (cluster-scoped), read by the watcher's admission
PRIORITYCLASSES_PREFIX = f"{CLUSTER_PREFIX}.priorityclasses"
# core/v1 Services and the controllers that own pods (apps/v1 ReplicaSets and
# StatefulSets, core/v1 ReplicationControllers): PodTopologySpread's default
# constraints take their selectors, read by workers, the cache and the queue
SERVICES_PREFIX = f"{CLUSTER_PREFIX}.services"
REPLICASETS_PREFIX = f"{CLUSTER_PREFIX}.replicasets"
STATEFULSETS_PREFIX = f"{CLUSTER_PREFIX}.statefulsets"
REPLICATIONCONTROLLERS_PREFIX = f"{CLUSTER_PREFIX}.replicationcontrollers"

# Pods as JetStream stores them when the NATS servers map pod subjects into partitions
# (shared/sharding.py mapping_config, docs/scale.md §4): `<prefix>.<partition>.<namespace>.
# <name>`. Users still publish on PODS_PREFIX; the server rewrites the subject before the
# stream sees it, so that each watcher shard can consume its own partitions alone. A prefix
# apart from CLUSTER_PREFIX: the rest of the cluster stream is then one filter subject that
# overlaps none of the partitions', and a stored subject published again (an undo) is not
# mapped a second time.
PARTITIONED_PODS_PREFIX = "ksched.partitioned.pods"
# Every subject of the cluster stream, as a consumer's filter subjects; as one filter
# (an ordered consumer's), with the stream named: WHOLE_STREAM.
CLUSTER_FILTERS: tuple[str, ...] = (f"{CLUSTER_PREFIX}.>", f"{PARTITIONED_PODS_PREFIX}.>")
WHOLE_STREAM = ">"
# How a service learns whether its server maps pods, and into how many partitions: it
# publishes on PARTITIONS_PROBE.<id>, which the mapping rewrites to
# PARTITIONS_PROBED.<id>.<partitions> (shared/runtime/partitions.py).
PARTITIONS_PROBE = "ksched.probe.partitions"
PARTITIONS_PROBED = "ksched.probe.partitioned"

# Each kind of object on the cluster stream: its prefix, and whether its subjects
# name a namespace (<prefix>.<namespace>.<name>) or not (<prefix>.<name>). The one
# table the watcher's door, the CLI's cluster view and the tools read subjects by.
CLUSTER_KINDS: dict[str, tuple[str, bool]] = {
    "node": (NODES_PREFIX, False),
    "priorityclass": (PRIORITYCLASSES_PREFIX, False),
    "pod": (PODS_PREFIX, True),
    "pdb": (PDBS_PREFIX, True),
    "podgroup": (PODGROUPS_PREFIX, True),
    "workload": (WORKLOADS_PREFIX, True),
    "workloadpodgroup": (WORKLOAD_PODGROUPS_PREFIX, True),
    "service": (SERVICES_PREFIX, True),
    "replicaset": (REPLICASETS_PREFIX, True),
    "statefulset": (STATEFULSETS_PREFIX, True),
    "replicationcontroller": (REPLICATIONCONTROLLERS_PREFIX, True),
}


# The same table by the word after "ksched.cluster." (each prefix is that one word more).
_CLUSTER_DOT = f"{CLUSTER_PREFIX}."
_KINDS_BY_WORD = {
    prefix.removeprefix(_CLUSTER_DOT): (kind, namespaced)
    for kind, (prefix, namespaced) in CLUSTER_KINDS.items()
}


_PARTITIONED_DOT = f"{PARTITIONED_PODS_PREFIX}."


def object_of_subject(subject: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of the object a cluster subject names ("" namespace for
    a cluster-scoped kind), or None when the subject names none. One look-up: the
    watcher reads every event's subject. A pod's stored subject (its partition in it)
    names the pod its public one does."""
    if not subject.startswith(_CLUSTER_DOT):
        public = public_subject(subject)
        return None if public is subject else object_of_subject(public)
    word, dot, rest = subject[len(_CLUSTER_DOT) :].partition(".")
    found = _KINDS_BY_WORD.get(word) if dot else None
    if found is None:
        return None
    kind, namespaced = found
    if not namespaced:
        return (kind, "", rest) if rest else None
    namespace, _, name = rest.partition(".")
    return (kind, namespace, name) if namespace and name else None


def public_subject(subject: str) -> str:
    """The subject a stored pod subject was published on (its partition taken out);
    any other subject as it is."""
    if not subject.startswith(_PARTITIONED_DOT):
        return subject
    part, dot, rest = subject[len(_PARTITIONED_DOT) :].partition(".")
    if not (dot and part.isdigit() and rest):
        return subject
    return f"{PODS_PREFIX}.{rest}"


# --- public: Kubernetes Event objects and rejected input ---------------------
EVENTS_STREAM = "KSCHED_EVENTS"
EVENTS_PREFIX = "ksched.events"
ERRORS_STREAM = "KSCHED_ERRORS"
ERRORS_PREFIX = "ksched.errors"

# --- internal -----------------------------------------------------------------
BIND_STREAM = "KSCHED_BIND"
BIND_SUBJECT = "ksched.internal.bind"
BINDER_CONSUMER = "binder"
WATCHER_CONSUMER = "watcher"
# Queue and cache number each incarnation of the state they keep in Redis with the
# sequence of a message published here (shared/runtime/watermark.py): a durable number
# that only grows, whatever Redis forgets.
STATE_STREAM = "KSCHED_STATE"
INCARNATION_PREFIX = "ksched.internal.incarnation"
# The shard count the queue shards run with (payload: the count), one message per change
# of it: its sequence names the layout a queue shard's state in Redis was written under.
LAYOUT_SUBJECT = f"{INCARNATION_PREFIX}.layout"

QUEUE_PREFIX = "ksched.internal.queue"
QUEUE_EVENTS = f"{QUEUE_PREFIX}.events"  # watcher -> queue: pod and cluster events
QUEUE_POP = f"{QUEUE_PREFIX}.pop"  # worker -> queue: long-poll batch pop
QUEUE_REPORT = f"{QUEUE_PREFIX}.report"  # worker/binder -> queue: cycle outcomes
QUEUE_NOMINATED = f"{QUEUE_PREFIX}.nominated"  # worker -> queue: nominated pods
# Every service instance registers a nats.micro service `ksched-<service>`
# (discoverable with $SRV.PING/INFO/STATS) with two per-instance endpoints:
# readyz (JSON {"ready", "reason"}) and metrics (Prometheus text), see
# shared/runtime/discovery.py. The queue's adds PendingPods and stats (JSON).
MICRO_PREFIX = "ksched-"
INSTANCE_PREFIX = "ksched.internal.svc"
QUEUE_SERVICE_NAME = f"{MICRO_PREFIX}queue"
QUEUE_PENDING = "ksched.internal.queue.pending"
QUEUE_STATS = "ksched.internal.queue.stats"
# operator -> any worker (nats.micro endpoint `whatif`, queue group): schedule a pod or
# a workload against the worker's committed snapshot without writing anything (JSON,
# messages.WhatIfRequest). Outside ksched.internal: the operator user asks it.
WHATIF = "ksched.operator.whatif"
CACHE_EVENTS = "ksched.internal.cache.events"  # watcher -> cache: nodes, assigned pods
CACHE_ASSUME = "ksched.internal.cache.assume"  # worker -> cache: validate-then-commit
CACHE_BINDING = "ksched.internal.cache.binding"  # binder -> cache: finish-binding / forget
# worker -> cache: a preemption's nomination reserved before it is written
CACHE_NOMINATE = "ksched.internal.cache.nominate"
# worker/binder -> cache: Permit signals (allow/reject waiting pods) and verdict queries
CACHE_PERMIT = "ksched.internal.cache.permit"
# cache -> every binder (core NATS fan-out): assumed pods whose Permit verdicts changed
PERMIT_VERDICTS = "ksched.internal.permit.verdicts"
# cache -> every worker (core NATS fan-out): the node changes of each state write that
# landed in Redis, applied to the workers' snapshots (services/cache/feed.py)
NODE_CHANGES = "ksched.internal.nodes.changes"

# Queue groups: only the leader subscribes (runtime/lease.py), but a deposed leader that
# has not exited yet may still be; a request then goes to one of them (its writes fenced).
QUEUE_GROUP = "ksched-queue"
CACHE_GROUP = "ksched-cache"

# Leader election: a NATS KV bucket (its stream KV_<bucket>) with one key per
# leader-elected service, holding its lease record (runtime/leasestore.py)
LEASE_BUCKET = "KSCHED_LEASES"


def queue_shard_subject(subject: str, shard: int | None) -> str:
    """A queue shard's own request subject (docs/scale.md §4): QUEUE_POP of shard 2 is
    `ksched.internal.queue.2.pop`; the unsharded queue's (`shard` None) as declared."""
    if shard is None:
        return subject
    verb = subject.removeprefix(f"{QUEUE_PREFIX}.")
    return f"{QUEUE_PREFIX}.{shard}.{verb}"


def incarnation_subject(service: str) -> str:
    return f"{INCARNATION_PREFIX}.{service}"


def micro_name(service: str) -> str:
    return f"{MICRO_PREFIX}{service}"


def instance_subject(service: str, instance_id: str, endpoint: str) -> str:
    return f"{INSTANCE_PREFIX}.{service}.{instance_id}.{endpoint}"


def node_subject(name: str) -> str:
    return f"{NODES_PREFIX}.{name}"


def pod_subject(namespace: str, name: str) -> str:
    return f"{PODS_PREFIX}.{namespace}.{name}"


def priority_class_subject(name: str) -> str:
    return f"{PRIORITYCLASSES_PREFIX}.{name}"


def pdb_subject(namespace: str, name: str) -> str:
    return f"{PDBS_PREFIX}.{namespace}.{name}"


def pod_group_subject(namespace: str, name: str) -> str:
    return f"{PODGROUPS_PREFIX}.{namespace}.{name}"


def workload_subject(namespace: str, name: str) -> str:
    return f"{WORKLOADS_PREFIX}.{namespace}.{name}"


def workload_pod_group_subject(namespace: str, name: str) -> str:
    return f"{WORKLOAD_PODGROUPS_PREFIX}.{namespace}.{name}"


def service_subject(namespace: str, name: str) -> str:
    return f"{SERVICES_PREFIX}.{namespace}.{name}"


def replica_set_subject(namespace: str, name: str) -> str:
    return f"{REPLICASETS_PREFIX}.{namespace}.{name}"


def stateful_set_subject(namespace: str, name: str) -> str:
    return f"{STATEFULSETS_PREFIX}.{namespace}.{name}"


def replication_controller_subject(namespace: str, name: str) -> str:
    return f"{REPLICATIONCONTROLLERS_PREFIX}.{namespace}.{name}"


def event_subject(namespace: str, pod_name: str) -> str:
    return f"{EVENTS_PREFIX}.{namespace}.{pod_name}"


def error_subject(original: str) -> str:
    return f"{ERRORS_PREFIX}.{original}"


# Dead letters of the bind work queue (DESIGN's errors convention: ksched.errors.<subject>),
# with the reason in the Ksched-Error header: undecodable or undeliverable bind requests.
BIND_DEAD_LETTER = error_subject(BIND_SUBJECT)


@dataclass(frozen=True)
class StreamSpec:
    """What a stream must look like; runtime.ensure_streams creates or updates it."""

    name: str
    subjects: list[str]
    retention: str = "limits"  # limits | workqueue
    max_msgs_per_subject: int = -1
    max_age_seconds: float = 0  # 0 = forever
    duplicate_window_seconds: float = 120
    description: str = ""
    extra: dict[str, object] = field(default_factory=dict)


STREAMS: tuple[StreamSpec, ...] = (
    # The latest event per subject is the object's current state: a late
    # watcher lists by replaying the stream, then keeps watching.
    StreamSpec(
        CLUSTER_STREAM,
        list(CLUSTER_FILTERS),
        # Two, not one: the event before a refused one is what undoing it restores
        # (services/watcher/undo.py).
        max_msgs_per_subject=2,
        description="cluster state: latest watch events per Node/Pod/PDB subject",
    ),
    StreamSpec(
        EVENTS_STREAM,
        [f"{EVENTS_PREFIX}.>"],
        max_age_seconds=3600,
        description="Kubernetes Event objects (Scheduled, FailedScheduling, Preempted)",
    ),
    StreamSpec(
        ERRORS_STREAM,
        [f"{ERRORS_PREFIX}.>"],
        max_age_seconds=24 * 3600,
        description="rejected input, with the reason in the Ksched-Error header",
    ),
    StreamSpec(
        STATE_STREAM,
        [f"{INCARNATION_PREFIX}.>"],
        max_msgs_per_subject=1,
        description="incarnations of the state queue and cache derive into Redis",
    ),
    StreamSpec(
        BIND_STREAM,
        [BIND_SUBJECT],
        retention="workqueue",
        description="binding cycle work: assumed pods waiting for a binder",
    ),
)

# Headers
ERROR_HEADER = "Ksched-Error"
# On an error republished cut short (it did not fit beside the reason): its original size.
TRUNCATED_HEADER = "Ksched-Truncated-From"
# On the watcher's republish that undoes a refused event: the refused event's sequence.
UNDO_HEADER = "Ksched-Undo"
# On every write ksched makes of an object it carries (a binding, a status, a victim's
# deletion, an undo): what ksched adds to an object may take it past the size the door
# lets a publisher's version have (services/watcher/outbound.py, OWN_WRITE_GROWTH).
OWN_WRITE_HEADER = "Ksched-Own-Write"
CONTENT_TYPE_HEADER = "Content-Type"
MSGPACK_CONTENT_TYPE = "application/msgpack"
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
MSG_ID_HEADER = "Nats-Msg-Id"  # JetStream drops a repeat within the duplicate window
# On a binding: the binder that wrote it (its lease identity), as kube's managedFields
# name the manager of a write; lets a run tell which side of a partition bound a pod.
BOUND_BY_HEADER = "Ksched-Bound-By"
# On a binding: when the pod passed each hop on its way (shared/stages.py), wall clock.
STAGES_HEADER = "Ksched-Stages"
