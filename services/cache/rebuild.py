"""The assumptions in flight, put back into a cache whose state Redis lost.

When the cache rebuilds from the log (docs/reliability.md, "Redis data loss"), the
nodes, the bound pods and the pod groups are the cluster stream's latest events,
applied as the watcher's deliveries would be (shared/relist.py). What the log does
not show yet are the pods assumed and not yet bound: the binding cycles in flight,
which are the bind work queue's requests. Each goes back as an assumption of its
attempt, without the filters: the cache that committed it checked them, against a
state this one holds no more than (the log's), and a binder may be binding it now.

A request only counts while its pod is still pending at the version it scheduled
(the bind is conditional on that version): a pod bound since is in the log as
bound, one deleted or changed since can only fail its bind. The requests are read
before the log, so a binding that completes in between shows in the log.

A new leader whose Redis looked whole reconciles the same way: a request whose pod
the restored state does not know at all is an assumption Redis lost (its last
writes, after the watcher's last acknowledged event).
"""

from __future__ import annotations

from collections.abc import Mapping

from services.cache.cache import Cache
from shared.framework.profile_map import ProfileMap
from shared.framework.types import PodInfo
from shared.messages import BindRequest

# pod key -> (uid, sequence of its pending version)
PendingPods = Mapping[str, tuple[str, int]]


def unknown_to(cache: Cache, requests: list[tuple[int, BindRequest]]) -> set[str]:
    """The pods of `requests` the cache holds no state of."""
    return {req["key"] for _, req in requests if req["key"] not in cache.pods}


def assume_in_flight(
    cache: Cache,
    frameworks: ProfileMap,
    requests: list[tuple[int, BindRequest]],
    pending: PendingPods,
) -> list[str]:
    """Assume every request's pod on its node while the pod is pending at the version
    the request scheduled; later requests (by message sequence) replace earlier ones.
    Returns the keys assumed."""
    assumed = []
    for _, req in sorted(requests, key=lambda item: item[0]):
        framework = frameworks.get(req["profile"])
        if framework is None or pending.get(req["key"]) != (req["uid"], req["seq"]):
            continue
        pod = PodInfo.lazy(req["pod"], req["seq"])
        placed = cache.assume_pod(
            framework, pod, req["node"], req["uid"], req["seq"], req["cycle"], validate=False
        )
        if placed.ok:
            assumed.append(req["key"])
    return assumed
