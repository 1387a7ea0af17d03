"""Plugin interfaces, one Protocol per extension point (kube-scheduler's framework/interface.go).

A plugin subclasses the Protocols of the extension points it implements, so
its class line states its phases, and the framework finds them with isinstance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from shared.api.owners import OWNER_MODELS, Controller, Owner, Service
from shared.api.podgroup import SchedulingPodGroup
from shared.api.workload import V1ALPHA2, V1BETA1, Workload
from shared.framework.status import Status
from shared.framework.types import NodeInfo, PodInfo

if TYPE_CHECKING:
    from shared.framework.columns import BoolArray, IntArray, NodeColumns
    from shared.framework.cycle_state import CycleState

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_TOTAL_SCORE = 2**63 - 1


@dataclass
class NodeScore:
    name: str
    score: int


@dataclass
class PreFilterResult:
    """Nodes a PreFilter already knows to be the only candidates (None: all nodes)."""

    node_names: set[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


@dataclass
class PostFilterResult:
    """A PostFilter's outcome for the pod's nomination (kube's NominatingInfo with
    ModeOverride): the node to nominate, or "" to clear the nomination. Preemption
    also names what the caller must do (the act phase, I/O, is not the plugin's):
    delete `victims`, and clear the nomination of `lower_nominated` (lower-priority
    pods nominated to the same node, which may no longer fit there)."""

    nominated_node_name: str = ""
    victims: list[PodInfo] = field(default_factory=list)
    lower_nominated: list[PodInfo] = field(default_factory=list)


@dataclass(frozen=True)
class ClusterEvent:
    """A change that may make a rejected pod schedulable (resource, action)."""

    resource: str  # Node, Pod, AssignedPod, ...
    action: str  # Add, Update, Delete, UpdateNodeLabel, UpdateNodeTaint, ...
    label: str = ""


@dataclass(frozen=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: object = None  # a QueueingHintFn, or None: always requeue


class SortablePod(Protocol):
    priority: int
    timestamp: float


class QueuedSortablePod(SortablePod, Protocol):
    """What the queue's pods offer a QueueSort plugin's sort key (QueuedPodInfo)."""

    key: str
    raw: dict
    initial_attempt_timestamp: float | None


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: SortablePod, b: SortablePod) -> bool: ...


@runtime_checkable
class QueueSortKeyPlugin(Plugin, Protocol):
    """A QueueSort whose order is a key (what `less` compares): the queue's heap uses it."""

    def sort_key(self, pod: QueuedSortablePod) -> tuple[Any, ...]: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status: ...


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> list[ClusterEventWithHint]: ...


class PreFilterExtensions(Protocol):
    def add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo
    ) -> Status: ...

    def remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo
    ) -> Status: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]: ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status: ...


@runtime_checkable
class NodeOnlyFilter(Protocol):
    """A Filter plugin that says, for a pod, whether its verdict reads only the node object
    and the pod, never the pods on the node: once it passed on a node, removing
    victims cannot change it (preemption's arithmetic dry run relies on this)."""

    def reads_only_the_node(self, pod: PodInfo) -> bool: ...


@runtime_checkable
class AmountsFilter(FilterPlugin, Protocol):
    """A Filter plugin whose verdict depends on resource sums and a pod count alone
    (NodeResourcesFit): preemption's dry run asks it on plain amounts, without building
    a node for each set of victims."""

    def checked_requests(self, state: CycleState, pod: PodInfo) -> list[tuple[str, int]]: ...

    def status_on_amounts(
        self,
        wanted: Sequence[tuple[str, int]],
        num_pods: int,
        requested: Mapping[str, int],
        allocatable: Mapping[str, int],
    ) -> Status: ...

    def lacks_on_amounts(
        self,
        wanted: Sequence[tuple[str, int]],
        num_pods: int,
        requested: Mapping[str, int],
        allocatable: Mapping[str, int],
    ) -> bool: ...


@runtime_checkable
class BatchFilterPlugin(Plugin, Protocol):
    """A Filter that can also judge every node at once from the snapshot's columns.

    The mask must equal running `filter` on each node (tests check both paths on the
    same inputs); None means this pod needs the per-node path."""

    def filter_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns
    ) -> BoolArray | None: ...


SignFragment = tuple[str, Any]  # (key, plain data) of a pod signature


@runtime_checkable
class SignPlugin(Plugin, Protocol):
    """KEP-5598's SignPlugin: the pod fields this plugin's verdicts and raw scores read,
    as fragments of the pod's signature (shared/framework/signature.py); None refuses
    the pod, whose results read other nodes and cannot be reused by the next pod."""

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, node_to_status: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status: ...


class ScoreExtensions(Protocol):
    def normalize_score(
        self, state: CycleState, pod: PodInfo, scores: list[NodeScore]
    ) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]: ...

    def score_extensions(self) -> ScoreExtensions | None: ...


@runtime_checkable
class BatchScorePlugin(Plugin, Protocol):
    """A Score plugin that can score the nodes at `rows` of the columns at once: the raw
    scores `score` would give, or None for the per-node path. If it has score extensions,
    they implement `normalize_all` on the array likewise."""

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray | None: ...


class BatchScoreExtensions(Protocol):
    def normalize_all(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    async def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


EXTENSION_POINTS: dict[str, type] = {
    "queueSort": QueueSortPlugin,
    "preEnqueue": PreEnqueuePlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}


@dataclass
class ClusterObjects:
    """Objects besides nodes and pods that plugins read (kube's listers): namespace labels
    for namespaceSelector, and the Services and pod controllers whose selectors
    PodTopologySpread's default constraints take (helper.DefaultSelector). A service
    keeps them current from the cluster stream (shared/runtime/informer.py); the tools
    fill them from manifests with `add`."""

    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    services: dict[str, dict[str, Service]] = field(default_factory=dict)  # ns -> name ->
    controllers: dict[tuple[str, str, str], Controller] = field(default_factory=dict)
    # GangScheduling: the Workloads and PodGroups (v1alpha2, v1beta1; "ns/name"), and, in
    # the queue, the keys of each gang's existing pods, pending or bound (its PreEnqueue
    # counts them).
    workloads: dict[str, Workload] = field(default_factory=dict)
    pod_groups: dict[str, SchedulingPodGroup] = field(default_factory=dict)  # "ns/name"
    gang_members: dict[str, set[str]] = field(default_factory=dict)

    def services_in(self, namespace: str) -> Iterable[Service]:
        return self.services.get(namespace, {}).values()

    def controller(self, kind: str, namespace: str, name: str) -> Controller | None:
        """The ReplicaSet, StatefulSet or ReplicationController of that name."""
        return self.controllers.get((kind, namespace, name))

    @property
    def selecting(self) -> bool:
        """Whether any object could give a pod a default spreading selector."""
        return bool(self.services or self.controllers)

    def put(self, obj: Owner) -> None:
        meta = obj.metadata
        if isinstance(obj, Service):
            self.services.setdefault(meta.namespace, {})[meta.name] = obj
        else:
            self.controllers[obj.kind, meta.namespace, meta.name] = obj

    def remove(self, kind: str, namespace: str, name: str) -> None:
        if kind != "Service":
            self.controllers.pop((kind, namespace, name), None)
            return
        in_namespace = self.services.get(namespace, {})
        in_namespace.pop(name, None)
        if not in_namespace:
            self.services.pop(namespace, None)

    def add(self, raw: dict[str, Any]) -> bool:
        """File a manifest's object if plugins read its kind (a Namespace, a Service, a
        controller); False for other kinds. Raises ValidationError for a bad one."""
        kind = raw.get("kind")
        if kind == "Namespace":
            meta = raw.get("metadata") or {}
            self.namespace_labels[meta.get("name", "")] = meta.get("labels") or {}
            return True
        if kind == "Workload":
            workload = Workload.model_validate(raw)
            self.workloads[workload.key] = workload
            return True
        if kind == "PodGroup" and raw.get("apiVersion") in (V1ALPHA2, V1BETA1):
            group = SchedulingPodGroup.model_validate(raw)
            self.pod_groups[group.key] = group
            return True
        model = OWNER_MODELS.get(kind) if isinstance(kind, str) else None
        if model is None:
            return False
        self.put(model.model_validate(raw))
        return True
