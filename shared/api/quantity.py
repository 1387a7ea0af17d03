"""Kubernetes resource.Quantity parsing (k8s.io/apimachinery/pkg/api/resource).

Grammar, as documented in quantity.go:

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>

Values are exact `Fraction`s; rounding happens only when converting to the
integer units the scheduler accounts in (`milli_value`, `int_value`).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

MAX_DIGITS = 100  # digits in the number part; bounds the size of the integers we build
MAX_EXPONENT = 100  # |exponent| of a decimalExponent suffix

_BINARY_SI: dict[str, Fraction] = {
    suffix: Fraction(1024**power)
    for power, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)
}
_DECIMAL_SI: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_MULTIPLIERS = {**_BINARY_SI, **_DECIMAL_SI}

# [0-9], not \d: \d would accept non-ASCII digits. fullmatch: `$` tolerates a trailing newline.
_NUMBER = re.compile(r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?(?P<suffix>.*)", re.S)
_EXPONENT = re.compile(r"[eE](?P<sign>[+-]?)(?P<digits>[0-9]+)")

_GRAMMAR_HINT = "must match the Kubernetes quantity grammar (e.g. 100m, 1.5Gi, 2e3)"


class QuantityError(ValueError):
    """A value that is not a valid (or acceptable) Kubernetes quantity."""


def _show(value: object) -> str:
    # Quote what the user wrote, but never echo a hostile megabyte back.
    text = str(value)
    return repr(text if len(text) <= 64 else text[:61] + "...")


def _invalid(field: str, value: object, reason: str) -> QuantityError:
    return QuantityError(f"{field}: invalid quantity {_show(value)}: {reason}")


def _to_text(value: object, field: str) -> str:
    # bool is an int subclass, but `cpu: true` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _invalid(field, value, "must be a string or a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise _invalid(field, value, "must be a finite number")
    # str() of a float is its shortest exact-round-trip decimal, e.g. 0.1 -> "0.1".
    return value if isinstance(value, str) else str(value)


def _multiplier(suffix: str, field: str, value: object) -> Fraction:
    known = _MULTIPLIERS.get(suffix)
    if known is not None:
        return known
    exp = _EXPONENT.fullmatch(suffix)
    if exp is None:
        raise _invalid(field, value, _GRAMMAR_HINT)
    digits = exp["digits"].lstrip("0") or "0"
    if len(digits) > 3 or int(digits) > MAX_EXPONENT:
        raise _invalid(field, value, f"exponent too large (|exponent| > {MAX_EXPONENT})")
    power = -int(digits) if exp["sign"] == "-" else int(digits)
    return Fraction(10) ** power


# Valid parses by text: a cluster repeats a handful of quantities ("100m", "500Mi")
# across thousands of pods, and Fraction arithmetic is slow. Fractions are immutable,
# so sharing them is safe; errors are not cached (their message names the field).
_PARSED: dict[str, Fraction] = {}
_PARSED_MAX = 4096


def parse_quantity(value: str | int | float, *, field: str = "quantity") -> Fraction:
    """Parse a quantity exactly; negative values are allowed."""
    text = _to_text(value, field)
    cached = _PARSED.get(text)
    if cached is not None:
        return cached
    result = _parse_text(text, field, value)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[text] = result
    return result


def _parse_text(text: str, field: str, value: object) -> Fraction:
    match = _NUMBER.fullmatch(text)
    assert match is not None  # every group can be empty, so the pattern always matches
    whole, frac = match["int"], match["frac"] or ""
    if not whole and not frac:
        raise _invalid(field, value, _GRAMMAR_HINT)
    if len(whole) + len(frac) > MAX_DIGITS:
        raise _invalid(field, value, f"too long (more than {MAX_DIGITS} digits)")
    number = Fraction(int(whole + frac or "0"), 10 ** len(frac))
    result = number * _multiplier(match["suffix"], field, value)
    return -result if match["sign"] == "-" else result


# The largest quantity whose milli-value (ceil(q * 1000)) is an int64, as ksched's
# accounting (millicores, bytes) and its msgpack messages need.
MAX_MILLI_VALUE = 2**63 - 1
MAX_QUANTITY = Fraction(MAX_MILLI_VALUE, 1000)


def parse_nonnegative(value: str | int | float, *, field: str = "quantity") -> Fraction:
    """Parse a quantity that must be >= 0 and at most MAX_QUANTITY (requests, limits,
    allocatable, overhead)."""
    result = parse_quantity(value, field=field)
    if result < 0:
        raise QuantityError(f"{field}: must be non-negative, got {_show(value)}")
    if result > MAX_QUANTITY:
        raise QuantityError(
            f"{field}: quantity too large: {_show(value)} (its milli-value exceeds 2^63-1)"
        )
    return result


def milli_value(q: Fraction) -> int:
    """Quantity.MilliValue(): q * 1000, rounded up."""
    return math.ceil(q * 1000)


def int_value(q: Fraction) -> int:
    """Quantity.Value(): q rounded up."""
    return math.ceil(q)


def resource_amount(name: str, q: Fraction) -> int:
    """The integer ksched accounts `name` in: millicores for cpu, whole units otherwise."""
    return milli_value(q) if name == "cpu" else int_value(q)


def _decimal_places(denominator: int) -> int | None:
    # A fraction has a finite decimal expansion iff its denominator is 2^a * 5^b.
    twos = (denominator & -denominator).bit_length() - 1
    rest, fives = denominator >> twos, 0
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    return max(twos, fives) if rest == 1 else None


def format_quantity(q: Fraction) -> str:
    """A canonical string for messages: "3", "100m", else a plain decimal such as "0.0001".

    Integers and whole milli-units round-trip exactly through `parse_quantity`.
    """
    if q.denominator == 1:
        return str(q.numerator)
    if (q * 1000).denominator == 1:
        return f"{q.numerator * 1000 // q.denominator}m"
    places = _decimal_places(q.denominator)
    if places is None:  # not produced by parsing; only arithmetic such as averages gets here
        places, q = 9, Fraction(round(q, 9))
    sign, digits = ("-" if q < 0 else ""), str(abs(q.numerator) * 10**places // q.denominator)
    digits = digits.rjust(places + 1, "0")
    return f"{sign}{digits[:-places]}.{digits[-places:]}".rstrip("0").rstrip(".")


# --- Quantity.String() ----------------------------------------------------------
# The API server quotes quantities back in their canonical form, which keeps the
# notation family the value was written in: "1.5" -> "1500m", "1536Mi" -> "1536Mi".

BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T"}
_DECIMAL_SUFFIXES |= {15: "P", 18: "E"}
_NANO = 10**9


def quantity_format(value: str | int | float) -> str:
    """The Format Go's parser gives `value`: by its suffix (a JSON number is DecimalSI)."""
    suffix = _NUMBER.fullmatch(str(value).strip())
    text = suffix["suffix"] if suffix else ""
    if text in _BINARY_SI:
        return BINARY_SI
    return DECIMAL_EXPONENT if text[:1] in ("e", "E") else DECIMAL_SI


def quantity_string(q: Fraction, fmt: str = DECIMAL_SI) -> str:
    """resource.Quantity.String() of `q` held in format `fmt` (CanonicalizeBytes)."""
    if q == 0:
        return "0"
    sign = "-" if q < 0 else ""
    q = abs(q)
    if fmt == BINARY_SI and q >= 1024 and q.denominator == 1:
        number, power = q.numerator, 0
        while number % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
            number, power = number // 1024, power + 1
        return f"{sign}{number}{_BINARY_SUFFIXES[power]}"
    # Go keeps at most nano precision, rounding up when parsing.
    nanos = math.ceil(q * _NANO)
    number, exponent = nanos, -9
    while number % 10 == 0:
        number, exponent = number // 10, exponent + 1
    shift = exponent % 3  # an exponent that is a multiple of 3, the mantissa an integer
    number, exponent = number * 10**shift, exponent - shift
    if fmt == DECIMAL_EXPONENT or exponent not in _DECIMAL_SUFFIXES:
        return f"{sign}{number}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{number}{_DECIMAL_SUFFIXES[exponent]}"
