"""kube-scheduler's framework/plugins/helper/spread.go: the selector a pod's Services and
its controller give it, which PodTopologySpread's default constraints spread by."""

from __future__ import annotations

from shared.api.models import LabelSelector, LabelSelectorRequirement
from shared.api.owners import ReplicationController, Service, controller_ref
from shared.framework.interface import ClusterObjects
from shared.framework.types import PodInfo

# The owners DefaultSelector knows, by (apiVersion, kind) of the ownerReference: only
# these exact group versions count, as upstream compares GroupVersionKinds.
REPLICATION_CONTROLLER = ("v1", "ReplicationController")
REPLICA_SET = ("apps/v1", "ReplicaSet")
STATEFUL_SET = ("apps/v1", "StatefulSet")


def default_selector(pod: PodInfo, objects: ClusterObjects) -> LabelSelector:
    """helper.DefaultSelector: the merged selectors of the Services selecting the pod
    (they all match the pod, so merging cannot conflict), then its controller's: a
    ReplicationController's selector merged in as labels, a ReplicaSet's or a
    StatefulSet's spec.selector added as requirements. Empty when none applies."""
    merged: dict[str, str] = {}
    for service in pod_services(pod, objects):
        merged.update(service.spec.selector or {})
    owner = controller_ref(pod.raw)
    if owner is None:
        return LabelSelector(match_labels=merged)
    namespace, name = pod.pod.metadata.namespace, owner.get("name", "")
    kind = (owner.get("apiVersion"), owner.get("kind"))
    controller = (
        objects.controller(kind[1], namespace, name)
        if kind in (REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET)
        else None  # not owned by a controller DefaultSelector knows
    )
    if isinstance(controller, ReplicationController):
        merged.update(controller.spec.selector or {})
    elif controller is not None and controller.spec.selector is not None:
        return LabelSelector(
            match_labels=merged, match_expressions=requirements(controller.spec.selector)
        )
    return LabelSelector(match_labels=merged)


def pod_services(pod: PodInfo, objects: ClusterObjects) -> list[Service]:
    """helper.GetPodServices: the Services of the pod's namespace whose selector matches
    its labels; a Service without a selector selects nothing (an empty one, everything)."""
    labels = pod.pod.metadata.labels
    return [
        service
        for service in objects.services_in(pod.pod.metadata.namespace)
        if service.spec.selector is not None
        and all(labels.get(k) == v for k, v in service.spec.selector.items())
    ]


def requirements(selector: LabelSelector) -> list[LabelSelectorRequirement]:
    """A label selector's requirements (matchLabels as `In` one value, then
    matchExpressions), as metav1.LabelSelectorAsSelector(...).Requirements() lists them."""
    return [
        *(
            LabelSelectorRequirement(key=k, operator="In", values=[v])
            for k, v in selector.match_labels.items()
        ),
        *selector.match_expressions,
    ]
