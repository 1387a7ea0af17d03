"""`-l/--selector` (pure): apimachinery's labels.Parse grammar and its messages, over
the framework's validated labels.Requirement (shared/framework/selectors.py).

    <selector>    ::= <requirement> | <requirement> "," <selector>
    <requirement> ::= ["!"] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=") VALUE
                                | (">" | "<") INTEGER ]

A comma is AND; `a` alone means the label exists, `!a` that it does not; `a!=b`
and `a notin (b)` also match objects without the label. Whitespace separates
tokens; `in` and `notin` are keywords only where an operator is expected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.framework.selectors import Requirement, aggregate, requirement_errors

# the lexer's special symbols, longest first within a prefix (labels.string2token)
SYMBOLS = ("!=", "==", "!", "=", "(", ")", ",", ">", "<")
SPECIAL = frozenset("!=(),<>")
KEYWORDS = {"in": "In", "notin": "NotIn"}
# operator token -> Requirement operator; "=" and "==" are In with one value
EXACT = {"=": "In", "==": "In", "!=": "NotIn", ">": "Gt", "<": "Lt"}
END = ""  # the end-of-string token's text


class SelectorError(ValueError):
    """The selector does not parse; str() is kubectl's message."""


@dataclass(frozen=True)
class Token:
    kind: str  # "ident", "end", a symbol, or "In"/"NotIn"
    text: str


def lex(text: str) -> list[Token]:
    tokens = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in SPECIAL:
            symbol = next(s for s in SYMBOLS if text.startswith(s, i))
            tokens.append(Token(symbol, symbol))
            i += len(symbol)
        else:
            start = i
            while i < len(text) and not text[i].isspace() and text[i] not in SPECIAL:
                i += 1
            word = text[start:i]
            tokens.append(Token(KEYWORDS.get(word, "ident"), word))
    tokens.append(Token("end", END))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = lex(text)
        self.pos = 0

    def peek(self, as_value: bool = True) -> Token:
        """The next token; where a value is expected, `in`/`notin` are identifiers."""
        tok = self.tokens[self.pos]
        return Token("ident", tok.text) if as_value and tok.kind in ("In", "NotIn") else tok

    def take(self, as_value: bool = True) -> Token:
        tok = self.peek(as_value)
        self.pos += 1
        return tok

    def selector(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok = self.peek()
            if tok.kind == "end":
                return reqs
            if tok.kind not in ("ident", "!"):
                raise SelectorError(
                    f"found '{tok.text}', expected: !, identifier, or 'end of string'"
                )
            reqs.append(self.requirement())
            after = self.take()
            if after.kind == "end":
                return reqs
            if after.kind != ",":
                raise SelectorError(f"found '{after.text}', expected: ',' or 'end of string'")
            if self.peek().kind not in ("ident", "!"):
                raise SelectorError(f"found '{self.peek().text}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        try:
            key, operator, values = self._parts()
        except SelectorError as err:
            raise SelectorError(f"unable to parse requirement: {err}") from None
        errors = requirement_errors(key, operator, values)
        if errors:
            raise SelectorError(f"unable to parse requirement: {aggregate(errors)}")
        bound = int(values[0]) if operator in ("Gt", "Lt") else 0
        return Requirement(key, operator, frozenset(values), bound)

    def _parts(self) -> tuple[str, str, list[str]]:
        negated = self.peek().kind == "!"
        if negated:
            self.take()
        tok = self.take()
        if tok.kind != "ident":
            raise SelectorError(f"found '{tok.text}', expected: identifier")
        if negated:  # `!key` takes no operator: what follows must end the requirement
            return tok.text, "DoesNotExist", []
        if self.peek().kind in ("end", ","):
            return tok.text, "Exists", []
        op = self.take(as_value=False)
        if op.kind in ("In", "NotIn"):
            return tok.text, op.kind, self._set()
        if op.kind in EXACT:
            return tok.text, EXACT[op.kind], [self._exact()]
        raise SelectorError(f"found '{op.text}', expected: '=', '!=', '==', 'in', notin'")

    def _exact(self) -> str:
        if self.peek().kind in ("end", ","):
            return ""  # `a=` selects the empty value
        tok = self.take()
        if tok.kind != "ident":
            raise SelectorError(f"found '{tok.text}', expected: identifier")
        return tok.text

    def _set(self) -> list[str]:
        """`(a,b)`; empty entries (`()`, `(a,)`, `(,a)`) stand for the empty value."""
        tok = self.take()
        if tok.kind != "(":
            raise SelectorError(f"found '{tok.text}', expected: '('")
        if self.peek().kind == ")":
            self.take()
            return [""]
        if self.peek().kind not in ("ident", ","):
            raise SelectorError(f"found '{self.peek().text}', expected: ',', ')' or identifier")
        values = self._list()
        self.take()  # the ")" that ended the list
        return sorted(values)

    def _list(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok = self.take()
            if tok.kind == "ident":
                values.add(tok.text)
                if self.peek().kind == ")":
                    return values
                if self.peek().kind != ",":
                    raise SelectorError(f"found '{self.peek().text}', expected: ',' or ')'")
            elif tok.kind == ",":
                if not values:
                    values.add("")  # `(,a`
                if self.peek().kind == ")":
                    values.add("")  # `a,)`
                    return values
                if self.peek().kind == ",":
                    self.take()
                    values.add("")  # `a,,b`
            else:
                raise SelectorError(f"found '{tok.text}', expected: ',', or identifier")


def parse_selector(text: str) -> list[Requirement]:
    """labels.Parse: every requirement must hold (an empty selector selects all)."""
    return _Parser(text).selector()


def selects(requirements: Sequence[Requirement], labels: Mapping[str, str] | None) -> bool:
    return all(r.matches(labels or {}) for r in requirements)


def format_labels(labels: Mapping[str, str] | None) -> str:
    """labels.FormatLabels, kubectl's LABELS column: sorted `k=v`, comma separated."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "<none>"
