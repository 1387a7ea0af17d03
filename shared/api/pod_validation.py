"""The API server's validation of a pod spec on create, with its messages.

pkg/apis/core/validation's ValidatePodSpec (1.34), for what a scheduler's users
get wrong and ksched would otherwise take: containers (required, names, images,
ports, pull and termination-message policies, init containers' restartPolicy),
the pod's restartPolicy, dnsPolicy and preemptionPolicy, scheduling gates,
priorityClassName, activeDeadlineSeconds and os; what the pod asks of its placement
(tolerations, topology spread, affinity) is shared/api/scheduling_validation.py.
Not checked: ephemeral containers, volumes, env, probes and lifecycle handlers,
security contexts, resource values (quantities are the models'; pod-level
spec.resources has its own module); a negative terminationGracePeriodSeconds, which
the API server takes as 1.

Works on the object as published (camelCase JSON): a value of the wrong JSON type
is left to the models, which refuse it in the decoder's words. The API server
validates after defaulting, so an enum left empty is its default, not an error.
Errors are field.Error strings, in the order ValidatePodSpec finds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from shared.api import field_checks as fields
from shared.api.field_checks import Errors
from shared.api.models import PreemptionPolicy, Protocol
from shared.api.scheduling_validation import (
    affinity_errors,
    toleration_errors,
    topology_spread_errors,
)
from shared.api.validation import (
    INT32_MAX,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    duplicate,
    forbidden,
    inclusive_range,
    invalid,
    label_errors,
    not_supported,
    required,
    show,
)
from shared.api.workload import scheduling_group_errors, workload_ref_errors

# Enumerations ksched's models do not read, in the order the messages list them.
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
INIT_CONTAINER_RESTART_POLICIES = ("Always",)
OPERATING_SYSTEMS = ("linux", "windows")
PORT_RANGE = inclusive_range(1, 65535)


def pod_spec_errors(spec: Any, path: str = "spec", *, node_selector: bool = False) -> Errors:
    """ValidatePodSpec's errors for a pod spec (or a pod template's, at its path); the
    label grammar of spec.nodeSelector too when `node_selector` (the door checks it with
    the pod's labels, after the models)."""
    if spec is None:
        spec = {}  # no spec at all: what it requires is missing
    if not isinstance(spec, Mapping):
        return []
    errs = _containers(spec, path) + _init_containers(spec, path)
    errs += fields.enum_errors(spec, "restartPolicy", RESTART_POLICIES, path)
    errs += fields.enum_errors(spec, "dnsPolicy", DNS_POLICIES, path)
    selector = fields.string_map(spec.get("nodeSelector"))
    if node_selector and selector:
        errs += label_errors(selector, f"{path}.nodeSelector")
    errs += affinity_errors(spec.get("affinity"), f"{path}.affinity")
    errs += _dns_config(spec, f"{path}.dnsConfig")
    errs += _scheduling_gates(fields.dicts(spec.get("schedulingGates")), f"{path}.schedulingGates")
    errs += topology_spread_errors(fields.dicts(spec.get("topologySpreadConstraints")), path)
    errs += workload_ref_errors(spec.get("workloadRef"), f"{path}.workloadRef")
    errs += scheduling_group_errors(spec.get("schedulingGroup"), f"{path}.schedulingGroup")
    errs += _active_deadline(spec.get("activeDeadlineSeconds"), f"{path}.activeDeadlineSeconds")
    for name in ("hostname", "subdomain"):
        errs += fields.grammar_errors(spec.get(name), f"{path}.{name}", dns1123_label_errors)
    errs += toleration_errors(fields.dicts(spec.get("tolerations")), f"{path}.tolerations")
    errs += fields.grammar_errors(
        spec.get("priorityClassName"), f"{path}.priorityClassName", dns1123_subdomain_errors
    )
    policy = spec.get("preemptionPolicy")
    if policy == "":
        errs.append(required(f"{path}.preemptionPolicy"))
    elif policy is not None:
        errs += fields.enum_errors(spec, "preemptionPolicy", get_args(PreemptionPolicy), path)
    errs += _os(spec.get("os"), f"{path}.os")
    return errs


def _dns_config(spec: Mapping[str, Any], path: str) -> Errors:
    """validatePodDNSConfig, for dnsPolicy None: it needs a nameserver of its own."""
    if spec.get("dnsPolicy") != "None":
        return []
    config = spec.get("dnsConfig")
    if not isinstance(config, Mapping):
        return [required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
    if not config.get("nameservers"):
        detail = "must provide at least one DNS nameserver when `dnsPolicy` is None"
        return [required(f"{path}.nameservers", detail)]
    return []


# --- containers -------------------------------------------------------------------------


def _containers(spec: Mapping[str, Any], path: str) -> Errors:
    """validateContainers: at least one; names unique; restartPolicy only on init
    containers; no two containers on one host port."""
    raw = spec.get("containers")
    at = f"{path}.containers"
    if raw is None or raw == []:
        return [required(at)]
    errs: Errors = []
    names: set[str] = set()
    for i, ctr in enumerate(fields.dicts(raw)):
        errs += _container_common(ctr, f"{at}[{i}]")
        name = fields.as_str(ctr.get("name"))
        if name in names:
            errs.append(duplicate(f"{at}[{i}].name", name))
        names.add(name)
        if ctr.get("restartPolicy") is not None:
            errs.append(
                forbidden(f"{at}[{i}].restartPolicy", "may not be set for non-init containers")
            )
    return errs + _host_port_conflicts(list(enumerate(fields.dicts(raw))), at)


def _init_containers(spec: Mapping[str, Any], path: str) -> Errors:
    """validateInitContainers: names unique among all containers, restartPolicy Always
    (a sidecar) or none, probes and lifecycle hooks only on sidecars."""
    at = f"{path}.initContainers"
    names = {fields.as_str(c.get("name")) for c in fields.dicts(spec.get("containers"))}
    errs: Errors = []
    for i, ctr in enumerate(fields.dicts(spec.get("initContainers"))):
        errs += _container_common(ctr, f"{at}[{i}]")
        policy = ctr.get("restartPolicy")
        if policy is not None and policy not in INIT_CONTAINER_RESTART_POLICIES:
            errs.append(
                not_supported(f"{at}[{i}].restartPolicy", policy, INIT_CONTAINER_RESTART_POLICIES)
            )
        name = fields.as_str(ctr.get("name"))
        if name in names:
            errs.append(duplicate(f"{at}[{i}].name", name))
        elif name:
            names.add(name)
        errs += _host_port_conflicts([(i, ctr)], at)  # init containers run one at a time
        if policy != "Always":
            for hook in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
                if ctr.get(hook) is not None:
                    errs.append(
                        forbidden(
                            f"{at}[{i}].{hook}",
                            "may not be set for init containers without restartPolicy=Always",
                        )
                    )
    return errs


def _container_common(ctr: Mapping[str, Any], path: str) -> Errors:
    """validateContainerCommon: name, image, policies, ports."""
    name = ctr.get("name")
    if name is None or name == "":
        errs = [required(f"{path}.name")]
    else:
        errs = fields.grammar_errors(name, f"{path}.name", dns1123_label_errors)
    if ctr.get("image") is None or ctr.get("image") == "":
        errs.append(required(f"{path}.image"))
    errs += fields.enum_errors(ctr, "terminationMessagePolicy", TERMINATION_MESSAGE_POLICIES, path)
    errs += _ports(fields.dicts(ctr.get("ports")), f"{path}.ports")
    errs += fields.enum_errors(ctr, "imagePullPolicy", PULL_POLICIES, path)
    return errs


def _ports(ports: list[Mapping[str, Any]], path: str) -> Errors:
    """validateContainerPorts."""
    errs: Errors = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        at = f"{path}[{i}]"
        name = fields.as_str(port.get("name"))
        if name:
            problems = port_name_errors(name)
            if problems:
                errs += [invalid(f"{at}.name", show(name), m) for m in problems]
            elif name in names:
                errs.append(duplicate(f"{at}.name", name))
            else:
                names.add(name)
        number = port.get("containerPort")
        if number is None or number == 0:
            errs.append(required(f"{at}.containerPort"))
        elif fields.as_int(number) is not None and not 1 <= number <= 65535:
            errs.append(invalid(f"{at}.containerPort", show(number), PORT_RANGE))
        host = fields.as_int(port.get("hostPort"))
        if host and not 1 <= host <= 65535:
            errs.append(invalid(f"{at}.hostPort", show(host), PORT_RANGE))
        errs += fields.enum_errors(port, "protocol", get_args(Protocol), at)
    return errs


def port_name_errors(name: str) -> list[str]:
    """validation.IsValidPortName (an IANA service name)."""
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 characters")
    if not all(c.isascii() and (c.isdigit() or c.islower() or c == "-") for c in name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not any(c.isascii() and c.islower() for c in name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _host_port_conflicts(containers: list[tuple[int, Mapping[str, Any]]], path: str) -> Errors:
    """AccumulateUniqueHostPorts: one protocol/hostIP/hostPort per pod."""
    errs: Errors = []
    seen: set[str] = set()
    for i, ctr in containers:
        for j, port in enumerate(fields.dicts(ctr.get("ports"))):
            host = fields.as_int(port.get("hostPort"))
            if not host:
                continue
            protocol = fields.as_str(port.get("protocol")) or "TCP"  # defaulted
            key = f"{protocol}/{fields.as_str(port.get('hostIP'))}/{host}"
            if key in seen:
                errs.append(duplicate(f"{path}[{i}].ports[{j}].hostPort", key))
            seen.add(key)
    return errs


def _scheduling_gates(gates: list[Mapping[str, Any]], path: str) -> Errors:
    """validateSchedulingGates: qualified names, each once."""
    errs: Errors = []
    seen: set[str] = set()
    for i, gate in enumerate(gates):
        name = fields.as_str(gate.get("name"))
        errs += fields.label_name_errors(name, f"{path}[{i}]")
        if name in seen:
            errs.append(duplicate(f"{path}[{i}]", name))
        seen.add(name)
    return errs


def _active_deadline(raw: Any, path: str) -> Errors:
    value = fields.as_int(raw)
    if value is None or 1 <= value <= INT32_MAX:
        return []
    return [invalid(path, show(value), inclusive_range(1, INT32_MAX))]


def _os(os: Any, path: str) -> Errors:
    """validateOS (the error is on spec.os itself)."""
    if not isinstance(os, Mapping):
        return []
    name = os.get("name")
    if name is None or name == "":
        return [required(f"{path}.name", "cannot be empty")]
    if isinstance(name, str) and name not in OPERATING_SYSTEMS:
        return [not_supported(path, name, OPERATING_SYSTEMS)]
    return []
