"""The API server's Priority admission, as ksched's watcher applies it to pods.

A pod names its priority by PriorityClass (spec.priorityClassName); admission
resolves the name to spec.priority (and spec.preemptionPolicy, when the class sets
one and the pod does not), refuses a name no class has, and gives a pod without a
name the globalDefault class, or priority 0 when there is none (left unwritten: an
absent priority is 0). The two system classes always exist. As upstream, a pod that
names a class and states a priority or preemption policy other than the class's is
refused; unlike upstream, a pod published on NATS that names no class keeps a
priority it states (`strict` admission, what `ksched apply` and `create` meet as
kubectl users do, refuses it like upstream when it differs from the computed one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.api.events import ClusterEvent
from shared.api.models import Pod, PriorityClass

# kube's scheduling.SystemClusterCritical / SystemNodeCritical and their values
SYSTEM_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
DEFAULT_PRIORITY = 0  # scheduling.DefaultPriorityWhenNoDefaultClassExists


class Refused(ValueError):
    """Admission refuses the pod; str(err) is the API server's message."""


@dataclass(frozen=True)
class Resolved:
    name: str
    value: int
    preemption_policy: str | None


class PriorityClasses:
    """The PriorityClasses the watcher has seen (an informer's view), and admission."""

    def __init__(self) -> None:
        self._classes: dict[str, PriorityClass] = {}
        # global_default(), kept until the classes change: every pod without a class asks
        self._default: tuple[Resolved | None] | None = None

    def __len__(self) -> int:
        return len(self._classes)

    def upsert(self, pc: PriorityClass) -> None:
        self._classes[pc.metadata.name] = pc
        self._default = None

    def delete(self, name: str) -> None:
        self._classes.pop(name, None)
        self._default = None

    def resolve(self, name: str) -> Resolved | None:
        if name in SYSTEM_CLASSES:
            return Resolved(name, SYSTEM_CLASSES[name], None)
        pc = self._classes.get(name)
        return None if pc is None else Resolved(name, pc.value, pc.preemption_policy)

    def global_default(self) -> Resolved | None:
        """The globalDefault class (the lowest value if several claim it, as upstream)."""
        if self._default is None:
            self._default = (self._global_default(),)
        return self._default[0]

    def _global_default(self) -> Resolved | None:
        defaults = [pc for pc in self._classes.values() if pc.global_default]
        if not defaults:
            return None
        pc = min(defaults, key=lambda c: c.value)
        return Resolved(pc.metadata.name, pc.value, pc.preemption_policy)

    def admit(self, raw_pod: dict[str, Any], *, strict: bool = False) -> dict[str, Any]:
        """The pod as admission leaves it (a copy when it changes); Refused if refused."""
        spec = raw_pod.get("spec") or {}
        meta = raw_pod.get("metadata") or {}
        forbidden = f'pods "{meta.get("name") or meta.get("generateName") or ""}" is forbidden: '
        name = spec.get("priorityClassName") or ""
        if not name and spec.get("priority") is not None and not strict:
            return raw_pod  # ksched's leniency: a priority stated without a class stands
        resolved = self.resolve(name) if name else self.global_default()
        if name and resolved is None:
            raise Refused(f"{forbidden}no PriorityClass with name {name} was found")
        value = DEFAULT_PRIORITY if resolved is None else resolved.value
        stated = spec.get("priority")
        if stated is not None and stated != value:
            raise Refused(
                f"{forbidden}the integer value of priority ({stated}) must not be provided "
                f"in pod spec; priority admission controller computed {value} from the "
                "given PriorityClass name"
            )
        if resolved is None:
            return raw_pod  # no class, no default: priority DEFAULT_PRIORITY, as absent means
        updated = dict(spec)
        updated["priorityClassName"] = resolved.name
        policy = resolved.preemption_policy
        stated_policy = spec.get("preemptionPolicy")
        if policy is not None and stated_policy is not None and stated_policy != policy:
            raise Refused(
                f"{forbidden}the string value of PreemptionPolicy ({stated_policy}) must not be "
                f"provided in pod spec; priority admission controller computed {policy} "
                "from the given PriorityClass name"
            )
        if policy is not None:
            updated["preemptionPolicy"] = policy
        if stated is None:
            updated["priority"] = value
        return raw_pod if updated == spec else {**raw_pod, "spec": updated}


def admit_event(classes: PriorityClasses, ev: ClusterEvent) -> str | None:
    """A watch event through admission: a PriorityClass is remembered; a pod has its
    priorityClassName resolved (`ev.raw` becomes the admitted pod), or the reason it
    is refused."""
    if isinstance(ev.obj, PriorityClass):
        if ev.type == "DELETED":
            classes.delete(ev.obj.metadata.name)
        else:
            classes.upsert(ev.obj)
    elif isinstance(ev.obj, Pod) and ev.type != "DELETED":
        try:
            ev.raw = classes.admit(ev.raw)
        except Refused as err:
            return str(err)
    return None
