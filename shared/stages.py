"""When a pod passed each hop between its publish and its binding (wall clock).

Each service stamps what it already sends, once per batch: the watcher's envelope to
the queue, the queue's pop reply, the worker's assume request (its own time: the
cycles done), the cache's assume reply; the worker carries a
pod's stamps in its bind request and the binder writes them on the binding as the
STAGES_HEADER. No stamp costs a message of its own. All of ksched's processes read
the same wall clock on one machine; across machines the stages are as good as NTP.
"""

from __future__ import annotations

# The hops in the order a pod passes them, each named by what happened at that moment.
WATCHED = "watched"  # the watcher received the batch holding the pod's event
ROUTED = "routed"  # the watcher sent it to the queue (the cache has applied it)
QUEUED = "queued"  # the queue added it to activeQ (kube's QueuedPodInfo.Timestamp)
POPPED = "popped"  # the queue handed it to a worker's pop
PICKED = "picked"  # the worker received the pop reply
SCHEDULED = "scheduled"  # the worker's cycles of the batch done, its assume request sent
ASSUMED = "assumed"  # the cache committed the worker's assumption
BIND_REQUESTED = "bind_requested"  # the worker published the bind request
BINDING = "binding"  # a binder started the binding cycle
HOPS = (WATCHED, ROUTED, QUEUED, POPPED, PICKED, SCHEDULED, ASSUMED, BIND_REQUESTED, BINDING)

Stamps = dict[str, float]


def encode(stamps: Stamps) -> str:
    """`hop=seconds,…` in HOPS order (µs resolution); unknown hops are left out."""
    return ",".join(f"{hop}={stamps[hop]:.6f}" for hop in HOPS if hop in stamps)


def decode(header: str) -> Stamps:
    """Inverse of encode; a malformed or unknown item is skipped, never an error (the
    header is read by tools, off a public subject anyone may write)."""
    stamps: Stamps = {}
    for item in header.split(","):
        hop, _, value = item.partition("=")
        if hop in HOPS:
            try:
                stamps[hop] = float(value)
            except ValueError:
                continue
    return stamps
