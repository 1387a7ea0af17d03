"""Every Redis key ksched uses, defined once.

Key schema (all values msgpack unless noted). The queue and cache leaders write
theirs through one fenced Lua script (runtime/fencing.py, FencedBatch):
  ksched:cache:nodes        hash  node name -> raw core/v1 Node (as published)
  ksched:cache:pods         hash  pod key "ns/name" -> PodState record
                                  (services/cache/cache.py, PodState.to_record)
  ksched:cache:nodeinfo     hash  node name -> NodeInfo record (framework/types.py,
                                  NodeInfo.to_record): what workers' snapshots read
  ksched:cache:generations  zset  node name -> generation at its last change
                                  (a deleted node keeps its entry, with no nodeinfo)
  ksched:cache:generation   str   the latest generation handed out (int)
  ksched:cache:podgroups    hash  group "ns/name" -> PodGroup record (shared/podgroups.py)
                                  with its member pod keys
  ksched:cache:podgroups:version  str  bumped on every change of podgroups (int)
  ksched:cache:nominations  hash  pod key -> Nomination record of a pending pod
                                  (services/cache/nominations.py, Nomination.to_record)
  ksched:queue:pods         hash  pod key -> QueuedPodInfo record
                                  (services/queue/podinfo.py, QueuedPodInfo.to_record)
  ksched:queue:meta         hash  scheduling_cycle, move_request_cycle (ints)
  ksched:<queue|cache>:state  hash  the state marker (runtime/watermark.py), written with
                                  the state: incarnation (only when the whole state is
                                  written), applied (the cluster stream sequence through
                                  which watch events are applied), writes (flushes made
                                  in this incarnation)
  ksched:lease:<service>:epoch  str  the newest lease epoch a leader of watcher/queue/
                                  cache wrote with (int, never expires): the fencing
                                  token. Epochs are handed out by leader election in the
                                  NATS KV bucket KSCHED_LEASES (runtime/leasestore.py);
                                  Redis keeps the newest, raised "set if greater", and
                                  refuses a write with an older one (runtime/fencing.py)
"""

from __future__ import annotations

PREFIX = "ksched"

CACHE_NODES = f"{PREFIX}:cache:nodes"
CACHE_PODS = f"{PREFIX}:cache:pods"
CACHE_NODEINFO = f"{PREFIX}:cache:nodeinfo"
CACHE_GENERATIONS = f"{PREFIX}:cache:generations"
CACHE_GENERATION = f"{PREFIX}:cache:generation"
CACHE_PODGROUPS = f"{PREFIX}:cache:podgroups"
CACHE_PODGROUPS_VERSION = f"{PREFIX}:cache:podgroups:version"
CACHE_NOMINATIONS = f"{PREFIX}:cache:nominations"


def queue_pods_key(lane: str) -> str:
    """The pending pods of queue lane `lane` ("queue", or a shard's "queue.<s>")."""
    return f"{PREFIX}:{lane}:pods"


def queue_meta_key(lane: str) -> str:
    return f"{PREFIX}:{lane}:meta"


QUEUE_PODS = queue_pods_key("queue")
QUEUE_META = queue_meta_key("queue")


def state_key(service: str) -> str:
    return f"{PREFIX}:{service}:state"


def lease_epoch_key(service: str) -> str:
    return f"{PREFIX}:lease:{service}:epoch"
