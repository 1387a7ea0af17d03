"""Which objects `get` and `delete` mean (pure): a type, names, a namespace (or all),
`-l` and `--field-selector`, as the API server's list would select them.

The selector modules are imported only when a selector is given (labels.py brings
the framework's Requirement, and with it the pydantic models: slow to import).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from shared.api.names import DEFAULT_NAMESPACE

# kubectl's names and short names -> ksched's kind
RESOURCES = {
    "pods": "pod",
    "pod": "pod",
    "po": "pod",
    "nodes": "node",
    "node": "node",
    "no": "node",
    "events": "event",
    "event": "event",
    "ev": "event",
}
GROUP_VERSION_RESOURCE = {"pod": "/v1, Resource=pods", "node": "/v1, Resource=nodes"}

Predicate = Callable[[dict[str, Any]], bool]
T = TypeVar("T")


class QueryError(ValueError):
    """str() is what kubectl prints (without `error: `)."""


class BadRequest(QueryError):
    """The API server's refusal, printed as `Error from server (BadRequest): ...`."""


def kind_of(resource: str) -> str:
    kind = RESOURCES.get(resource.lower())
    if kind is None:
        raise QueryError(
            f'the server doesn\'t have a resource type "{resource}" '
            "(ksched knows pods, nodes and events)"
        )
    return kind


def resource_args(args: Sequence[str]) -> tuple[str, list[str]]:
    """`TYPE [NAME...]` or `TYPE/NAME...` (one type), as kubectl takes them."""
    if not args:
        raise QueryError("you must specify the type of resource")
    if "/" in args[0]:
        pairs = [a.split("/", 1) for a in args]
        kinds = {kind_of(t) for t, _ in pairs}
        if len(kinds) > 1 or any(not n for _, n in pairs):
            raise QueryError(
                "there is no need to specify a resource type as a separate argument when "
                "passing arguments in resource/name form"
            )
        return kinds.pop(), [n for _, n in pairs]
    return kind_of(args[0]), list(args[1:])


@dataclass(frozen=True)
class Query:
    kind: str  # pod, node
    names: tuple[str, ...] = ()
    namespace: str | None = DEFAULT_NAMESPACE  # None: every namespace
    selects: Predicate | None = None  # -l and --field-selector together

    def wants(self, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or DEFAULT_NAMESPACE
        if self.kind != "node" and self.namespace not in (None, namespace):
            return False
        if self.names and meta.get("name") not in self.names:
            return False
        return self.selects is None or self.selects(obj)

    def select(self, table: Mapping[str, T], obj_of: Callable[[T], dict[str, Any]]) -> list[T]:
        """The wanted entries of a table keyed `namespace/name` (or `name`), in
        kubectl's order: by namespace, then name."""
        return [entry for _, entry in sorted(table.items()) if self.wants(obj_of(entry))]

    def missing(self, found: Sequence[dict[str, Any]]) -> list[str]:
        have = {(o.get("metadata") or {}).get("name") for o in found}
        return [n for n in self.names if n not in have]


def selector(kind: str, label_selector: str, field_selector: str) -> Predicate | None:
    """-l and --field-selector as one predicate (None: neither given). A bad selector
    is refused the way the API server refuses the list."""
    if not label_selector and not field_selector:
        return None
    try:
        checks = _label_check(label_selector) + _field_check(kind, field_selector)
    except ValueError as err:
        raise BadRequest(
            f'Unable to find "{GROUP_VERSION_RESOURCE.get(kind, kind)}" that match label '
            f'selector "{label_selector}", field selector "{field_selector}": {err}'
        ) from None
    return lambda obj: all(check(obj) for check in checks)


def _label_check(text: str) -> list[Predicate]:
    if not text:
        return []
    from shared.tools.cli.labels import parse_selector, selects

    requirements = parse_selector(text)
    return [lambda obj: selects(requirements, (obj.get("metadata") or {}).get("labels"))]


def _field_check(kind: str, text: str) -> list[Predicate]:
    if not text:
        return []
    from shared.tools.cli.fields import field_selects, parse_field_selector, unsupported

    terms = parse_field_selector(text)
    bad = unsupported(kind, terms)
    if bad is not None:
        raise ValueError(f"field label not supported: {bad}")
    return [lambda obj: field_selects(kind, terms, obj)]
