"""Preemption's dry run by arithmetic, for preemptors only resources can stop.

DefaultPreemption's general dry run (SelectVictimsOnNode) works on copies of the
node and the cycle state and runs every Filter plugin after each removal and
reprieve. When no Filter plugin of the cycle reads the node's pods except
NodeResourcesFit, the outcome depends on resource sums and pod counts only; then
a node is just those amounts, and NodeResourcesFit's own check (fits_amounts)
decides: the same victims, violations and statuses, without a copy or a plugin
run per step.

It applies to a cycle when:
- no PreFilter plugin that ran has PreFilterExtensions, so AddPod/RemovePod have
  nothing to update nor a way to fail: InterPodAffinity and PodTopologySpread
  (the default plugins with extensions) Skipped, i.e. the preemptor has no
  required pod (anti-)affinity, no hard spread constraint, and no placed pod's
  anti-affinity matches it;
- no pod in the cluster has required anti-affinity at all (belt and braces
  beside the Skip above);
- every Filter plugin that runs is NodeResourcesFit, one that reads only the node
  object and the preemptor (`_NODE_ONLY`), or NodePorts for a preemptor that asks
  for no host port (then the node's ports cannot conflict).
It applies to a node when adding its nominated pods adds pods rather than
replacing one (NodeInfo.add_pod of a key already there swaps the accounting).

Two users: DefaultPreemption's SelectVictimsOnNode, and the framework's batch Filter,
which counts a node's nominated pods the same way. It names the in-tree Filter
plugins that read only the node, so this framework module imports those plugins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shared.framework.cycle_state import CycleState
from shared.framework.handle import FilterRunner
from shared.framework.interface import AmountsFilter, FilterPlugin, NodeOnlyFilter
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import SUCCESS, Status
from shared.framework.types import NodeInfo, PodInfo


def _reads_only_the_node(plugin: FilterPlugin, pod: PodInfo) -> bool:
    """The plugin says its verdict reads the node object and the pod, never its pods
    (interface.NodeOnlyFilter); the framework knows no plugin by name."""
    return isinstance(plugin, NodeOnlyFilter) and plugin.reads_only_the_node(pod)


class ResourceDryRun:
    """The fast path for one preemptor in one cycle; `node` gives each node's copy."""

    def __init__(
        self,
        runner: FilterRunner,
        state: CycleState,
        pod: PodInfo,
        filters: list[FilterPlugin],
        fit: AmountsFilter,
        node_to_status: Mapping[str, Status],
    ) -> None:
        self.runner = runner
        self.state = state
        self.pod = pod
        self.filters = filters  # as run_filter_plugins runs them, `fit` among them
        self.fit = fit
        self.wanted = fit.checked_requests(state, pod)
        # Where Filter stopped at NodeResourcesFit, the plugins before it passed, and
        # those read only the node: they pass in the dry run too.
        self.from_fit = filters[filters.index(fit) :]
        self.node_to_status = node_to_status

    @classmethod
    def plan(
        cls,
        runner: FilterRunner,
        snapshot: ClusterSnapshot,
        state: CycleState,
        pod: PodInfo,
        node_to_status: Mapping[str, Status] | None = None,
    ) -> ResourceDryRun | None:
        """The fast path for this preemptor, or None where only the general one is exact.
        `node_to_status`: the cycle's Filter statuses, if known."""
        if snapshot.has_pods_with_required_anti_affinity:
            return None
        if runner.runs_pre_filter_extensions(state):
            return None
        filters = runner.active_filters(state)
        amounts = [p for p in filters if isinstance(p, AmountsFilter)]
        if len(amounts) != 1:
            return None
        fit = amounts[0]
        if not all(p is fit or _reads_only_the_node(p, pod) for p in filters):
            return None
        return cls(runner, state, pod, filters, fit, node_to_status or {})

    def node(self, node: NodeInfo, nominated: list[PodInfo] | None = None) -> ResourceNode | None:
        """The node's copy for the dry run; None where the general path must run.
        `nominated`: the node's nominated pods for this pod, if the caller has them."""
        if nominated is None:
            nominated = self.runner.nominated_pods_for(self.pod, node.name)
        keys = {p.key for p in nominated}
        if len(keys) < len(nominated) or not keys.isdisjoint(node.pods):
            return None
        status = self.node_to_status.get(node.name)
        rejected_by_fit = status is not None and status.rejected and status.plugin == self.fit.name
        return ResourceNode(
            self, node, nominated, self.from_fit if rejected_by_fit else self.filters
        )


class ResourceNode:
    """A node as the amounts NodeResourcesFit checks, with the nominated pods Filter
    counts there already added (they stay: only lower-priority pods are victims)."""

    def __init__(
        self,
        run: ResourceDryRun,
        node: NodeInfo,
        nominated: list[PodInfo],
        filters: list[FilterPlugin],
    ) -> None:
        self.run = run
        self.node = node
        self.filters = filters  # those that may reject here, in order
        self.num_pods = len(node.pods)
        self.requested = {name: node.requested.get(name, 0) for name, _ in run.wanted}
        if nominated:
            self.num_pods, self.requested = self._with(nominated, 1)

    def _with(self, pods: Sequence[PodInfo], sign: int) -> tuple[int, dict[str, int]]:
        """The pod count and requested amounts with `pods` added (1) or taken off (-1)."""
        requested = dict(self.requested)
        for pod in pods:
            requests = pod.resources.requests
            for name in requested:
                requested[name] += sign * requests.get(name, 0)
        return self.num_pods + sign * len(pods), requested

    def remove_all(self, victims: Sequence[PodInfo]) -> Status:
        """Take every victim off; the preemptor's Filter status on what is left, as
        run_filter_plugins gives it: the first plugin that rejects, in the cycle's order.
        (Without the nominated pods the node has more room: that run passes too.)"""
        self.num_pods, self.requested = self._with(victims, -1)
        run = self.run
        for plugin in self.filters:
            if plugin is run.fit:
                status = self.fit_status()
            else:
                status = run.runner.run_filter_plugin(plugin, run.state, run.pod, self.node)
            if not status.ok:
                return status
        return SUCCESS

    def fit_status(self) -> Status:
        """NodeResourcesFit's Filter status on the amounts as they stand now."""
        run = self.run
        return run.fit.status_on_amounts(
            run.wanted, self.num_pods, self.requested, self.node.allocatable
        )

    def reprieve(self, victim: PodInfo) -> tuple[bool, Status]:
        """Put `victim` back if the pod still fits with it; else it stays off (a victim).
        Only NodeResourcesFit can change its mind: the others passed in remove_all."""
        num_pods, requested = self._with((victim,), 1)
        if self.run.fit.lacks_on_amounts(
            self.run.wanted, num_pods, requested, self.node.allocatable
        ):
            return False, SUCCESS
        self.num_pods, self.requested = num_pods, requested
        return True, SUCCESS
