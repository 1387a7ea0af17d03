"""What PodTopologySpread's phases share (kube-scheduler's common.go): a constraint with
its selector resolved, which nodes' domains count for a pod, and the matching pods of
a node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from shared.api.models import LabelSelector, LabelSelectorRequirement, TopologySpreadConstraint
from shared.framework.selectors import label_selector_matches
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.nodeaffinity import required_node_affinity_matches
from shared.plugins.tainttoleration import tolerates_hard_taints

LABEL_HOSTNAME = "kubernetes.io/hostname"
DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"


@dataclass(frozen=True, eq=False)
class Constraint:
    """topologySpreadConstraint: a constraint with its selector resolved.

    `selector` None is labels.Nothing() (a constraint without labelSelector)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"

    def matches(self, labels: Mapping[str, str]) -> bool:
        return label_selector_matches(self.selector, labels)

    @property
    def selector_empty(self) -> bool:
        """labels.Selector.Empty(): no requirements (Nothing is not empty)."""
        sel = self.selector
        return sel is not None and not sel.match_labels and not sel.match_expressions

    def includes(self, pod: PodInfo, node: NodeInfo) -> bool:
        """matchNodeInclusionPolicies: whether the node's domain counts for this pod."""
        if self.node_affinity_policy == "Honor" and not required_node_affinity_matches(pod, node):
            return False
        # DoNotScheduleTaintsFilterFunc: PreferNoSchedule taints never exclude a node.
        return self.node_taints_policy != "Honor" or tolerates_hard_taints(
            node.node.spec.taints, pod.pod.spec.tolerations
        )

    def with_selector(self, selector: LabelSelector) -> Constraint:
        return Constraint(
            self.max_skew,
            self.topology_key,
            selector,
            self.min_domains,
            self.node_affinity_policy,
            self.node_taints_policy,
        )


def _merge_match_label_keys(
    selector: LabelSelector | None, keys: list[str], pod_labels: Mapping[str, str]
) -> LabelSelector | None:
    """mergeLabelSetWithSelector: the pod's values of matchLabelKeys become requirements
    added to the selector (ANDed, so a conflicting matchLabels value matches nothing)."""
    extra = [
        LabelSelectorRequirement(key=k, operator="In", values=[pod_labels[k]])
        for k in keys
        if k in pod_labels
    ]
    if not extra or selector is None:  # Nothing has no requirements to merge into
        return selector
    return LabelSelector(
        match_labels=dict(selector.match_labels),
        match_expressions=[*selector.match_expressions, *extra],
    )


def filter_constraints(
    raw: list[TopologySpreadConstraint], pod_labels: Mapping[str, str], action: str
) -> list[Constraint]:
    """filterTopologySpreadConstraints: the constraints of one whenUnsatisfiable action."""
    return [
        Constraint(
            c.max_skew,
            c.topology_key,
            _merge_match_label_keys(c.label_selector, c.match_label_keys, pod_labels),
            c.min_domains or 1,
            c.node_affinity_policy or "Honor",
            c.node_taints_policy or "Ignore",
        )
        for c in raw
        if c.when_unsatisfiable == action
    ]


def has_all_keys(labels: Mapping[str, str], constraints: list[Constraint]) -> bool:
    """nodeLabelsMatchSpreadConstraints."""
    return all(c.topology_key in labels for c in constraints)


def count_matching(node: NodeInfo, constraint: Constraint, namespace: str) -> int:
    """countPodsMatchSelector: an empty selector counts nothing; terminating pods and
    pods of other namespaces do not count."""
    if constraint.selector_empty:
        return 0
    return sum(
        1
        for p in node.pods.values()
        if p.pod.metadata.deletion_timestamp is None
        and p.pod.metadata.namespace == namespace
        and constraint.matches(p.pod.metadata.labels)
    )
