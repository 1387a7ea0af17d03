"""Label and node selector matching, as apimachinery's labels.Selector and
component-helpers' nodeaffinity evaluate them."""

from __future__ import annotations

from collections.abc import Mapping

from shared.api.models import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector: a nil selector matches nothing, an empty one everything."""
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(label_requirement_matches(r, labels) for r in selector.match_expressions)


def label_requirement_matches(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    if req.operator == "In":
        return present and labels[req.key] in req.values
    if req.operator == "NotIn":
        return not present or labels[req.key] not in req.values
    if req.operator == "Exists":
        return present
    return not present  # DoesNotExist


def _requirement_matches(req: NodeSelectorRequirement, values: Mapping[str, str]) -> bool:
    present = req.key in values
    op = req.operator
    if op == "In":
        return present and values[req.key] in req.values
    if op == "NotIn":
        return not present or values[req.key] not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    # Gt / Lt compare integers; a missing or non-integer label never matches.
    if not present or len(req.values) != 1:
        return False
    try:
        have, bound = int(values[req.key]), int(req.values[0])
    except ValueError:
        return False
    return have > bound if op == "Gt" else have < bound


def node_selector_term_matches(
    term: NodeSelectorTerm, labels: Mapping[str, str], fields: Mapping[str, str]
) -> bool:
    """All expressions (on labels) and all fields (metadata.name) must match; an
    empty term matches no node."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(_requirement_matches(r, labels) for r in term.match_expressions) and all(
        _requirement_matches(r, fields) for r in term.match_fields
    )


def node_selector_matches(
    selector: NodeSelector, labels: Mapping[str, str], node_name: str
) -> bool:
    """Terms are ORed; no terms match no node."""
    fields = {"metadata.name": node_name}
    return any(node_selector_term_matches(t, labels, fields) for t in selector.node_selector_terms)
