"""The API server's validation of what a pod asks of its placement, with its messages.

pkg/apis/core/validation (1.34): ValidateTolerations, validateTopologySpreadConstraints,
validateAffinity and metav1's ValidateLabelSelector, on the pod spec as published
(see shared/api/field_checks.py). Not checked: whether a matchLabelKeys key is also
in the selector (1.34 merges those keys into the selector before it validates).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from shared.api.field_checks import (
    Errors,
    as_int,
    as_str,
    dicts,
    enum_errors,
    grammar_errors,
    label_name_errors,
    label_values_errors,
    string_map,
    strings,
)
from shared.api.models import (
    NodeInclusionPolicy,
    TaintEffect,
    TolerationOperator,
    UnsatisfiableConstraintAction,
)
from shared.api.validation import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    duplicate,
    forbidden,
    invalid,
    label_errors,
    label_value_errors,
    not_supported,
    required,
    show,
)

NOT_POSITIVE = "must be greater than zero"
WEIGHT_RANGE = "must be in the range 1-100"
NOT_AN_OPERATOR = "not a valid selector operator"
NODE_FIELD_KEY = "metadata.name"  # the one field a node selector may match


def toleration_errors(tolerations: list[Mapping[str, Any]], path: str) -> Errors:
    """ValidateTolerations."""
    errs: Errors = []
    for i, tol in enumerate(tolerations):
        at = f"{path}[{i}]"
        key, operator = as_str(tol.get("key")), as_str(tol.get("operator"))
        value, effect = as_str(tol.get("value")), as_str(tol.get("effect"))
        if key:
            errs += label_name_errors(key, f"{at}.key")
        if not key and operator != "Exists":
            errs.append(
                invalid(
                    f"{at}.operator",
                    show(operator),
                    'operator must be Exists when `key` is empty, which means "match all values '
                    'and all keys"',
                )
            )
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(
                invalid(
                    f"{at}.effect",
                    show(effect),
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
        if operator in ("Equal", ""):
            problems = label_value_errors(value)
            if problems:
                errs.append(invalid(f"{at}.operator", show(value), ";".join(problems)))
        elif operator == "Exists":
            if value:
                errs.append(
                    invalid(
                        f"{at}.operator",
                        show(value),
                        "value must be empty when `operator` is 'Exists'",
                    )
                )
        else:
            errs.append(not_supported(f"{at}.operator", operator, get_args(TolerationOperator)))
        if effect:
            errs += enum_errors(tol, "effect", get_args(TaintEffect), at)
    return errs


def topology_spread_errors(constraints: list[Mapping[str, Any]], path: str) -> Errors:
    """validateTopologySpreadConstraints."""
    errs: Errors = []
    at_list = f"{path}.topologySpreadConstraints"
    for i, tsc in enumerate(constraints):
        at = f"{at_list}[{i}]"
        skew = as_int(tsc.get("maxSkew"), absent=0)
        if skew is not None and skew <= 0:
            errs.append(invalid(f"{at}.maxSkew", show(skew), NOT_POSITIVE))
        key, when = as_str(tsc.get("topologyKey")), tsc.get("whenUnsatisfiable", "")
        if not key:
            errs.append(required(f"{at}.topologyKey", "can not be empty"))
        if isinstance(when, str) and when not in get_args(UnsatisfiableConstraintAction):
            errs.append(
                not_supported(
                    f"{at}.whenUnsatisfiable", when, get_args(UnsatisfiableConstraintAction)
                )
            )
        if any(
            as_str(o.get("topologyKey")) == key and o.get("whenUnsatisfiable", "") == when
            for o in constraints[i + 1 :]
        ):
            errs.append(duplicate(f"{at}.{{topologyKey, whenUnsatisfiable}}", f"{{{key}, {when}}}"))
        errs += _min_domains(tsc.get("minDomains"), when, f"{at}.minDomains")
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            errs += enum_errors(tsc, policy, get_args(NodeInclusionPolicy), at)
        for j, label in enumerate(strings(tsc.get("matchLabelKeys"))):
            errs += label_name_errors(label, f"{at}.matchLabelKeys[{j}]")
        errs += label_selector_errors(tsc.get("labelSelector"), f"{at}.labelSelector")
    return errs


def _min_domains(raw: Any, when: Any, path: str) -> Errors:
    """validateMinDomains: positive, and only with whenUnsatisfiable DoNotSchedule."""
    value = as_int(raw)
    if value is None:
        return []
    errs = [invalid(path, show(value), NOT_POSITIVE)] if value <= 0 else []
    if when != "DoNotSchedule":
        detail = f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {when}"
        errs.append(invalid(path, show(value), detail))
    return errs


# --- selectors and affinity ----------------------------------------------------------


def label_selector_errors(selector: Any, path: str) -> Errors:
    """metav1 ValidateLabelSelector."""
    if not isinstance(selector, Mapping):
        return []
    labels = string_map(selector.get("matchLabels"))
    errs = label_errors(labels, f"{path}.matchLabels") if labels else []
    for i, req in enumerate(dicts(selector.get("matchExpressions"))):
        errs += _requirement(req, f"{path}.matchExpressions[{i}]", check_values=True)
    return errs


def _requirement(
    req: Mapping[str, Any], path: str, *, check_values: bool, node: bool = False
) -> Errors:
    """ValidateLabelSelectorRequirement and ValidateNodeSelectorRequirement: values as
    the operator wants them, a qualified-name key, label-value values."""
    operator, values = req.get("operator"), strings(req.get("values"))
    errs: Errors = []
    if operator in ("In", "NotIn"):
        if not values:
            errs.append(
                required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
            )
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errs.append(
                forbidden(
                    f"{path}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    elif node and operator in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(
                required(
                    f"{path}.values",
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                )
            )
    else:
        shown = show("" if operator is None else operator)
        errs.append(invalid(f"{path}.operator", shown, NOT_AN_OPERATOR))
    errs += label_name_errors(as_str(req.get("key")), f"{path}.key")
    return errs + (label_values_errors(values, f"{path}.values") if check_values else [])


def affinity_errors(affinity: Any, path: str) -> Errors:
    if not isinstance(affinity, Mapping):
        return []
    errs = _node_affinity(affinity.get("nodeAffinity"), f"{path}.nodeAffinity")
    for name in ("podAffinity", "podAntiAffinity"):
        errs += _pod_affinity(affinity.get(name), f"{path}.{name}")
    return errs


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _node_affinity(affinity: Any, path: str) -> Errors:
    """validateNodeAffinity: the required selector has terms; preferred terms weigh
    1-100 (their label values are not checked: they may match nothing)."""
    if not isinstance(affinity, Mapping):
        return []
    errs: Errors = []
    selector = affinity.get(REQUIRED)
    if isinstance(selector, Mapping):
        terms = dicts(selector.get("nodeSelectorTerms"))
        at = f"{path}.{REQUIRED}.nodeSelectorTerms"
        if not terms:
            errs.append(required(at, "must have at least one node selector term"))
        for i, term in enumerate(terms):
            errs += _node_selector_term(term, f"{at}[{i}]", check_values=True)
    for i, pref in enumerate(dicts(affinity.get(PREFERRED))):
        at = f"{path}.{PREFERRED}[{i}]"
        errs += _weight(pref, at)
        preference = pref.get("preference")
        if isinstance(preference, Mapping):
            errs += _node_selector_term(preference, f"{at}.preference", check_values=False)
    return errs


def _node_selector_term(term: Mapping[str, Any], path: str, *, check_values: bool) -> Errors:
    errs: Errors = []
    for j, req in enumerate(dicts(term.get("matchExpressions"))):
        errs += _requirement(
            req, f"{path}.matchExpressions[{j}]", check_values=check_values, node=True
        )
    for j, req in enumerate(dicts(term.get("matchFields"))):
        errs += _field_requirement(req, f"{path}.matchFields[{j}]")
    return errs


def _field_requirement(req: Mapping[str, Any], path: str) -> Errors:
    """ValidateNodeFieldSelectorRequirement: metadata.name In/NotIn one node name."""
    operator, values = req.get("operator"), strings(req.get("values"))
    errs: Errors = []
    if operator in ("In", "NotIn"):
        if len(values) != 1:
            errs.append(
                required(
                    f"{path}.values",
                    "must be only one value when `operator` is 'In' or 'NotIn' "
                    "for node field selector",
                )
            )
    else:
        shown = show("" if operator is None else operator)
        errs.append(invalid(f"{path}.operator", shown, NOT_AN_OPERATOR))
    key = req.get("key")
    if key != NODE_FIELD_KEY:
        errs.append(invalid(f"{path}.key", show(as_str(key)), "not a valid field selector key"))
    else:
        for i, value in enumerate(values):
            errs += grammar_errors(value, f"{path}.values[{i}]", dns1123_subdomain_errors)
    return errs


def _weight(term: Mapping[str, Any], path: str) -> Errors:
    weight = as_int(term.get("weight"), absent=0)
    if weight is not None and not 1 <= weight <= 100:
        return [invalid(f"{path}.weight", show(weight), WEIGHT_RANGE)]
    return []


def _pod_affinity(affinity: Any, path: str) -> Errors:
    """validatePodAffinity and validatePodAntiAffinity."""
    if not isinstance(affinity, Mapping):
        return []
    errs: Errors = []
    for i, term in enumerate(dicts(affinity.get(REQUIRED))):
        errs += _pod_affinity_term(term, f"{path}.{REQUIRED}[{i}]")
    for i, weighted in enumerate(dicts(affinity.get(PREFERRED))):
        at = f"{path}.{PREFERRED}[{i}]"
        errs += _weight(weighted, at)
        inner = weighted.get("podAffinityTerm")
        if isinstance(inner, Mapping):
            errs += _pod_affinity_term(inner, f"{at}.podAffinityTerm")
    return errs


def _pod_affinity_term(term: Mapping[str, Any], path: str) -> Errors:
    """validatePodAffinityTerm: selectors, namespaces, label keys, a topology key."""
    selector = term.get("labelSelector")
    errs = label_selector_errors(selector, f"{path}.labelSelector")
    errs += label_selector_errors(term.get("namespaceSelector"), f"{path}.namespaceSelector")
    for namespace in strings(term.get("namespaces")):
        # sic: the API server reports a namespace at ".namespace", singular
        errs += grammar_errors(namespace, f"{path}.namespace", dns1123_label_errors)
    for name in ("matchLabelKeys", "mismatchLabelKeys"):
        errs += _label_keys(strings(term.get(name)), selector, f"{path}.{name}")
    key = as_str(term.get("topologyKey"))
    if not key:
        errs.append(required(f"{path}.topologyKey", "can not be empty"))
    return errs + label_name_errors(key, f"{path}.topologyKey")


def _label_keys(keys: list[str], selector: Any, path: str) -> Errors:
    """validateLabelKeys: label names, and only beside a label selector."""
    if keys and not isinstance(selector, Mapping):
        return [forbidden(path, "must not be specified when labelSelector is not set")]
    return [e for j, key in enumerate(keys) for e in label_name_errors(key, f"{path}[{j}]")]
