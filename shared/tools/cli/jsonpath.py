"""`-o jsonpath=TEMPLATE` (pure): the part of kubectl's JSONPath that scripts use.

    {.metadata.name}                      a field of the object (`get pod p`) or List
    {.items[*].metadata.name}             every item's field, joined by spaces
    {.items[0].spec.nodeName}             an index (negative counts from the end)
    {range .items[*]}{.metadata.name}{"\\n"}{end}   a body per element; paths inside
                                          start at the element
    {"\\n"}, {"\\t"}                        a quoted string (Go's escapes)

Text outside braces is printed as is. A missing field prints nothing (kubectl's
`get` allows missing keys); maps and lists print as compact JSON, booleans as
true/false. Filters (`[?()]`), slices and recursive descent (`..`) are refused with
a one-line error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

STEP = re.compile(r"\.([A-Za-z0-9_\-/]+)|\[(\*|-?\d+)\]|\['([^']*)'\]")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}


class JSONPathError(ValueError):
    pass


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Path:
    steps: tuple[str | int, ...]  # a field name, an index, or "*" (every element)


@dataclass
class Range:
    path: Path
    body: list[Text | Path | Range] = field(default_factory=list)


Node = Text | Path | Range


def parse(template: str) -> list[Node]:
    root: list[Node] = []
    stack: list[list[Node]] = [root]
    pos = 0
    for m in re.finditer(r"\{([^{}]*)\}|([{}])", template):
        if m.group(2):
            raise JSONPathError(_error(template, "unclosed action" if m.group(2) == "{" else "}"))
        if m.start() > pos:
            stack[-1].append(Text(template[pos : m.start()]))
        pos = m.end()
        action = m.group(1).strip()
        if action == "end":
            if len(stack) == 1:
                raise JSONPathError(_error(template, "not in range, nothing to end"))
            stack.pop()
        elif action.startswith("range ") or action.startswith("range\t"):
            node = Range(_path(template, action[len("range") :].strip()))
            stack[-1].append(node)
            stack.append(node.body)
        elif action.startswith('"'):
            stack[-1].append(Text(_unquote(template, action)))
        else:
            stack[-1].append(_path(template, action))
    if pos < len(template):
        stack[-1].append(Text(template[pos:]))
    if len(stack) > 1:
        raise JSONPathError(_error(template, "unclosed range"))
    return root


def _error(template: str, detail: str) -> str:
    return f"error parsing jsonpath {template}, {detail}"


def _unquote(template: str, action: str) -> str:
    if len(action) < 2 or not action.endswith('"'):
        raise JSONPathError(_error(template, f"unterminated string {action}"))
    body, out, i = action[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\" and body[i + 1 : i + 2] in ESCAPES:
            out.append(ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def _path(template: str, text: str) -> Path:
    text = text.removeprefix("$").removeprefix("@")
    if text in ("", "."):
        return Path(())
    steps: list[str | int] = []
    pos = 0
    for m in STEP.finditer(text):
        if m.start() != pos:
            break
        name, index, quoted = m.groups()
        if name is not None:
            steps.append(name)
        elif quoted is not None:
            steps.append(quoted)
        else:
            steps.append(index if index == "*" else int(index))
        pos = m.end()
    if pos != len(text):
        raise JSONPathError(_error(template, f"unrecognized identifier {text[pos:]}"))
    return Path(tuple(steps))


def _walk(value: Any, steps: tuple[str | int, ...]) -> Iterator[Any]:
    if not steps:
        yield value
        return
    step, rest = steps[0], steps[1:]
    if step == "*":
        items = value.values() if isinstance(value, dict) else value
        if isinstance(items, list) or isinstance(value, dict):
            for item in items:
                yield from _walk(item, rest)
    elif isinstance(step, int):
        if isinstance(value, list) and -len(value) <= step < len(value):
            yield from _walk(value[step], rest)
    elif isinstance(value, dict) and step in value:
        yield from _walk(value[step], rest)


def show(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def execute(nodes: list[Node], data: Any) -> str:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.text)
        elif isinstance(node, Path):
            out.append(" ".join(show(v) for v in _walk(data, node.steps)))
        else:
            out += [execute(node.body, item) for item in _walk(data, node.path.steps)]
    return "".join(out)


def render(template: str, data: Any) -> str:
    return execute(parse(template), data)
