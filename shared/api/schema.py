"""Fields the Kubernetes API does not know, as its strict decoding reports them.

The API server decodes a request body field by field into the kind's Go types
(sigs.k8s.io/json, case-sensitive). With strict field validation, kubectl's
default (`--validate=strict`), every name no type has fails the request; with
`--validate=warn` each becomes a warning; ksched's door warns (docs/api.md,
Validation). The schema is shared/api/schema_fields.py.

The words, from apimachinery and kubectl (1.34):
- one unknown field: `unknown field "spec.containers[0].resources.requets"`, its
  path dotted from the object's root, list items by index; several are joined by
  ", " after `strict decoding error: ` (runtime.NewStrictDecodingError), at most
  100, each once;
- the request fails as BadRequest: `Pod in version "v1" cannot be handled as a
  Pod: strict decoding error: ...` (the version without its group: "v1" for
  apps/v1 too), and kubectl prints it after `Error from server (BadRequest): error
  when creating "FILE": ` (`kubectl create`, and `kubectl apply` of an object that
  does not exist yet; applying to an existing object sends a patch, refused as
  `The request is invalid: patch: Invalid value: "map[...]": strict decoding
  error: ...`, which ksched, without patches, does not imitate);
- kubectl marshals the manifest with sorted keys, so fields come in that order,
  depth first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shared.api.schema_fields import KINDS, ROOT_OF_VERSION, TYPES
from shared.api.validation import go_quote

MAX_STRICT_ERRORS = 100  # sigs.k8s.io/json keeps the first 100

FieldKind = Literal["scalar", "map", "object", "list"]


@dataclass(frozen=True)
class Field:
    kind: FieldKind
    type: str = ""  # the object type, for "object" and "list"


Schema = Mapping[str, Mapping[str, Field]]


def parse_schema(types: Mapping[str, str]) -> dict[str, dict[str, Field]]:
    """The notation of shared/api/schema_fields.py as type -> {field: Field}, inlined
    types spliced in. KeyError names a type used but not described."""
    parsed: dict[str, dict[str, Field]] = {}

    def fields_of(name: str) -> dict[str, Field]:
        if name not in parsed:
            fields: dict[str, Field] = {}
            for token in types[name].split():
                if token.startswith("..."):
                    fields.update(fields_of(token[3:]))
                else:
                    field_name, _, spec = token.partition(":")
                    fields[field_name] = _field(spec, types)
            parsed[name] = fields
        return parsed[name]

    for name in types:
        fields_of(name)
    return parsed


def _field(spec: str, types: Mapping[str, str]) -> Field:
    if not spec:
        return Field("scalar")
    if spec == "{}":
        return Field("map")
    name = spec.strip("[]")
    if name not in types:  # at import, not when an object first uses it
        raise KeyError(f"schema type {name} is used but not described")
    return Field("list" if spec.startswith("[") else "object", name)


SCHEMA: dict[str, dict[str, Field]] = parse_schema(TYPES)


def unknown_fields(obj: Mapping[str, Any], kind: str | None = None) -> list[str]:
    """The paths of `obj`'s fields that the API's type for its kind does not have, in
    kubectl's order (sorted keys, depth first), at most MAX_STRICT_ERRORS. An object
    of a kind ksched does not know has none (its kind is refused elsewhere)."""
    kind = kind if kind is not None else obj.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        return []
    version = obj.get("apiVersion")
    root = ROOT_OF_VERSION.get((kind, version)) if isinstance(version, str) else None
    return unknown_in(obj, root or kind)


def unknown_in(value: Mapping[str, Any], type_name: str, path: str = "") -> list[str]:
    """unknown_fields for a value of a schema type found at `path`."""
    if _known(value, _NESTED[type_name], _NAMES[type_name]):
        return []  # the common case, without sorting anything
    paths: list[str] = []
    for found in _walk(value, SCHEMA[type_name], path):
        paths.append(found)
        if len(paths) == MAX_STRICT_ERRORS:
            break
    return paths


def unknown_beside(value: Mapping[str, Any], type_name: str, field: str) -> list[str]:
    """unknown_in for `value` without its `field` (a field of the type, checked apart),
    without copying `value` when nothing is unknown (a pod's event without its spec)."""
    nested = _NESTED_BESIDE.get((type_name, field))
    if nested is None:
        nested = {k: v for k, v in _NESTED[type_name].items() if k != field}
        _NESTED_BESIDE[type_name, field] = nested
    if _known(value, nested, _NAMES[type_name]):
        return []
    return unknown_in({k: v for k, v in value.items() if k != field}, type_name)


# Per type: its field names, and its object and list fields (is a list, item type).
_NAMES = {name: frozenset(fields) for name, fields in SCHEMA.items()}
_NESTED = {
    name: {f: (fd.kind == "list", fd.type) for f, fd in fields.items() if fd.type}
    for name, fields in SCHEMA.items()
}

# _NESTED[type] without one field, by (type, field): unknown_beside's.
_NESTED_BESIDE: dict[tuple[str, str], dict[str, tuple[bool, str]]] = {}


def _known(
    value: Mapping[str, Any], nested: dict[str, tuple[bool, str]], names: frozenset[str]
) -> bool:
    """Whether every field below `value` is known: the fast check, run on every object
    the door decodes (set operations; no paths built)."""
    if not names.issuperset(value):
        return False
    for key, item in value.items():
        found = nested.get(key)  # most fields are scalars or maps: nothing below to check
        if found is None:
            continue
        is_list, type_name = found
        sub, sub_names = _NESTED[type_name], _NAMES[type_name]
        if is_list:
            if isinstance(item, list) and not all(
                _known(e, sub, sub_names) for e in item if isinstance(e, dict)
            ):
                return False
        elif isinstance(item, dict) and not _known(item, sub, sub_names):
            return False
    return True


def _walk(value: Mapping[str, Any], fields: Mapping[str, Field], path: str) -> Iterator[str]:
    """Every unknown field's path, in sorted order: the slow walk, for objects that
    have some."""
    for key in sorted(value, key=str):
        child = f"{path}.{key}" if path else str(key)
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            yield child
            continue
        item = value[key]
        # A value of the wrong shape is a decoding error of another kind, not ours.
        if field.kind == "object" and isinstance(item, Mapping):
            yield from _walk(item, SCHEMA[field.type], child)
        elif field.kind == "list" and isinstance(item, list):
            for i, element in enumerate(item):
                if isinstance(element, Mapping):
                    yield from _walk(element, SCHEMA[field.type], f"{child}[{i}]")


def unknown_field_error(path: str) -> str:
    return f"unknown field {go_quote(path)}"


def strict_decoding_error(paths: list[str]) -> str:
    """runtime.NewStrictDecodingError's text."""
    return "strict decoding error: " + ", ".join(unknown_field_error(p) for p in paths)


def bad_request(kind: str, api_version: str, paths: list[str]) -> str:
    """The API server's refusal of an object with unknown fields (a Status message); the
    version is the object's own, without its group."""
    version = api_version.rpartition("/")[2]
    return (
        f"{kind} in version {go_quote(version)} cannot be handled as a {kind}: "
        f"{strict_decoding_error(paths)}"
    )
