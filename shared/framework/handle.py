"""The Handle plugins get (kube-scheduler's framework.Handle), and the providers a
service hands it at construction."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from shared.framework.interface import FilterPlugin
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Status
from shared.framework.types import NodeInfo, PodInfo
from shared.framework.waiting_pods import PermitSignal

if TYPE_CHECKING:
    from shared.api.pdb import PodDisruptionBudget
    from shared.framework.cycle_state import CycleState

BindFn = Callable[[PodInfo, str], Awaitable[Status]]


class FilterRunner(Protocol):
    """What the framework lets a PostFilter plugin run (part of kube's framework.Handle)."""

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status: ...

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo
    ) -> Status: ...

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo
    ) -> Status: ...

    def run_filter_plugin(
        self, plugin: FilterPlugin, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status: ...

    def active_filters(self, state: CycleState) -> list[FilterPlugin]: ...

    def runs_pre_filter_extensions(self, state: CycleState) -> bool: ...

    def nominated_pods_for(self, pod: PodInfo, node_name: str) -> list[PodInfo]: ...


@dataclass
class HandleProviders:
    """What a service provides its plugins beyond the snapshot (kube's framework.Handle
    getters: the PodNominator, the PDB and PodGroup listers, the binding client), handed
    to every Handle at construction. The service owns it and keeps it current; plugins
    read it through the Handle, which never changes it.

    `nominated`: the pods nominated to each node (kube's PodNominator, fed by the
    queue), which Filter counts as if they were there. `pdbs`: the
    PodDisruptionBudgets preemption respects. `terminating`: the pods this process
    deleted as victims that its snapshot still shows (pod key -> node), kube's
    terminating pods. `pod_groups`: the PodGroups the cache tracks ("ns/name" ->
    record, see shared/podgroups.py). `uncommitted`: the keys of pods the snapshot shows
    that are assumed only locally (by another lane, its commit to the cache still out):
    Permit counts what the cache holds. `bind_pod`: writes a binding (the binder's;
    DefaultBinder uses it).
    """

    nominated: dict[str, list[PodInfo]] = field(default_factory=dict)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    terminating: dict[str, str] = field(default_factory=dict)
    pod_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    uncommitted: frozenset[str] = frozenset()
    bind_pod: BindFn | None = None


class Handle:
    """What a plugin may reach beyond its arguments (kube-scheduler's framework.Handle).

    The framework sets `snapshot` (the cycle's) before each cycle and `runner` (itself,
    which PostFilter plugins run Filter through) when it is built; everything else comes
    from the service's providers, read-only here.

    Plugins reach pods waiting at Permit, which may wait in any binder, through
    `allow_waiting_pods` / `reject_waiting_pods`: the signals collect here and the
    service that runs the plugin ships them (kube's IterateOverWaitingPods).
    """

    def __init__(
        self, snapshot: ClusterSnapshot | None = None, providers: HandleProviders | None = None
    ) -> None:
        self.providers = providers or HandleProviders()
        self.snapshot = snapshot or ClusterSnapshot([])
        self.runner: FilterRunner | None = None
        self.permit_signals: list[PermitSignal] = []

    @property
    def nominated(self) -> dict[str, list[PodInfo]]:
        return self.providers.nominated

    @property
    def pdbs(self) -> list[PodDisruptionBudget]:
        return self.providers.pdbs

    @property
    def terminating(self) -> dict[str, str]:
        return self.providers.terminating

    @property
    def pod_groups(self) -> dict[str, dict[str, Any]]:
        return self.providers.pod_groups

    @property
    def uncommitted(self) -> frozenset[str]:
        return self.providers.uncommitted

    @property
    def bind_pod(self) -> BindFn | None:
        return self.providers.bind_pod

    def allow_waiting_pods(
        self, plugin: str, namespace: str, selector: dict[str, str], gang: str = ""
    ) -> None:
        """Allow the waiting pods of `namespace` the label `selector` matches, and only
        those of `gang` when one is given (GangScheduling's pods share no label)."""
        selected = tuple(sorted(selector.items()))
        self.permit_signals.append(PermitSignal("allow", plugin, namespace, selected, gang=gang))

    def reject_waiting_pods(
        self, plugin: str, namespace: str, selector: dict[str, str], message: str
    ) -> None:
        self.permit_signals.append(
            PermitSignal("reject", plugin, namespace, tuple(sorted(selector.items())), message)
        )

    def take_permit_signals(self) -> list[PermitSignal]:
        signals, self.permit_signals = self.permit_signals, []
        return signals
