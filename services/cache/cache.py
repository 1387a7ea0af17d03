"""The scheduler cache (kube-scheduler's schedulerCache), pure: no I/O.

Pod states, as in the seed's cache walk-through:

                     +-------------------------------------------+  +----+
                     |                            Add            |  |    |
                     |                                           |  |    | Update
    +      Assume    +                Add                        v  v    |
  Initial +--------> Assumed +------------+---> Added <--+-------------+
                     +    +               |       +
                     |    |               |       |
                     |    |          Add  |       | Remove
             Forget  |    | Expire        |       |
                     v    v               |       v
                   Initial / Expired      +--> Deleted

- Assume: a worker chose a node; the pod counts there at once (validated first).
- FinishBinding: the binder wrote the binding; the expiry clock (ttl) starts.
- Add: the watcher saw the pod bound; an assumed pod is confirmed (moved if it
  landed elsewhere), an unknown one is added. Update is Add again with a newer
  version of a pod already added (the watch event does not tell them apart).
- Forget: the binding failed; the assumption is dropped.
- Expire: a finished binding never confirmed within ttl, or an assumption never
  finished within unbound_ttl (its worker and binder vanished), frees its room.

Nominations (nominations.py) reserve room at assume: a pod of lower or equal
priority than a pod nominated to the node must fit with that pod counted there.

An assumed pod also carries its Permit verdicts (allowed by / rejected by), set
by permit signals: a pod waiting at Permit in some binder is an assumed pod, and
its verdicts belong to that assumption (a new attempt starts with none).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from services.cache.nominations import NOMINATION_TTL, RESERVATION_TTL, Nomination, Nominations
from services.cache.podstate import ADDED, ASSUMED, PodState
from shared.api.workload import gang_of_pod
from shared.framework.columns import NodeColumns
from shared.framework.cycle_state import CycleState
from shared.framework.interface import ClusterObjects
from shared.framework.runtime import Framework
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code, Status
from shared.framework.types import ImageStateSummary, NodeInfo, PodInfo
from shared.framework.waiting_pods import PermitSignal
from shared.plugins.podtopologyspread.plugin import PodTopologySpread

ASSUMED_POD_TTL = 30.0  # kube-scheduler's durationToExpireAssumedPod, in seconds
# Plugins whose PreFilter/Filter look only at the node for a pod without pod
# (anti-)affinity or spread constraints, while no hard default spreading applies and no
# pod with required anti-affinity exists (the cross-node inputs of InterPodAffinity and
# PodTopologySpread).
NODE_LOCAL_UNLESS_CONSTRAINED = frozenset(
    {
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "InterPodAffinity",
        "PodTopologySpread",
    }
)


@dataclass
class ImageState:
    """An image some nodes have (kube's imageState): the size the first node reporting
    it gave, and the nodes that have it."""

    size: int
    nodes: set[str] = field(default_factory=set)


@dataclass
class AssumeResult:
    ok: bool
    status: Status | None = None  # why the node no longer fits
    # Refused while pods nominated to the node counted: its worker may not know them.
    nominated: bool = False


@dataclass
class ReserveResult:
    ok: bool
    status: Status | None = None  # why the room is not the preemptor's
    # When refused: the nominations (of equal or higher priority) on the node that
    # already hold the room, for the preemptor's worker to count at its next try.
    holders: list[Nomination] = field(default_factory=list)


def _spreads_by_default(framework: Framework) -> bool:
    """Whether PodTopologySpread's Filter may judge a pod that states no constraints:
    only with DoNotSchedule default constraints (the system defaults only score)."""
    return any(
        isinstance(p, PodTopologySpread) and p.filters_by_default for p in framework.pre_filters
    )


class Cache:
    def __init__(
        self,
        clock: Callable[[], float],
        *,
        ttl: float = ASSUMED_POD_TTL,
        unbound_ttl: float = 300.0,
        objects: ClusterObjects | None = None,
        nomination_ttl: float = NOMINATION_TTL,
    ) -> None:
        self.clock = clock
        self.ttl = ttl
        self.unbound_ttl = unbound_ttl
        self.nomination_ttl = nomination_ttl
        self.nominations = Nominations()
        # What plugins read besides nodes and pods (the service keeps it current).
        self.objects = objects or ClusterObjects()
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, PodState] = {}
        self.assumed: set[str] = set()  # keys of assumed pods, for permit signals
        # Attempts forgotten before their assume came (key, cycle -> until): that assume
        # is refused. Its request can outlive the attempt (a worker waits its timeout
        # through a NATS server's death); let in, it held room nobody would forget.
        self.forgotten_attempts: dict[tuple[str, int], float] = {}
        self.image_states: dict[str, ImageState] = {}
        self.generation = 0
        self.dirty_nodes: set[str] = set()
        self.dirty_pods: set[str] = set()
        self._cluster: ClusterSnapshot | None = None
        # The last snapshot's columns, reshaped for the next one, and the nodes whose
        # columns rows are behind their NodeInfos: changed while there was no snapshot,
        # or since the columns were last read (brought up to date when read, for all of
        # them at once, not at each assume: most assumes run no filter).
        self._columns: NodeColumns | None = None
        self._unsynced: set[str] = set()

    # --- nodes ------------------------------------------------------------------

    def add_or_update_node(self, raw_node: dict[str, Any]) -> None:
        name = raw_node["metadata"]["name"]
        info = self.nodes.get(name)
        if info is None or info.raw_node is None:  # the set of nodes changes
            self._cluster = None
        info = info or NodeInfo(name)
        self.nodes[name] = info
        self._remove_node_images(info)
        info.set_node(raw_node)
        self._add_node_images(info)
        self._touch(info)

    def remove_node(self, name: str) -> None:
        """The node goes; its pods stay accounted until they are deleted themselves."""
        info = self.nodes.get(name)
        if info is None:
            return
        self._remove_node_images(info)
        info.set_node(None)
        self._cluster = None
        if not info.pods:
            del self.nodes[name]
            self.generation += 1
            self.dirty_nodes.add(name)
        else:
            self._touch(info)

    def schedulable_nodes(self) -> list[NodeInfo]:
        return [n for n in self.nodes.values() if n.raw_node is not None]

    def image_states_of(self, node_name: str) -> dict[str, ImageStateSummary]:
        """The node's images with their size and how many nodes have them (what
        kube's snapshot gives ImageLocality)."""
        info = self.nodes.get(node_name)
        if info is None or info.raw_node is None:
            return {}
        states = {name: self.image_states[name] for name in _image_names(info)}
        return {name: ImageStateSummary(s.size, len(s.nodes)) for name, s in states.items()}

    def _add_node_images(self, info: NodeInfo) -> None:
        if info.raw_node is None:
            return
        for image in info.node.status.images:
            for name in image.names:
                state = self.image_states.setdefault(name, ImageState(image.size_bytes))
                state.nodes.add(info.name)

    def _remove_node_images(self, info: NodeInfo) -> None:
        for name in _image_names(info):
            state = self.image_states.get(name)
            if state is None:
                continue
            state.nodes.discard(info.name)
            if not state.nodes:
                del self.image_states[name]

    # --- pods -------------------------------------------------------------------

    def assume_pod(
        self,
        framework: Framework,
        pod: PodInfo,
        node_name: str,
        uid: str,
        seq: int,
        cycle: int = 0,
        *,
        validate: bool = True,
    ) -> AssumeResult:
        """Validate-then-commit: re-run the profile's filters against committed state
        (`validate=False` only when verdict_holds)."""
        if (pod.key, cycle) in self.forgotten_attempts:
            return AssumeResult(False, _conflict("the attempt was forgotten (its lease lapsed)"))
        current = self.pods.get(pod.key)
        if current is not None and current.state == ADDED:
            return AssumeResult(False, _conflict("pod is already bound"))
        if current is not None and seq < current.seq:
            # An attempt at an older version than the one assumed: one whose lease lapsed
            # and was fenced (its bind can only fail), woken late.
            return AssumeResult(False, _conflict("a newer attempt holds the pod"))
        if current is not None:  # a stale assumption from an earlier attempt
            self._remove(current)
        info = self.nodes.get(node_name)
        if info is None or info.raw_node is None:
            return AssumeResult(False, _conflict(f"node {node_name!r} not found"))
        status = self.validate(framework, pod, info) if validate else None
        if status is not None and not status.ok:
            reserved = bool(framework.nominated_pods_for(pod, node_name))
            return AssumeResult(False, status, nominated=reserved)
        self.nominations.drop(pod.key)  # an assumed pod is no longer merely nominated
        state = PodState(pod.key, uid, node_name, ASSUMED, pod, seq, cycle=cycle)
        state.deadline = self.clock() + self.unbound_ttl
        self._place(state)
        return AssumeResult(True)

    def verdict_holds(
        self, framework: Framework, raw_pod: dict[str, Any], node_name: str, seen: int | None
    ) -> bool:
        """Whether the worker's Filter verdict for (pod, node) still holds without running
        the filters again: the node is exactly as the worker read it (same generation;
        the worker also counted its own pending pods, so it was stricter), and for this
        pod no plugin of the profile looks beyond the node: no pod (anti-)affinity or
        spread constraints of its own, no hard default spreading (DoNotSchedule default
        constraints, while a Service or controller could give them a selector), no pod
        in the cluster whose required anti-affinity could reach it."""
        info = self.nodes.get(node_name)
        if seen is None or info is None or info.raw_node is None or info.generation != seen:
            return False
        if self.nominations.has(node_name):  # the worker may not have counted them
            return False
        if not framework.filter_names <= NODE_LOCAL_UNLESS_CONSTRAINED:
            return False
        spec = raw_pod.get("spec") or {}
        affinity = spec.get("affinity") or {}
        if affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None:
            return False
        if spec.get("topologySpreadConstraints"):
            return False
        cluster = self._current()  # its columns are not read
        if cluster.objects.selecting and _spreads_by_default(framework):
            return False
        return not cluster.has_pods_with_required_anti_affinity

    def validate(
        self, framework: Framework, pod: PodInfo, info: NodeInfo, without: Collection[str] = ()
    ) -> Status:
        """Run the profile's PreFilter and Filter plugins for `info` against committed
        state: plugins such as InterPodAffinity and PodTopologySpread look at every node.
        `without`: pods taken off the node first (a preemption's victims)."""
        cluster = self.cluster()
        framework.set_snapshot(cluster)
        framework.handle.providers.nominated = self.nominations.by_node
        state = CycleState()
        result, status = framework.run_pre_filter_plugins(state, pod, cluster.nodes)
        if not status.ok:
            return status
        if (
            result is not None
            and result.node_names is not None
            and info.name not in result.node_names
        ):
            return Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["node not among the PreFilter result"]
            )
        if without:
            info = info.clone()
            for key in without:
                victim = info.pods.get(key)
                if victim is None:
                    continue  # gone already
                info.remove_pod(key)
                status = framework.run_pre_filter_extension_remove_pod(state, pod, victim, info)
                if not status.ok:
                    return status
        return framework.run_filter_plugins_with_nominated_pods(state, pod, info)

    def cluster(self) -> ClusterSnapshot:
        """Rebuilt when the set of nodes changes, else kept in step node by node. Its
        columns let PodTopologySpread and InterPodAffinity count their PreFilter domains
        without walking every pod at each validation."""
        cluster = self._current()
        if self._unsynced:
            cluster.columns_changed(self._unsynced)
            self._unsynced.clear()
        return cluster

    def _current(self) -> ClusterSnapshot:
        """The snapshot, its columns rows of `_unsynced` nodes possibly behind."""
        if self._cluster is None:
            columns = None
            if self._columns is not None:  # rows of unchanged nodes are copied
                present = [n for n in self.nodes.values() if n.raw_node is not None]
                columns = self._columns.reshaped(present)
                for name in self._unsynced:
                    columns.update(name)
            self._unsynced.clear()
            self._cluster = ClusterSnapshot(self.nodes.values(), self.objects, columns=columns)
            self._columns = self._cluster.columns  # built now, kept up to date from here
        return self._cluster

    def finish_binding(self, key: str, uid: str) -> None:
        state = self.pods.get(key)
        if state is None or state.state != ASSUMED or state.uid != uid:
            return
        state.binding_finished = True
        state.deadline = self.clock() + self.ttl
        self.dirty_pods.add(key)

    def forget_pod(self, key: str, uid: str) -> bool:
        state = self.pods.get(key)
        if state is None or state.state != ASSUMED or state.uid != uid:
            return False
        self._remove(state)
        return True

    def forget_attempt(self, key: str, cycle: int) -> bool:
        """Forget the assumption of one attempt, known by its cycle only (its bind
        request could not be read, so its uid is unknown). One not assumed yet is
        remembered, so that its assume, should it still come, is refused."""
        state = self.pods.get(key)
        if state is None or state.state != ASSUMED or state.cycle != cycle:
            if cycle:  # cycle 0: an attempt no state knows of (a rebuilt queue's)
                self.forgotten_attempts[(key, cycle)] = self.clock() + self.unbound_ttl
            return False
        self._remove(state)
        return True

    # --- Permit verdicts ----------------------------------------------------------

    def permit_signal(self, signal: PermitSignal) -> list[PodState]:
        """Apply a plugin's allow or reject to the assumed pods it selects; returns the
        pods whose verdicts changed (a rejected pod stays rejected)."""
        changed = []
        for key in self.assumed:
            state = self.pods[key]
            meta = state.pod.pod.metadata
            if (
                state.state != ASSUMED
                or state.rejected is not None
                or not signal.matches(meta.namespace, meta.labels, gang_of_pod(state.pod.pod))
            ):
                continue
            if signal.verdict == "reject":
                state.rejected = [signal.plugin, signal.message]
            elif signal.plugin not in state.allowed:
                state.allowed.append(signal.plugin)
            else:
                continue
            changed.append(state)
            self.dirty_pods.add(state.key)
        return changed

    def permit_state(self, key: str, cycle: int) -> PodState | None:
        """The assumption of attempt `cycle`, None if it is not assumed any more."""
        state = self.pods.get(key)
        if state is None or state.state != ASSUMED or state.cycle != cycle:
            return None
        return state

    # --- nominations ----------------------------------------------------------------

    def reserve_nomination(
        self, framework: Framework, pod: PodInfo, node_name: str, victims: Collection[str]
    ) -> ReserveResult:
        """A preemption's nomination, before its worker writes it (and deletes the
        victims): refused when pods of equal or higher priority nominated to the node
        already hold the room the victims free. Kube's one loop runs each PostFilter
        knowing every nomination before; ksched's workers learn others' from the queue,
        later, so two of them could pick one node and one set of victims for two pods,
        and one of the two preempted again (PreemptionBasic, four workers: 71 of 1000
        preemptors evicted on two to four nodes). Here, where every nomination passes
        first, the second is refused and its worker tries again counting the first.
        Held until the watcher brings the written nomination (or RESERVATION_TTL)."""
        held = self.nominations.by_key.get(pod.key)
        if held is not None and held.pod.version > pod.version:
            return ReserveResult(False, _conflict("a newer version of the pod is nominated"))
        if pod.key in self.pods:
            return ReserveResult(False, _conflict("pod is already placed"))
        info = self.nodes.get(node_name)
        if info is None or info.raw_node is None:
            return ReserveResult(False, _conflict(f"node {node_name!r} not found"))
        framework.handle.providers.nominated = self.nominations.by_node
        holders = framework.nominated_pods_for(pod, node_name)
        if holders:
            status = self.validate(framework, pod, info, without=victims)
            if not status.ok:
                held_by = self.nominations.by_key
                return ReserveResult(False, status, [held_by[p.key] for p in holders])
        self.nominations.nominate(pod.key, node_name, pod, self.clock() + RESERVATION_TTL)
        return ReserveResult(True)

    def release_nomination(self, key: str, version: int) -> bool:
        """The reservation at `version` was never written (the pod changed): it goes."""
        return self.nominations.release(key, version)

    def nominate_pod(self, key: str, node: str, pod: PodInfo) -> None:
        """The watcher saw a pending pod's status.nominatedNodeName (`node`, or "" once
        cleared). A pod the cache holds as placed is no longer merely nominated (its
        assume may come before the watcher delivers its nomination)."""
        if key in self.pods:
            return
        self.nominations.nominate(key, node, pod, self.clock() + self.nomination_ttl)

    def add_pod(self, key: str, uid: str, node: str, pod: PodInfo, seq: int) -> None:
        """The watcher saw the pod bound to `node` (or an update of a bound pod)."""
        self.nominations.drop(key)
        current = self.pods.get(key)
        state = PodState(key, uid, node, ADDED, pod, seq)
        if current is not None:
            if current.state == ADDED and seq <= current.seq:
                return  # replayed or stale event
            if current.node == node and current.pod.slim_bytes == pod.slim_bytes:
                self._confirm(current, state)
                return
            self._remove(current)
            if current.node == node:  # confirmed or updated in place: same placement
                state.placed_at = current.placed_at
        self._place(state)

    def _confirm(self, current: PodState, state: PodState) -> None:
        """The pod as placed, now bound (or updated in fields no plugin reads): the node
        is unchanged, so its record and generation stay as they are, sparing every
        worker a re-read of the node for each binding."""
        state.placed_at = current.placed_at
        self.pods[state.key] = state
        self.assumed.discard(state.key)
        self.dirty_pods.add(state.key)

    def remove_pod(self, key: str) -> bool:
        """Returns whether the pod held room on a node (its removal may unblock others)."""
        self.nominations.drop(key)  # a deleted pod's nomination lapses with it
        state = self.pods.get(key)
        if state is None:
            return False
        self._remove(state)
        return True

    def cleanup_expired(self) -> list[str]:
        """Assumed pods past their deadline go (only assumed pods expire: the walk is
        over those, not over every pod the cache holds, each second)."""
        now = self.clock()
        states = [self.pods[key] for key in self.assumed]
        expired = [
            s for s in states if s.state == ASSUMED and s.deadline is not None and s.deadline <= now
        ]
        for state in expired:
            self._remove(state)
        self.nominations.expire(now)
        self.forgotten_attempts = {a: t for a, t in self.forgotten_attempts.items() if t > now}
        return [s.key for s in expired]

    # --- persistence ------------------------------------------------------------

    def restore(
        self,
        raw_nodes: list[dict[str, Any]],
        pods: list[PodState],
        generation: int,
        nominations: dict[str, Nomination] | None = None,
    ) -> None:
        for raw in raw_nodes:
            self.add_or_update_node(raw)
        for state in pods:
            self._place(state)
        self.nominations.restore(nominations or {})
        self.generation = max(self.generation, generation)
        self.dirty_nodes.clear()
        self.dirty_pods.clear()

    def take_dirty(self) -> tuple[set[str], set[str]]:
        nodes, pods = self.dirty_nodes, self.dirty_pods
        self.dirty_nodes, self.dirty_pods = set(), set()
        return nodes, pods

    # --- internals --------------------------------------------------------------

    def _place(self, state: PodState) -> None:
        info = self.nodes.get(state.node)
        if info is None:  # a pod on a node we have not seen (yet): keep its accounting
            info = self.nodes[state.node] = NodeInfo(state.node)
            self._cluster = None
        info.add_pod(state.pod)
        self.pods[state.key] = state
        if state.state == ASSUMED:
            self.assumed.add(state.key)
        self.dirty_pods.add(state.key)
        self._touch(info)
        if not state.placed_at:
            state.placed_at = self.generation

    def _remove(self, state: PodState) -> None:
        del self.pods[state.key]
        self.assumed.discard(state.key)
        self.dirty_pods.add(state.key)
        info = self.nodes.get(state.node)
        if info is None:
            return
        info.remove_pod(state.key)
        if info.raw_node is None and not info.pods:
            del self.nodes[state.node]
            self._cluster = None
            self.generation += 1
            self.dirty_nodes.add(state.node)
        else:
            self._touch(info)

    def _touch(self, info: NodeInfo) -> None:
        if self._cluster is not None:
            self._cluster.node_changed(info.name, columns=False)
        self._unsynced.add(info.name)
        self.generation += 1
        info.generation = self.generation
        self.dirty_nodes.add(info.name)


def _image_names(info: NodeInfo) -> set[str]:
    if info.raw_node is None:
        return set()
    return {name for image in info.node.status.images for name in image.names}


def _conflict(reason: str) -> Status:
    return Status(Code.ERROR, [reason], plugin="Cache")
