"""Why a pod fits nowhere, and kube-scheduler's FailedScheduling message for it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from shared.framework.status import Status

NO_NODES_AVAILABLE = "no nodes available to schedule pods"


@dataclass
class Diagnosis:
    node_to_status: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""


class FitError(Exception):
    def __init__(self, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__(pod_key)
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def message(self) -> str:
        """kube-scheduler's FitError.Error()."""
        if self.num_all_nodes == 0:
            return NO_NODES_AVAILABLE
        prefix = f"0/{self.num_all_nodes} nodes are available"
        if self.diagnosis.pre_filter_msg:
            msg = f"{prefix}: {self.diagnosis.pre_filter_msg}."
        else:
            histogram = Counter(
                reason
                for status in self.diagnosis.node_to_status.values()
                for reason in status.reasons
            )
            parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
            msg = f"{prefix}: {', '.join(parts)}."
        if self.diagnosis.post_filter_msg:
            msg += " " + self.diagnosis.post_filter_msg
        return msg
