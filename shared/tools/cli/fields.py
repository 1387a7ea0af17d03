"""`--field-selector` (pure): apimachinery's fields.ParseSelector and the fields the
API server lets a client select pods and nodes by, with the values it defaults.

Terms are `field=value`, `field==value` or `field!=value`, comma separated (AND);
`\\,`, `\\=` and `\\\\` escape a comma, an equals sign and a backslash in a value.
`spec.nodeName=` selects the pods not bound to a node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shared.api.models import DEFAULT_SCHEDULER_NAME
from shared.api.names import DEFAULT_NAMESPACE

OPERATORS = ("!=", "==", "=")  # tried in this order at each position (fields.splitTerm)
ESCAPED = {"\\": "\\", ",": ",", "=": "="}

Getter = Callable[[dict[str, Any]], str]


def _field(*path: str, default: str = "") -> Getter:
    def get(obj: dict[str, Any]) -> str:
        value: Any = obj
        for part in path:
            value = (value or {}).get(part) if isinstance(value, dict) else None
        if isinstance(value, bool):  # strconv.FormatBool
            return "true" if value else "false"
        return str(value) if value not in (None, "") else default

    return get


# The field labels kube-apiserver accepts (pkg/registry/core/{pod,node}/strategy.go),
# those ksched's objects carry.
POD_FIELDS: dict[str, Getter] = {
    "metadata.name": _field("metadata", "name"),
    "metadata.namespace": _field("metadata", "namespace", default=DEFAULT_NAMESPACE),
    "spec.nodeName": _field("spec", "nodeName"),
    "spec.schedulerName": _field("spec", "schedulerName", default=DEFAULT_SCHEDULER_NAME),
    "status.phase": _field("status", "phase", default="Pending"),
    "status.nominatedNodeName": _field("status", "nominatedNodeName"),
}
NODE_FIELDS: dict[str, Getter] = {
    "metadata.name": _field("metadata", "name"),
    "spec.unschedulable": _field("spec", "unschedulable", default="false"),
}
FIELDS = {"pod": POD_FIELDS, "node": NODE_FIELDS}


class FieldSelectorError(ValueError):
    """str() is kubectl's message."""


@dataclass(frozen=True)
class Term:
    field: str
    value: str
    equal: bool  # `=`/`==` (else `!=`)


def split_unescaped(text: str, sep: str) -> list[str]:
    """fields.splitTerms: split at separators not escaped by a backslash."""
    parts, start, i = [], 0, 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == sep:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def _split_term(term: str) -> tuple[str, str, str] | None:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
        i += 1
    return None


def unescape(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            nxt = value[i + 1 : i + 2]
            if nxt not in ESCAPED:
                raise FieldSelectorError(
                    f"invalid field selector: invalid escape sequence: {ch}{nxt}"
                )
            out.append(ESCAPED[nxt])
            i += 2
            continue
        if ch in ",=":
            # Go prints the rune with %v: its code point
            raise FieldSelectorError(
                f"invalid field selector: unescaped character in value: {ord(ch)}"
            )
        out.append(ch)
        i += 1
    return "".join(out)


def parse_field_selector(text: str) -> list[Term]:
    terms = []
    for part in split_unescaped(text, ","):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise FieldSelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = split
        terms.append(Term(field, unescape(value), op != "!="))
    return terms


def unsupported(kind: str, terms: Sequence[Term]) -> str | None:
    """The first field the API server would refuse for `kind`, or None."""
    known = FIELDS.get(kind, {})
    return next((t.field for t in terms if t.field not in known), None)


def field_selects(kind: str, terms: Sequence[Term], obj: dict[str, Any]) -> bool:
    known = FIELDS[kind]
    return all((known[t.field](obj) == t.value) == t.equal for t in terms)
