"""PodInfo and NodeInfo: what plugins read (kube-scheduler's framework/types.go).

The cache owns the authoritative NodeInfos; workers hold snapshot copies built
from the records the cache writes to Redis. Both use these types so that the
Filter code that validates an assume is the code that chose the node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shared.api.models import Node, Pod, key_of
from shared.api.podparse import parse_pod
from shared.api.quantity import parse_nonnegative, resource_amount
from shared.api.resources import pod_host_ports, pod_request_totals
from shared.wire import pack, unpack

HostPort = tuple[str, str, int]  # (hostIP, protocol, port)


@dataclass(frozen=True)
class PodResources:
    """What a pod takes from a node; computed once per pod version."""

    requests: dict[str, int]  # cpu in millicores, everything else in units
    nonzero_cpu: int  # with kube-scheduler's defaults for requests left out (NodeInfo's)
    nonzero_memory: int
    # The same as scoring asks it of the pod being placed; differs from nonzero_* only
    # for some pods with pod-level requests (PodRequestTotals.scored).
    scored_cpu: int
    scored_memory: int
    host_ports: tuple[HostPort, ...] = ()

    @classmethod
    def of(cls, raw_pod: dict[str, Any]) -> PodResources:
        """Pods of one template share their containers: computed once per distinct
        (containers, initContainers, overhead, resources), which exact Fraction sums
        make dear."""
        spec = raw_pod.get("spec") or {}
        try:
            key = pack(tuple(spec.get(field) for field in _RESOURCE_FIELDS))
        except (TypeError, ValueError):  # not plain data: computed (and rejected) below
            return cls._compute(spec)
        known = _RESOURCES.get(key)
        if known is None:
            known = cls._compute(spec)
            if len(_RESOURCES) >= _RESOURCES_MAX:
                _RESOURCES.clear()
            _RESOURCES[key] = known
        return known

    @classmethod
    def _compute(cls, spec: dict[str, Any]) -> PodResources:
        totals = pod_request_totals(spec)
        return cls(totals.requests, *totals.nonzero, *totals.scored, tuple(pod_host_ports(spec)))


# The spec fields a pod's resources are computed from.
_RESOURCE_FIELDS = ("containers", "initContainers", "overhead", "resources")
_RESOURCES: dict[bytes, PodResources] = {}  # shared: callers never mutate a PodResources
_RESOURCES_MAX = 4096


class PodInfo:
    """A pod with what the cycle derives from it once: model, raw object, resources.

    `derived` holds per-plugin precomputations (parsed affinity terms, ...) so
    that a pod already on a node is not re-parsed for every pod scheduled.
    """

    # Slots, and caches filled on first use (functools.cached_property takes a lock
    # on every read in Python 3.11; these are read for every pod on every node).
    __slots__ = (
        "_anti",
        "_counted",
        "_key",
        "_pod",
        "_pod_affinity",
        "_raw",
        "_slim",
        "derived",
        "resources",
        "version",
    )

    def __init__(
        self,
        pod: Pod | None,
        raw: dict[str, Any] | None,
        resources: PodResources,
        version: int = 0,
    ):
        self._pod = pod  # None: parsed from `raw` on first use
        self._raw = raw  # None: unpacked from `_slim` on first use (`counted`)
        self.resources = resources
        self.version = version  # stream sequence of the pod version, 0 if unknown
        self.derived: dict[str, Any] = {}
        self._key: str | None = None
        self._slim: bytes | None = None
        self._pod_affinity: bool | None = None
        self._anti: bool | None = None
        self._counted: bytes | None = None

    @classmethod
    def of(cls, raw: dict[str, Any], version: int = 0) -> PodInfo:
        """Validated now: a pod that enters the scheduler."""
        return cls(parse_pod(raw), raw, PodResources.of(raw), version)

    @property
    def raw(self) -> dict[str, Any]:
        """The pod as published (a pod of a node: its slim form)."""
        raw = self._raw
        if raw is None:
            assert self._slim is not None  # `counted` sets it
            raw = self._raw = unpack(self._slim)
        return raw

    @property
    def pod(self) -> Pod:
        if self._pod is None:
            self._pod = parse_pod(self.raw)
        return self._pod

    @property
    def key(self) -> str:
        if self._key is None:
            self._key = key_of(self.raw)
        return self._key

    # Affinity flags read the raw pod, so that pods on nodes are not parsed for them.
    @property
    def has_affinity(self) -> bool:
        if self._pod_affinity is None:
            aff = (self.raw.get("spec") or {}).get("affinity") or {}
            self._pod_affinity = (
                aff.get("podAffinity") is not None or aff.get("podAntiAffinity") is not None
            )
        return self._pod_affinity

    @property
    def has_required_anti_affinity(self) -> bool:
        if self._anti is None:
            aff = (self.raw.get("spec") or {}).get("affinity") or {}
            anti = aff.get("podAntiAffinity")
            self._anti = anti is not None and bool(
                anti.get("requiredDuringSchedulingIgnoredDuringExecution")
            )
        return self._anti

    def slim(self) -> dict[str, Any]:
        return slim_pod(self.raw)

    @property
    def slim_bytes(self) -> bytes:
        """slim() packed: what the cache's records carry, and what readers compare to
        tell an unchanged pod from a new one without parsing it."""
        if self._slim is None:
            self._slim = pack(self.slim())
        return self._slim

    @property
    def counted_bytes(self) -> bytes | None:
        """What a NodeInfo counts of the pod (its resources and affinity flags), packed:
        the cache's node-change feed sends it beside the slim form, so that a worker
        counts the pod without unpacking it (`counted`). None when an amount does not
        fit msgpack (the worker then parses the slim form)."""
        if self._counted is None:
            res = self.resources
            flags = (_AFFINITY if self.has_affinity else 0) | (
                _ANTI if self.has_required_anti_affinity else 0
            )
            try:
                self._counted = pack(
                    [
                        res.requests,
                        res.nonzero_cpu,
                        res.nonzero_memory,
                        res.scored_cpu,
                        res.scored_memory,
                        [list(port) for port in res.host_ports],
                        flags,
                    ]
                )
            except (OverflowError, TypeError, ValueError):  # an amount beyond 64 bits
                self._counted = b""
        return self._counted or None

    def with_version(self, version: int) -> PodInfo:
        """The same pod at another version (bound, status updated): nothing re-parsed."""
        copy = PodInfo(self._pod, self._raw, self.resources, version)
        copy.derived = self.derived
        copy._key, copy._slim, copy._counted = self._key, self._slim, self._counted
        copy._pod_affinity, copy._anti = self._pod_affinity, self._anti
        return copy

    @classmethod
    def updated(cls, known: PodInfo | None, raw: dict[str, Any], version: int) -> PodInfo:
        """A new version of a pod: `known` re-versioned when the fields plugins read
        are unchanged (a binding, a status update), else parsed."""
        slim = pack(slim_pod(raw))
        if known is not None and known.slim_bytes == slim:
            return known.with_version(version)
        info = cls.of(raw, version)
        info._slim = slim
        return info

    @classmethod
    def lazy(cls, raw: dict[str, Any], version: int = 0) -> PodInfo:
        """A pod validated before (when it entered): parsed when a plugin first reads it."""
        return cls(None, raw, PodResources.of(raw), version)

    @classmethod
    def of_slim(cls, data: bytes, version: int) -> PodInfo:
        """A pod of a cache record."""
        info = cls.lazy(unpack(data), version)
        info._slim = data
        return info

    @classmethod
    def counted(cls, key: str, version: int, slim: bytes, counted: bytes) -> PodInfo:
        """A pod of the cache's node-change feed, given what a NodeInfo counts of it
        (`counted_bytes`): its slim form is unpacked only when something reads more
        than that (a plugin reading its labels, say); most pods on nodes are only
        counted."""
        resources, affinity, anti = _counted_of(counted)
        info = cls(None, None, resources, version)
        info._key, info._slim, info._counted = key, slim, counted
        info._pod_affinity, info._anti = affinity, anti
        return info


_AFFINITY, _ANTI = 1, 2  # counted_bytes' flags
_COUNTED: dict[bytes, tuple[PodResources, bool, bool]] = {}  # shared, never mutated
_COUNTED_MAX = 4096


def _counted_of(data: bytes) -> tuple[PodResources, bool, bool]:
    """counted_bytes read back; pods of one template share one result."""
    known = _COUNTED.get(data)
    if known is None:
        requests, nz_cpu, nz_mem, sc_cpu, sc_mem, ports, flags = unpack(data)
        resources = PodResources(
            requests, nz_cpu, nz_mem, sc_cpu, sc_mem, tuple(tuple(p) for p in ports)
        )
        known = (resources, bool(flags & _AFFINITY), bool(flags & _ANTI))
        if len(_COUNTED) >= _COUNTED_MAX:
            _COUNTED.clear()
        _COUNTED[data] = known
    return known


_SLIM_SPEC = (
    "schedulerName",
    "priority",
    "affinity",
    "containers",
    "initContainers",
    "overhead",
    "resources",
    "tolerations",
    "nodeSelector",
    "workloadRef",  # GangScheduling counts a gang's placed pods
    "schedulingGroup",  # (a v1alpha2 PodGroup's gang)
)
_SLIM_META = ("name", "namespace", "uid", "labels", "creationTimestamp", "deletionTimestamp")


def slim_pod(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields plugins read of pods already on a node. Not nodeName (the NodeInfo
    holding the pod says where it is): binding a pod leaves its slim form unchanged."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    slim = {
        "metadata": {k: meta[k] for k in _SLIM_META if k in meta},
        "spec": {k: spec[k] for k in _SLIM_SPEC if k in spec},
    }
    start = (raw.get("status") or {}).get("startTime")
    if start:  # preemption orders victims of equal priority by it
        slim["status"] = {"startTime": start}
    return slim


@dataclass
class ImageStateSummary:
    size: int
    num_nodes: int


def allocatable_of(raw_node: dict[str, Any]) -> dict[str, int]:
    status = raw_node.get("status") or {}
    alloc = status.get("allocatable")
    if alloc is None:  # the API server defaults allocatable to capacity
        alloc = status.get("capacity") or {}
    return {
        name: resource_amount(name, parse_nonnegative(value, field=f"status.allocatable.{name}"))
        for name, value in alloc.items()
    }


LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"


def zone_key(labels: dict[str, str]) -> str:
    """utilnode.GetZoneKey: region and zone, '' when the node has neither."""
    region, zone = labels.get(LABEL_REGION, ""), labels.get(LABEL_ZONE, "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


@dataclass
class NodeInfo:
    name: str
    raw_node: dict[str, Any] | None = None  # None: node removed, pods still accounted
    allocatable: dict[str, int] = field(default_factory=dict)
    requested: Counter[str] = field(default_factory=Counter)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    used_ports: Counter[HostPort] = field(default_factory=Counter)
    generation: int = 0
    pods: dict[str, PodInfo] = field(default_factory=dict)
    # Filled by the snapshot: image name -> size and how many nodes have it.
    image_states: dict[str, ImageStateSummary] = field(default_factory=dict)
    _node: Node | None = field(default=None, repr=False)
    # How many of `pods` have pod (anti-)affinity / required anti-affinity: kept with
    # the pods, so that indexes of such nodes need not walk them on every change.
    affinity_pods: int = 0
    anti_affinity_pods: int = 0
    # What a rebuild of the snapshot reads of every node, memoized per node object.
    _zone: tuple[object, str] | None = field(default=None, repr=False)
    _image_sizes: tuple[object, dict[str, int]] | None = field(default=None, repr=False)

    def set_node(self, raw_node: dict[str, Any] | None) -> None:
        self.raw_node = raw_node
        self._node = None
        self.allocatable = allocatable_of(raw_node) if raw_node is not None else {}

    @property
    def node(self) -> Node:
        """The typed node (parsed on first use)."""
        if self._node is None:
            self._node = Node.model_validate(self.raw_node or {"metadata": {"name": self.name}})
        return self._node

    @property
    def zone(self) -> str:
        """utilnode.GetZoneKey of the node: region and zone, '' when it has neither."""
        if self._zone is None or self._zone[0] is not self.raw_node:
            self._zone = (self.raw_node, zone_key(self.labels))
        return self._zone[1]

    @property
    def image_sizes(self) -> dict[str, int]:
        """Image name -> size on the node (read-only: shared between copies)."""
        if self._image_sizes is None or self._image_sizes[0] is not self.raw_node:
            sizes = {
                name: image.size_bytes for image in self.node.status.images for name in image.names
            }
            self._image_sizes = (self.raw_node, sizes)
        return self._image_sizes[1]

    @property
    def num_pods(self) -> int:
        return len(self.pods)

    @property
    def allowed_pod_number(self) -> int:
        return self.allocatable.get("pods", 0)

    @property
    def labels(self) -> dict[str, str]:
        meta = (self.raw_node or {}).get("metadata") or {}
        return meta.get("labels") or {}

    @property
    def pods_with_affinity(self) -> list[PodInfo]:
        return [p for p in self.pods.values() if p.has_affinity]

    @property
    def pods_with_required_anti_affinity(self) -> list[PodInfo]:
        return [p for p in self.pods.values() if p.has_required_anti_affinity]

    def clone(self) -> NodeInfo:
        """NodeInfo.Snapshot: a copy whose pods and sums can change independently."""
        copy = NodeInfo(
            self.name,
            self.raw_node,
            dict(self.allocatable),
            _copy(self.requested),
            self.nonzero_cpu,
            self.nonzero_memory,
            _copy(self.used_ports),
            self.generation,
            dict(self.pods),
            self.image_states,
        )
        copy._node, copy._zone, copy._image_sizes = self._node, self._zone, self._image_sizes
        copy.affinity_pods, copy.anti_affinity_pods = self.affinity_pods, self.anti_affinity_pods
        return copy

    def add_pod(self, pod: PodInfo) -> None:
        old = self.pods.get(pod.key)
        if old is not None:
            self._account(old, -1)
        self.pods[pod.key] = pod
        self._account(pod, +1)

    def remove_pod(self, key: str) -> bool:
        pod = self.pods.pop(key, None)
        if pod is None:
            return False
        self._account(pod, -1)
        return True

    def _account(self, pod: PodInfo, sign: int) -> None:
        if pod.has_affinity:
            self.affinity_pods += sign
            if pod.has_required_anti_affinity:
                self.anti_affinity_pods += sign
        res = pod.resources
        for name, amount in res.requests.items():
            self.requested[name] += sign * amount
            if self.requested[name] == 0:
                del self.requested[name]
        self.nonzero_cpu += sign * res.nonzero_cpu
        self.nonzero_memory += sign * res.nonzero_memory
        for port in res.host_ports:
            self.used_ports[port] += sign
            if self.used_ports[port] <= 0:
                del self.used_ports[port]

    def to_record(self) -> dict[str, Any]:
        """The worker's view; each pod as [key, version, packed slim pod] so that a
        reader parses only the pods it does not hold already."""
        return {
            "name": self.name,
            "node": self.raw_node,
            "generation": self.generation,
            "pods": [[p.key, p.version, p.slim_bytes] for p in self.pods.values()],
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any], old: NodeInfo | None = None) -> NodeInfo:
        """Rebuild from a record. With `old` (this node's previous NodeInfo), start from a
        copy of it and apply only the differences: the node object when it changed,
        pods gone, and pods new or changed (a pod whose version or packed slim form is
        unchanged is not parsed again)."""
        if old is None:
            info = cls(name=rec["name"])
            info.set_node(rec["node"])
        else:
            info = old.clone()
            if old.raw_node is None or old.raw_node != rec["node"]:
                info.set_node(rec["node"])
        info.generation = rec["generation"]
        known = old.pods if old is not None else {}
        listed = set()
        for key, version, slim in rec["pods"]:
            listed.add(key)
            current = known.get(key)
            pod = _reuse(current, version, slim)
            if pod is not current:
                info.add_pod(pod)
        for key in known.keys() - listed:
            info.remove_pod(key)
        return info

    def apply_changes(
        self,
        generation: int,
        added: list[Any],
        removed: list[str],
        local: Iterable[str],
        counted: list[bytes | None] | None = None,
    ) -> tuple[bool, bool]:
        """Apply, in place, a change the cache published (services/cache/feed.py): the
        pods `removed` gone, the pods `added` ([key, version, packed slim pod]) put in,
        counted from `counted` (their `counted_bytes`, when the cache sent them) or
        parsed, only when new, and the pods `local` (assumed here, not in the cache's
        state that the change is relative to) left out unless `added` has them.
        Returns whether what the node counts may have moved (a pod other than
        re-versioned) and whether a pod it held is gone."""
        self.generation = generation
        pods = self.pods
        moved = freed = False
        held = {}
        for key in local:  # usually none
            pod = pods.get(key)
            if pod is not None:
                held[key] = pod
                self.remove_pod(key)
                moved = True
        for key in removed:
            if self.remove_pod(key):
                moved = freed = True
        for i, (key, version, slim) in enumerate(added):
            current = pods.get(key)
            if current is not None and current.version == version != 0:
                continue  # held already (what _reuse would answer)
            known = current or (held.get(key) if held else None)
            pod = _reuse(known, version, slim, counted[i] if counted else None, key)
            if pod is current:
                continue
            if known is None or pod.slim_bytes is not known.slim_bytes:
                moved = True  # new, or new content (a re-versioned pod shares its slim)
            if current is None:
                self.pods[key] = pod
                self._account(pod, +1)
            elif (
                pod.resources is current.resources
                and pod.has_affinity == current.has_affinity
                and pod.has_required_anti_affinity == current.has_required_anti_affinity
            ):
                self.pods[key] = pod  # counted the same: nothing to recount
            else:
                self.add_pod(pod)
        if held:
            freed = freed or any(key not in pods for key in held)
        return moved, freed


def _copy(counter: Counter[Any]) -> Counter[Any]:
    """Counter(counter) goes through Counter.update's generic path; this does not."""
    copy: Counter[Any] = Counter()
    if counter:
        dict.update(copy, counter)
    return copy


def _reuse(
    known: PodInfo | None,
    version: int,
    slim: bytes,
    counted: bytes | None = None,
    key: str = "",
) -> PodInfo:
    if known is not None:
        if known.version == version != 0:
            return known
        if known.slim_bytes == slim:  # the same pod content, e.g. now bound
            return known if known.version == version else known.with_version(version)
    if counted:
        return PodInfo.counted(key, version, slim, counted)
    return PodInfo.of_slim(slim, version)
