"""Partitions and shard ownership for issue 21's sharding (docs/scale.md §4), pure.

The watcher's input is split by nats-server's subject mapping, whose
`{{partition(n, i, ...)}}` puts a subject in bucket FNV-1a-32(tokens i, ... joined
with nothing) mod n. Workers and cache shards must agree with the server about which
partition a pod or node is in without asking it, so this module computes the same
function; `tests/e2e/test_partition_mapping.py` checks it against a real
nats-server with the mapping below.

Partitions are fixed (`PARTITIONS`); shards own partitions (`ShardMap`), so a shard
joining or leaving moves whole partitions and never re-hashes a pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from shared.subjects import (
    CLUSTER_FILTERS,
    CLUSTER_PREFIX,
    PARTITIONED_PODS_PREFIX,
    PARTITIONS_PROBE,
    PARTITIONS_PROBED,
    PODS_PREFIX,
    PRIORITYCLASSES_PREFIX,
    pod_subject,
    queue_shard_subject,
)

T = TypeVar("T")

PARTITIONS = 64  # fixed: many more than shards, so ownership moves in small steps

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def fnv1a_32(data: bytes) -> int:
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def partition(tokens: Sequence[str], partitions: int = PARTITIONS) -> int:
    """nats-server's `{{partition(partitions, ...)}}` of these subject tokens."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, not {partitions}")
    return fnv1a_32("".join(tokens).encode()) % partitions


def pod_partition(namespace: str, name: str, partitions: int = PARTITIONS) -> int:
    """A pod's partition: its namespace and the first token of its name (a dotted name
    spans several subject tokens; the mapping hashes wildcards 1 and 2 only)."""
    return partition((namespace, name.split(".", 1)[0]), partitions)


def node_partition(name: str, partitions: int = PARTITIONS) -> int:
    """A node's partition: the first token of its name (FQDN node names have dots)."""
    return partition((name.split(".", 1)[0],), partitions)


def mapping_config(partitions: int = PARTITIONS) -> str:
    """The nats-server configuration's `mappings` block that stores each pod's events
    under its partition, `ksched.partitioned.pods.<p>.<ns>.<name>` (PARTITIONED_PODS_PREFIX),
    and answers the services' probe with the partition count. Two lines for pods: `*`
    matches one token, and dotted names need the `>` form. Every server of a cluster
    needs the same block (a publish is mapped by the server it enters)."""
    pod = f"{{{{partition({partitions},1,2)}}}}.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}"
    lines = [
        f'  "{PODS_PREFIX}.*.*": "{PARTITIONED_PODS_PREFIX}.{pod}"',
        f'  "{PODS_PREFIX}.*.*.>": "{PARTITIONED_PODS_PREFIX}.{pod}.>"',
        f'  "{PARTITIONS_PROBE}.*": "{PARTITIONS_PROBED}.{{{{wildcard(1)}}}}.{partitions}"',
    ]
    return "mappings = {\n" + "\n".join(lines) + "\n}\n"


# --- stored pod subjects ----------------------------------------------------------------
# Whether this process's NATS server maps pods into partitions, and into how many: set
# once, when the service has probed its server (shared/runtime/partitions.py). A pod's
# latest event is read back by its stored subject (fencing, preemption, a binding's
# check, a rebuild), which names its partition when the server maps.

_stored_partitions: list[int | None] = [None]


def use_partitions(partitions: int | None) -> None:
    """What the server's mapping is: its partition count, or None (no mapping)."""
    if partitions is not None and partitions != PARTITIONS:
        raise ValueError(
            f"the NATS server maps pods into {partitions} partitions; ksched needs "
            f"{PARTITIONS} (mapping_config() in shared/sharding.py, docs/scale.md §4)"
        )
    _stored_partitions[0] = partitions


def stored_pod_subject(namespace: str, name: str) -> str:
    """The subject a pod's events are stored under: its public one, or with the server's
    mapping, its partition's."""
    if _stored_partitions[0] is None:
        return pod_subject(namespace, name)
    return partitioned_pod_subject(namespace, name)


def partitioned_pod_subject(namespace: str, name: str) -> str:
    """Where the partition mapping stores a pod's events."""
    return f"{PARTITIONED_PODS_PREFIX}.{pod_partition(namespace, name)}.{namespace}.{name}"


def misplaced_partition(subject: str) -> str | None:
    """Why a stored pod subject cannot be the mapping's: a publisher allowed to publish
    on the stored prefix (nats-server checks a publish's rights on its mapped subject, so
    every pod writer has them) could name another partition than the pod's, and give a
    pod a second subject, read by another shard. None for any other subject."""
    if not subject.startswith(_PARTITIONED):
        return None
    part, _, rest = subject[len(_PARTITIONED) :].partition(".")
    namespace, _, name = rest.partition(".")
    if part.isdigit() and namespace and name and int(part) == pod_partition(namespace, name):
        return None
    return (
        f"subject {subject} is not where the partition mapping stores this pod: publish on "
        f"{pod_subject(namespace or '<namespace>', name or '<name>')}"
    )


@dataclass(frozen=True)
class ShardMap:
    """Which shard owns each partition: dealt round-robin over `shards`."""

    shards: int
    partitions: int = PARTITIONS

    def __post_init__(self) -> None:
        if not 1 <= self.shards <= self.partitions:
            raise ValueError(f"shards must be 1 to {self.partitions}, not {self.shards}")

    def owner(self, part: int) -> int:
        return part % self.shards

    def partitions_of(self, shard: int) -> range:
        return range(shard, self.partitions, self.shards)

    def node_owner(self, name: str) -> int:
        return self.owner(node_partition(name, self.partitions))

    def pod_owner(self, namespace: str, name: str) -> int:
        return self.owner(pod_partition(namespace, name, self.partitions))


# --- watcher shards (docs/scale.md §4, alternative (a)) ---------------------------------
# Each watcher shard reads the whole cluster stream and keeps only its own events: a
# pod's by its partition, PriorityClasses on every shard (each admits pods by them),
# every other kind on shard 0. A pod's events all go through one shard, so they stay
# in order; events of different kinds never had an order across them (kube's
# informers are independent watches too).

WATCHER = "watcher"  # the unsharded watcher's lease key and consumer prefix


@dataclass(frozen=True)
class Shard:
    """Shard `shard` of `shards` of a sharded service (shards = 1: the service as it
    was before sharding)."""

    shards: int = 1
    shard: int = 0

    def __post_init__(self) -> None:
        ShardMap(self.shards)  # validates the count
        if not 0 <= self.shard < self.shards:
            raise ValueError(f"shard must be 0 to {self.shards - 1}, not {self.shard}")

    @property
    def sharded(self) -> bool:
        return self.shards > 1


@dataclass(frozen=True)
class WatcherShard(Shard):
    """Which watcher shard a process is, and what it owns (shards = 1: the whole stream,
    named exactly as before sharding)."""

    @property
    def lane(self) -> str:
        """Its lease key, Redis epoch key and state-marker lane: `watcher`, or
        `watcher.<s>` when sharded."""
        return shard_lane(self.shard if self.sharded else None)

    def consumer_name(self, epoch: int) -> str:
        """Its leader's durable consumer (no dots: JetStream forbids them)."""
        if not self.sharded:
            return f"{WATCHER}-{epoch}"
        return f"{WATCHER}-{self.shard}-{epoch}"

    def filter_subjects(self, partitions: int | None) -> list[str]:
        """What its consumer takes of the cluster stream. Without the server's mapping
        (`partitions` None) the whole stream, each shard keeping its own by `handles`.
        With it, a shard's own partitions alone, and the PriorityClasses every shard
        admits pods by; shard 0 also takes the rest of the stream (every other kind, and a
        pod event some server stored unmapped). So no shard reads another's pods."""
        if partitions is None:
            return [f"{CLUSTER_PREFIX}.>"]
        if not self.sharded:
            return list(CLUSTER_FILTERS)
        own = ShardMap(self.shards, partitions).partitions_of(self.shard)
        rest = f"{CLUSTER_PREFIX}.>" if self.shard == 0 else f"{PRIORITYCLASSES_PREFIX}.>"
        return [rest, *(f"{PARTITIONED_PODS_PREFIX}.{p}.>" for p in own)]

    def handles(self, subject: str) -> bool:
        """Whether this shard handles the cluster event on `subject` (read before any
        decode: what is not its own is acked unread). A partitioned subject tells its
        partition; every other pod's is hashed."""
        if not self.sharded:
            return True
        if subject.startswith(_PARTITIONED):
            part, _, _ = subject[len(_PARTITIONED) :].partition(".")
            return part.isdigit() and ShardMap(self.shards).owner(int(part)) == self.shard
        if subject.startswith(_PODS):
            namespace, _, name = subject[len(_PODS) :].partition(".")
            if not namespace or not name:
                return self.shard == 0  # malformed: shard 0 refuses it, once
            return _pod_owner(self.shards, namespace, name) == self.shard
        if subject.startswith(_PRIORITYCLASSES):
            return True
        return self.shard == 0

    def reports(self, subject: str, partitioned: bool = False) -> bool:
        """Whether this shard answers for a refused event on `subject` (its error and
        its undo): a PriorityClass, read by every shard, is shard 0's to report. A
        consumer of the server's partitions (`partitioned`) got only its own events."""
        return (partitioned or self.handles(subject)) and (
            self.shard == 0 or not subject.startswith(_PRIORITYCLASSES)
        )


UNSHARDED = WatcherShard()


@lru_cache(maxsize=1 << 16)
def _pod_owner(shards: int, namespace: str, name: str) -> int:
    """A pod's shard, remembered: its events come several times (added, bound,
    deleted) and the hash in Python costs a few µs."""
    return ShardMap(shards).pod_owner(namespace, name)


_PODS = f"{PODS_PREFIX}."
_PARTITIONED = f"{PARTITIONED_PODS_PREFIX}."
_PRIORITYCLASSES = f"{PRIORITYCLASSES_PREFIX}."


def shard_lane(shard: int | None) -> str:
    """The lane of a watcher shard (None: the unsharded watcher)."""
    return WATCHER if shard is None else f"{WATCHER}.{shard}"


def delivery_lane(body: dict[str, Any]) -> str | None:
    """The lane of the watcher a delivery to queue or cache comes from (its `shard`,
    absent from an unsharded watcher's); None when the field is not a shard number."""
    shard = body.get("shard")
    if shard is None:
        return WATCHER
    if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < PARTITIONS:
        return None
    return shard_lane(shard)


def consumer_lane(name: str) -> str | None:
    """The lane of a watcher consumer by its name: `watcher` and `watcher-<epoch>` are
    the unsharded watcher's, `watcher-<s>-<epoch>` shard s's; None: not a watcher's."""
    if name == WATCHER:
        return WATCHER
    if not name.startswith(f"{WATCHER}-"):
        return None
    parts = name[len(WATCHER) + 1 :].split("-")
    if not all(p.isdigit() for p in parts):
        return None
    if len(parts) == 1:
        return WATCHER
    if len(parts) == 2:
        return shard_lane(int(parts[0]))
    return None


# --- queue shards (docs/scale.md §4) ------------------------------------------------------
# Queue shard s holds the pending pods of the partitions watcher shard s handles (the same
# ShardMap.pod_owner), so a pod's events stay on one path. Everything of a shard is its
# own: lease and Redis epoch `queue.<s>`, Redis keys `ksched:queue.<s>:…`, request
# subjects `ksched.internal.queue.<s>.<verb>`, state marker and incarnations. Cluster
# events that move pods (kube's MoveAllToActiveOrBackoffQueue) go to every shard.
# A gang's pods are the exception: all of them go to the queue shard of the gang's key
# (`queue_owner`), whatever their partitions, so that PreEnqueue, the gang's moves and
# Permit's rejections see every pending member in one queue.

QUEUE = "queue"  # the unsharded queue's lease key, Redis keys and state marker


@dataclass(frozen=True)
class QueueShard(Shard):
    """One queue shard (shards = 1: the one queue, named exactly as before sharding)."""

    @property
    def lane(self) -> str:
        """Its lease key, Redis epoch and key prefix, and state marker: `queue`, or
        `queue.<s>` when sharded."""
        return f"{QUEUE}.{self.shard}" if self.sharded else QUEUE

    @property
    def watcher_lane(self) -> str:
        """The watcher lane whose pods it holds (and whose `through` it tracks)."""
        return shard_lane(self.shard if self.sharded else None)

    def subject(self, subject: str) -> str:
        """Its own subject for a queue request declared in shared/subjects.py."""
        return queue_shard_subject(subject, self.shard if self.sharded else None)

    def owns(self, pod_key: str, gang: str = "") -> bool:
        """Whether it holds the pod with this key, in this gang ("": none, `pod_gang`)."""
        return not self.sharded or queue_owner(self.shards, pod_key, gang) == self.shard


def queue_shards(shards: int) -> list[QueueShard]:
    """Every queue shard: where pops, nominated-pod listings and moves go."""
    return [QueueShard(shards, s) for s in range(shards)]


def pod_key_owner(shards: int, pod_key: str) -> int:
    """The shard of a pod by its key, "namespace/name" (the same as by its subject)."""
    namespace, _, name = pod_key.partition("/")
    return _pod_owner(shards, namespace, name)


def pod_gang(raw_pod: dict[str, Any]) -> str:
    """The gang whose queue shard holds the pod: GangScheduling's (spec.schedulingGroup,
    spec.workloadRef: `gang_of`), else Coscheduling's (the pod-group label); "" for a pod
    in none. The keys of the two kinds never collide (shared/api/workload.py)."""
    # imported here: both bring pydantic, which the CLI (that reads partitions and
    # subjects from this module) must start without (tests/unit/test_cli_args.py)
    from shared.api.workload import gang_of
    from shared.podgroups import pod_group_of

    return gang_of(raw_pod) or pod_group_of(raw_pod)


def queue_owner(shards: int, pod_key: str, gang: str = "") -> int:
    """The queue shard that holds a pod: its gang's (by the gang's key, so that every
    member is in one queue), else its own partition's (its watcher shard's number)."""
    if gang:
        return _gang_owner(shards, gang)
    return pod_key_owner(shards, pod_key)


@lru_cache(maxsize=1 << 12)
def _gang_owner(shards: int, gang: str) -> int:
    return ShardMap(shards).owner(partition((gang,)))


def by_pod_owner(
    shards: int,
    items: Iterable[T],
    key: Callable[[T], str],
    gang: Callable[[T], str] = lambda _: "",
) -> dict[int, list[T]]:
    """Items (reports, queue events) split by the queue shard of the pod each names (by
    its key and its gang, `queue_owner`), in order."""
    split: dict[int, list[T]] = {}
    for item in items:
        split.setdefault(queue_owner(shards, key(item), gang(item)), []).append(item)
    return split
