"""The API server's grammar for names and labels, with its messages.

apimachinery's pkg/util/validation (IsQualifiedName, IsValidLabelValue,
IsDNS1123Subdomain/Label), metav1 validation's ValidateLabels, and the
field.Error text ("<path>: Invalid value: <value>: <detail>") they are reported in.
Go measures strings in bytes: so do the length limits here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
LABEL_VALUE_FMT = f"({QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
DNS1123_SUBDOMAIN_FMT = f"{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
# Use with fullmatch: Go's `^...$` ends at the end of the text, Python's `$` before a "\n".
QUALIFIED_NAME_RE = re.compile(QUALIFIED_NAME_FMT)
LABEL_VALUE_RE = re.compile(LABEL_VALUE_FMT)
DNS1123_LABEL_RE = re.compile(DNS1123_LABEL_FMT)
DNS1123_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN_FMT)
DNS1035_LABEL_RE = re.compile(DNS1035_LABEL_FMT)
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, double spaces included."""
    shown = "".join(f"{' or ' if i else ''}'{e}', " for i, e in enumerate(examples))
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def byte_len(value: str) -> int:
    """Go's len(string); a lone surrogate (JSON allows one) counts as its 3 bytes."""
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))


def dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if byte_len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def dns1123_label_errors(value: str) -> list[str]:
    """validation.IsDNS1123Label: a name that must be one DNS label (container names)."""
    errs = []
    if byte_len(value) > DNS1123_LABEL_MAX:
        errs.append(f"must be no more than {DNS1123_LABEL_MAX} characters")
    if not DNS1123_LABEL_RE.fullmatch(value):
        if DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errs.append("must not contain dots")  # a subdomain of the right length: dots
        else:
            errs.append(_regex_error(_DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1035_label_errors(value: str) -> list[str]:
    """validation.IsDNS1035Label (Service names)."""
    errs = []
    if byte_len(value) > DNS1123_LABEL_MAX:
        errs.append(f"must be no more than {DNS1123_LABEL_MAX} characters")
    if not DNS1035_LABEL_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_dns1123_subdomain(value: str) -> bool:
    return 0 < len(value) <= DNS1123_SUBDOMAIN_MAX and bool(DNS1123_SUBDOMAIN_RE.fullmatch(value))


def is_dns1123_label(value: str) -> bool:
    return 0 < len(value) <= DNS1123_LABEL_MAX and bool(DNS1123_LABEL_RE.fullmatch(value))


def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName: [DNS-subdomain prefix '/'] name of at most 63 characters."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += [f"prefix part {m}" for m in dns1123_subdomain_errors(prefix)]
    if not name:
        errs.append("name part must be non-empty")
    elif byte_len(name) > QUALIFIED_NAME_MAX:
        errs.append(f"name part must be no more than {QUALIFIED_NAME_MAX} characters")
    if not QUALIFIED_NAME_RE.fullmatch(name):
        errs.append(
            "name part "
            + _regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue: empty, or at most 63 qualified-name characters."""
    errs = []
    if byte_len(value) > LABEL_VALUE_MAX:
        errs.append(f"must be no more than {LABEL_VALUE_MAX} characters")
    if not LABEL_VALUE_RE.fullmatch(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


# Label keys and values known valid. Pods of one template share their labels, and a
# cluster has few distinct ones: most checks are a set lookup. Errors are not kept.
_VALID_KEYS: set[str] = set()
_VALID_VALUES: set[str] = set()
_VALID_MAX = 16384
SHOWN_MAX = 256  # characters of a user's value quoted back in a message (the API server: all)


def label_errors(labels: Mapping[str, str], path: str) -> list[str]:
    """metav1 validation.ValidateLabels: field.Error strings, one per problem."""
    errs: list[str] = []
    for key, value in labels.items():
        if key not in _VALID_KEYS:
            errs += _checked(_VALID_KEYS, key, qualified_name_errors(key), path)
        if value not in _VALID_VALUES:
            errs += _checked(_VALID_VALUES, value, label_value_errors(value), path)
    return errs


def _checked(known: set[str], text: str, problems: list[str], path: str) -> list[str]:
    if problems:
        return [invalid(path, go_quote(text, SHOWN_MAX), m) for m in problems]
    if len(known) >= _VALID_MAX:
        known.clear()
    known.add(text)
    return []


# --- numbers ------------------------------------------------------------------

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def int32(value: Any) -> int:
    """What decoding JSON into a Go int32 field accepts (a whole number in range; not a
    bool, a string or 5.0); ValueError in the words of Go's decoder otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        if INT32_MIN <= value <= INT32_MAX:
            return value
        raise ValueError(
            f"cannot unmarshal number {show_number(value)} into an int32 "
            f"(out of range {INT32_MIN} .. {INT32_MAX})"
        )
    if isinstance(value, float):
        raise ValueError(f"cannot unmarshal number {value!r} into an int32")
    raise ValueError(f"cannot unmarshal {json_type(value)} into an int32")


def json_type(value: Any) -> str:
    """The JSON type's name, as Go's decoder calls it in errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else type(value).__name__


def show_number(value: int) -> str:
    """An integer for a message; a long one shortened (JSON allows 4300 digits)."""
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text.lstrip('-'))} digits)"


# --- field.Error formatting ---------------------------------------------------

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_GO_ESCAPES |= {"\v": "\\v", '"': '\\"', "\\": "\\\\"}


def go_quote(value: str, limit: int | None = None) -> str:
    """strconv.Quote (what %q prints): printable characters as they are, others escaped.

    A lone surrogate, which JSON allows and a Go string cannot hold, shows as \\udXXX.
    Past `limit` characters the value is cut, with "..." inside the quotes.
    """
    cut = limit is not None and len(value) > limit
    text = value[:limit] if cut else value
    if text.isprintable() and '"' not in text and "\\" not in text:
        body = text
    else:
        body = "".join(go_escape(ch) for ch in text)
    return f'"{body}..."' if cut else f'"{body}"'


def go_escape(ch: str) -> str:
    """One character as it appears inside strconv.Quote's quotes."""
    if ch in _GO_ESCAPES:
        return _GO_ESCAPES[ch]
    if ch.isprintable():  # Python's and Go's unicode.IsPrint agree: L, M, N, P, S and ' '
        return ch
    code = ord(ch)
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def invalid(path: str, shown: str, detail: str) -> str:
    """field.Invalid(path, value, detail).Error(); `shown` is the value as Go prints it."""
    return f"{path}: Invalid value: {shown}: {detail}"


def show(value: Any) -> str:
    """A value as field.Error prints it: strings quoted, numbers and bools bare, the rest
    as JSON."""
    if isinstance(value, str):
        return go_quote(value, SHOWN_MAX)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return show_number(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def required(path: str, detail: str = "") -> str:
    """field.Required(path, detail).Error()."""
    return f"{path}: Required value: {detail}" if detail else f"{path}: Required value"


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def duplicate(path: str, value: Any) -> str:
    return f"{path}: Duplicate value: {show(value)}"


def not_supported(path: str, value: Any, supported: Sequence[str] = ()) -> str:
    """field.NotSupported(path, value, supported).Error(): the supported values in the
    order the API server lists them."""
    msg = f"{path}: Unsupported value: {show(value)}"
    if supported:
        msg += ": supported values: " + ", ".join(go_quote(v) for v in supported)
    return msg


def go_string_map(value: Mapping[str, str] | None) -> str:
    """%#v of a map[string]string (keys sorted, as fmt prints maps); None is a nil map."""
    if value is None:
        return "map[string]string(nil)"
    items = ", ".join(f"{go_quote(k)}:{go_quote(v)}" for k, v in sorted(value.items()))
    return f"map[string]string{{{items}}}"


def aggregate(errors: Iterable[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): duplicates dropped, several in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def inclusive_range(low: int, high: int) -> str:
    """validation.InclusiveRangeError."""
    return f"must be between {low} and {high}, inclusive"


def invalid_object(kind: str, name: str, errors: Iterable[str]) -> str:
    """apierrors.NewInvalid(kind, name, errors).Error(): what the API server answers a
    create or update it refuses. `kind` is the qualified kind ("StatefulSet.apps")."""
    return f"{kind} {go_quote(name)} is invalid: {aggregate(errors)}"
