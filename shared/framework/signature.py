"""Pod scheduling signatures (KEP-5598's SignPod): two pods with the same signature get
the same Filter verdicts and raw Scores on every node of the same cluster state.

A signature is the schedulerName plus fragments from every PreFilter, Filter, PreScore
and Score plugin of the profile; each plugin signs the pod fields it reads (sign_pod).
A plugin without sign_pod turns signatures off for the whole profile (it could read
anything), and a plugin may refuse a pod (sign_pod returns None): its verdicts for
that pod read other nodes (inter-pod affinity terms, topology spreading), so a result
cannot be carried from one pod to the next. Fragments are taken from the raw pod, so
that equal fragments mean equal inputs (two spellings of one quantity only lose a reuse).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from shared.framework.interface import Plugin, SignFragment, SignPlugin
from shared.framework.types import PodInfo
from shared.wire import pack

# Fragment keys (upstream's *SignerName constants)
SCHEDULER_NAME = "SchedulerName"
NODE_NAME = "NodeName"
RESOURCES = "Resources"  # containers (requests, host ports, images), overhead, ...
TOLERATIONS = "Tolerations"
NODE_AFFINITY = "NodeAffinity"  # nodeSelector and affinity.nodeAffinity
POD_IDENTITY = "PodIdentity"  # namespace and labels: what other pods' terms match

_RESOURCE_FIELDS = ("containers", "initContainers", "overhead", "resources")


def _spec(pod: PodInfo) -> dict[str, Any]:
    spec = pod.raw.get("spec")
    return spec if isinstance(spec, dict) else {}


def node_name_fragment(pod: PodInfo) -> SignFragment:
    return (NODE_NAME, _spec(pod).get("nodeName"))


def resources_fragment(pod: PodInfo) -> SignFragment:
    spec = _spec(pod)
    return (RESOURCES, [spec.get(f) for f in _RESOURCE_FIELDS])


def tolerations_fragment(pod: PodInfo) -> SignFragment:
    return (TOLERATIONS, _spec(pod).get("tolerations"))


def node_affinity_fragment(pod: PodInfo) -> SignFragment:
    spec = _spec(pod)
    affinity = spec.get("affinity") or {}
    return (NODE_AFFINITY, [spec.get("nodeSelector"), affinity.get("nodeAffinity")])


def pod_identity_fragment(pod: PodInfo) -> SignFragment:
    meta = pod.raw.get("metadata") or {}
    return (POD_IDENTITY, [meta.get("namespace"), meta.get("labels")])


class Signer:
    """SignPod of one profile: the plugins that sign, or None if one of them cannot."""

    def __init__(self, scheduler_name: str, candidates: Iterable[Plugin]) -> None:
        self.scheduler_name = scheduler_name
        signers: dict[str, SignPlugin] = {}
        self.unsupported: list[str] = []
        for plugin in candidates:
            if plugin.name in signers or plugin.name in self.unsupported:
                continue
            if isinstance(plugin, SignPlugin):
                signers[plugin.name] = cast(SignPlugin, plugin)
            else:
                self.unsupported.append(plugin.name)
        self.plugins = list(signers.values())

    @property
    def enabled(self) -> bool:
        return not self.unsupported

    def sign(self, pod: PodInfo) -> bytes | None:
        """The pod's signature, or None: it cannot be compared with other pods."""
        if self.unsupported:
            return None
        sig: dict[str, Any] = {SCHEDULER_NAME: self.scheduler_name}
        for plugin in self.plugins:
            fragments = plugin.sign_pod(pod)
            if fragments is None:
                return None
            # A key names the pod fields, whichever plugins read them: stored once.
            sig.update(fragments)
        try:
            # msgpack keeps the raw objects' key order: pods of one template serialize
            # alike, and two orders of the same fields only lose a reuse.
            return pack(sig)
        except (TypeError, ValueError):  # not plain data: not comparable
            return None
