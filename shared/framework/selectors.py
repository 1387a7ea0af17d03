"""Label and node selector matching, as apimachinery's labels.Selector and
component-helpers' nodeaffinity evaluate them.

Requirements are validated as labels.NewRequirement does (qualified-name keys,
label-value values, value counts per operator, integers for Gt/Lt); error
messages are field.Error strings ("<path>: Invalid value: ...") so that
callers can report them the way kube-scheduler does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.api.models import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
)
from shared.api.validation import (
    aggregate,
    go_quote,
    invalid,
    label_value_errors,
    qualified_name_errors,
)

OBJECT_NAME_FIELD = "metadata.name"  # metav1.ObjectNameField, the only node field

_GO_INT_RE = re.compile(r"[+-]?[0-9]+")  # strconv.ParseInt(s, 10, 64): no spaces, no '_'


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64); None where Go returns an error."""
    if not _GO_INT_RE.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


# --- field.Error formatting --------------------------------------------------


def _go_strings(values: Sequence[str]) -> str:
    """%#v of a []string ([]string(nil) for none: the field was left out)."""
    if not values:
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def not_supported(path: str, value: str, supported: Sequence[str] = ()) -> str:
    """field.NotSupported(path, value, supported).Error()."""
    msg = f"{path}: Unsupported value: {go_quote(value)}"
    if supported:
        msg += ": supported values: " + ", ".join(go_quote(s) for s in supported)
    return msg


# --- labels.Requirement -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """A validated labels.Requirement: In, NotIn, Exists, DoesNotExist, Gt, Lt (Equals is
    In with one value)."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()
    bound: int = 0  # Gt / Lt

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        # Gt / Lt: a missing or non-integer label never matches.
        have = parse_int64(value) if value is not None else None
        if have is None:
            return False
        return have > self.bound if op == "Gt" else have < self.bound


def requirement_errors(key: str, operator: str, values: Sequence[str], path: str = "") -> list[str]:
    """labels.NewRequirement's validation, in its order."""
    errs = []
    key_problems = qualified_name_errors(key)
    if key_problems:
        errs.append(invalid(_child(path, "key"), go_quote(key), "; ".join(key_problems)))
    values_path = _child(path, "values")
    if operator in ("In", "NotIn") and not values:
        detail = "for 'in', 'notin' operators, values set can't be empty"
        errs.append(invalid(values_path, _go_strings(values), detail))
    elif operator in ("Exists", "DoesNotExist") and values:
        detail = "values set must be empty for exists and does not exist"
        errs.append(invalid(values_path, _go_strings(values), detail))
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            detail = "for 'Gt', 'Lt' operators, exactly one value is required"
            errs.append(invalid(values_path, _go_strings(values), detail))
        for i, value in enumerate(values):
            if parse_int64(value) is None:
                detail = "for 'Gt', 'Lt' operators, the value must be an integer"
                errs.append(invalid(f"{values_path}[{i}]", go_quote(value), detail))
    for i, value in enumerate(values):
        problems = label_value_errors(value)
        if problems:
            errs.append(invalid(f"{values_path}[{i}][{key}]", go_quote(value), "; ".join(problems)))
    return list(dict.fromkeys(errs))  # field.ErrorList.ToAggregate drops duplicates


def _requirement(key: str, operator: str, values: Sequence[str]) -> Requirement:
    bound = parse_int64(values[0]) if operator in ("Gt", "Lt") else None
    return Requirement(key, operator, frozenset(values), bound or 0)


# --- metav1.LabelSelector ---------------------------------------------------


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector: a nil selector matches nothing, an empty one everything.

    Assumes a valid selector (see `label_selector_error`); matching follows
    labels.Requirement.Matches for each requirement.
    """
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(label_requirement_matches(r, labels) for r in selector.match_expressions)


def label_requirement_matches(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    return value is None  # DoesNotExist


def label_selector_error(selector: LabelSelector | None) -> str | None:
    """The error metav1.LabelSelectorAsSelector returns for the selector (None: valid).

    Like Go, stops at the first invalid requirement: matchLabels, then matchExpressions.
    """
    if selector is None:
        return None
    for key, value in selector.match_labels.items():
        errs = requirement_errors(key, "In", [value])
        if errs:
            return aggregate(errs)
    for req in selector.match_expressions:
        errs = requirement_errors(req.key, req.operator, req.values)
        if errs:
            return aggregate(errs)
    return None


# --- nodeaffinity (component-helpers/scheduling/corev1/nodeaffinity) ---------


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """fields.OneTermEqualSelector / OneTermNotEqualSelector."""

    key: str
    value: str
    equal: bool

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.key, "") == self.value) == self.equal


@dataclass(frozen=True, slots=True)
class ParsedTerm:
    """nodeaffinity.nodeSelectorTerm: None means that part of the term was empty."""

    labels: tuple[Requirement, ...] | None
    fields: tuple[FieldRequirement, ...] | None
    errors: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
        if self.errors:
            return False
        if self.labels is not None and not all(r.matches(labels) for r in self.labels):
            return False
        # A node without a name has no fields, and matchFields are then not checked.
        if self.fields is None or not fields:
            return True
        return all(r.matches(fields) for r in self.fields)


def node_fields(node_name: str) -> dict[str, str]:
    """nodeaffinity.extractNodeFields."""
    return {OBJECT_NAME_FIELD: node_name} if node_name else {}


def is_empty_term(term: NodeSelectorTerm) -> bool:
    return not term.match_expressions and not term.match_fields


def _parse_expressions(
    reqs: Sequence[NodeSelectorRequirement], path: str
) -> tuple[tuple[Requirement, ...] | None, list[str]]:
    """nodeSelectorRequirementsAsSelector."""
    errs: list[str] = []
    for i, r in enumerate(reqs):
        errs += requirement_errors(r.key, r.operator, r.values, f"{path}[{i}]")
    if errs:
        return None, errs
    return tuple(_requirement(r.key, r.operator, r.values) for r in reqs), []


def _parse_fields(
    reqs: Sequence[NodeSelectorRequirement], path: str
) -> tuple[tuple[FieldRequirement, ...] | None, list[str]]:
    """nodeSelectorRequirementsAsFieldSelector: In / NotIn with exactly one value."""
    errs: list[str] = []
    parsed = []
    for i, r in enumerate(reqs):
        at = f"{path}[{i}]"
        if r.operator not in ("In", "NotIn"):
            errs.append(not_supported(_child(at, "operator"), r.operator, ("In", "NotIn")))
        elif len(r.values) != 1:
            errs.append(
                invalid(_child(at, "values"), _go_strings(r.values), "must have one element")
            )
        else:
            parsed.append(FieldRequirement(r.key, r.values[0], r.operator == "In"))
    return (None, errs) if errs else (tuple(parsed), [])


def parse_node_selector_term(term: NodeSelectorTerm, path: str = "") -> ParsedTerm:
    """nodeaffinity.newNodeSelectorTerm."""
    labels: tuple[Requirement, ...] | None = None
    fields: tuple[FieldRequirement, ...] | None = None
    errs: list[str] = []
    if term.match_expressions:
        labels, label_errs = _parse_expressions(
            term.match_expressions, _child(path, "matchExpressions")
        )
        errs += label_errs
    if term.match_fields:
        fields, field_errs = _parse_fields(term.match_fields, _child(path, "matchFields"))
        errs += field_errs
    return ParsedTerm(labels, fields, tuple(errs))


@dataclass(frozen=True, slots=True)
class ParsedNodeSelector:
    """nodeaffinity.LazyErrorNodeSelector: terms are ORed; empty terms were dropped, and
    a term that failed to parse matches no node."""

    terms: tuple[ParsedTerm, ...]

    @property
    def errors(self) -> list[str]:
        return [e for t in self.terms for e in t.errors]

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        fields = node_fields(node_name)
        return any(t.matches(labels, fields) for t in self.terms)


def parse_node_selector(selector: NodeSelector, path: str = "") -> ParsedNodeSelector:
    """nodeaffinity.NewLazyErrorNodeSelector (NewNodeSelector when `.errors` is empty)."""
    terms_path = _child(path, "nodeSelectorTerms")
    return ParsedNodeSelector(
        tuple(
            parse_node_selector_term(term, f"{terms_path}[{i}]")
            for i, term in enumerate(selector.node_selector_terms)
            if not is_empty_term(term)
        )
    )


@dataclass(frozen=True, slots=True)
class PreferredTerms:
    """nodeaffinity.PreferredSchedulingTerms: (weight, term) of the terms that count."""

    terms: tuple[tuple[int, ParsedTerm], ...]

    def score(self, labels: Mapping[str, str], node_name: str) -> int:
        fields = node_fields(node_name)
        return sum(weight for weight, term in self.terms if term.matches(labels, fields))


def parse_preferred_terms(
    terms: Sequence[PreferredSchedulingTerm], path: str = ""
) -> tuple[PreferredTerms, list[str]]:
    """nodeaffinity.NewPreferredSchedulingTerms: zero-weight and empty terms never count;
    any parse error fails the whole list."""
    parsed = []
    errs: list[str] = []
    for i, term in enumerate(terms):
        if term.weight == 0 or is_empty_term(term.preference):
            continue
        one = parse_node_selector_term(term.preference, f"{path}[{i}]")
        errs += one.errors
        if not one.errors:
            parsed.append((term.weight, one))
    return PreferredTerms(tuple(parsed)), errs


def node_selector_term_matches(
    term: NodeSelectorTerm, labels: Mapping[str, str], fields: Mapping[str, str]
) -> bool:
    """All expressions (on labels) and all fields must match; an empty or invalid term
    matches no node."""
    return not is_empty_term(term) and parse_node_selector_term(term).matches(labels, fields)


def node_selector_matches(
    selector: NodeSelector, labels: Mapping[str, str], node_name: str
) -> bool:
    """Terms are ORed; no terms match no node."""
    return parse_node_selector(selector).matches(labels, node_name)
