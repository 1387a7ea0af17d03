"""Kubernetes quantity grammar, exact values and integer rounding."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from shared.api.quantity import (
    QuantityError,
    format_quantity,
    int_value,
    milli_value,
    parse_nonnegative,
    parse_quantity,
    quantity_format,
    quantity_string,
    resource_amount,
)

F = Fraction

VALID: list[tuple[str | int | float, Fraction]] = [
    # plain numbers
    ("0", F(0)),
    ("3", F(3)),
    ("007", F(7)),
    ("1.5", F(3, 2)),
    (".5", F(1, 2)),
    ("5.", F(5)),
    ("+1", F(1)),
    ("-1", F(-1)),
    ("-.5", F(-1, 2)),
    ("+5.", F(5)),
    # decimal SI
    ("1n", F(1, 10**9)),
    ("1u", F(1, 10**6)),
    ("100m", F(1, 10)),
    ("1k", F(1000)),
    ("1M", F(10**6)),
    ("1G", F(10**9)),
    ("1T", F(10**12)),
    ("1P", F(10**15)),
    ("1E", F(10**18)),
    ("1.G", F(10**9)),
    # binary SI
    ("1Ki", F(1024)),
    ("1Mi", F(1024**2)),
    ("1.5Gi", F(3 * 1024**3, 2)),
    ("1Ti", F(1024**4)),
    ("1Pi", F(1024**5)),
    ("1Ei", F(1024**6)),
    # decimal exponents
    ("2e3", F(2000)),
    ("1e3", F(1000)),
    ("1E-3", F(1, 1000)),
    ("12e+2", F(1200)),
    ("1.5e1", F(15)),
    ("1e0", F(1)),
    ("1e100", F(10**100)),
    ("1e-100", F(1, 10**100)),
    ("1e0003", F(1000)),
    # JSON/YAML numbers
    (2, F(2)),
    (0, F(0)),
    (-3, F(-3)),
    (0.5, F(1, 2)),
    (0.1, F(1, 10)),
    (1e-7, F(1, 10**7)),
    (2.0, F(2)),
]


@pytest.mark.parametrize(("value", "expected"), VALID, ids=[repr(v) for v, _ in VALID])
def test_parse_valid(value: str | int | float, expected: Fraction) -> None:
    assert parse_quantity(value) == expected


INVALID: list[object] = [
    "",
    "1.5.2",
    "Gi",
    "1 Gi",
    " 1",
    "1 ",
    "1\n",
    "1Gb",
    "1kk",
    "1K",
    "1ki",
    "--1",
    "+-1",
    "-",
    ".",
    "1e",
    "e3",
    "1ei",
    "1e1.5",
    "1e+",
    "1i",
    ".5i",
    "0.1mi",
    "1Gi3",
    "abc",
    "\u0661",  # ARABIC-INDIC DIGIT ONE: a regex \d would accept it
    True,
    False,
    None,
    float("nan"),
    float("inf"),
    float("-inf"),
    [1],
]


@pytest.mark.parametrize("value", INVALID, ids=[repr(v) for v in INVALID])
def test_parse_invalid(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value, field="x")  # type: ignore[arg-type]


def test_error_names_field_and_value() -> None:
    field = "spec.containers[0].resources.requests.cpu"
    with pytest.raises(QuantityError) as err:
        parse_quantity("1.5.2", field=field)
    assert str(err.value) == (
        f"{field}: invalid quantity '1.5.2': must match the Kubernetes quantity grammar "
        "(e.g. 100m, 1.5Gi, 2e3)"
    )


def test_quantity_error_is_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize("value", ["-1", "-100m", -1, -0.5, "-1e-9"], ids=repr)
def test_nonnegative_rejects_negative(value: str | int | float) -> None:
    field = "status.allocatable.cpu"
    with pytest.raises(QuantityError, match=r"^status\.allocatable\.cpu: must be non-negative"):
        parse_nonnegative(value, field=field)


def test_nonnegative_message() -> None:
    with pytest.raises(QuantityError) as err:
        parse_nonnegative("-1", field="spec.overhead.cpu")
    assert str(err.value) == "spec.overhead.cpu: must be non-negative, got '-1'"


@pytest.mark.parametrize("value", ["0", "-0", -0.0, "1"], ids=repr)
def test_nonnegative_accepts(value: str | float) -> None:
    assert parse_nonnegative(value, field="f") >= 0


HOSTILE: list[tuple[str, str]] = [
    ("1e999999999", "exponent too large"),
    ("1e-999999999", "exponent too large"),
    ("1e101", "exponent too large"),
    ("1E" + "9" * 10_000, "exponent too large"),
    ("9" * 101, "too long"),
    ("0." + "1" * 100, "too long"),
    ("1" * 1_000_000, "too long"),
]


@pytest.mark.parametrize(("value", "reason"), HOSTILE, ids=[v[:16] for v, _ in HOSTILE])
def test_hostile_inputs_rejected_fast(value: str, reason: str) -> None:
    start = time.perf_counter()
    with pytest.raises(QuantityError, match=reason) as err:
        parse_quantity(value, field="f")
    assert time.perf_counter() - start < 0.5
    assert len(str(err.value)) < 200  # the value is not echoed in full


def test_huge_float_rejected() -> None:
    with pytest.raises(QuantityError, match="exponent too large"):
        parse_quantity(1e300)


ROUNDING: list[tuple[str, str, int]] = [
    # (resource, quantity, amount): cpu in millicores (rounded up), others in units (rounded up)
    ("cpu", "0.1m", 1),
    ("cpu", "1n", 1),
    ("cpu", "1.5", 1500),
    ("cpu", "100m", 100),
    ("cpu", "1e3", 1_000_000),
    ("cpu", "0", 0),
    ("cpu", "2", 2000),
    ("memory", "1Ki", 1024),
    ("memory", "1.5Gi", 1610612736),
    ("memory", "1e3", 1000),
    ("memory", "1k", 1000),
    ("memory", "100m", 1),
    ("memory", "128974848", 128974848),
    ("nvidia.com/gpu", "2", 2),
    ("hugepages-2Mi", "4Mi", 4 * 1024 * 1024),
    ("ephemeral-storage", "1.1", 2),
]


@pytest.mark.parametrize(
    ("name", "value", "amount"), ROUNDING, ids=[f"{n}={v}" for n, v, _ in ROUNDING]
)
def test_resource_amount(name: str, value: str, amount: int) -> None:
    assert resource_amount(name, parse_quantity(value)) == amount


@pytest.mark.parametrize(
    ("q", "milli", "units"),
    [
        (F(1, 10_000), 1, 1),
        (F(3, 2), 1500, 2),
        (F(-3, 2), -1500, -1),  # ceil: toward +inf
        (F(-1, 10_000), 0, 0),
        (F(7), 7000, 7),
    ],
    ids=["tiny", "one-and-half", "negative", "negative-tiny", "integer"],
)
def test_milli_and_int_value_round_up(q: Fraction, milli: int, units: int) -> None:
    assert milli_value(q) == milli
    assert int_value(q) == units


FORMATS: list[tuple[Fraction, str]] = [
    (F(3), "3"),
    (F(0), "0"),
    (F(-2), "-2"),
    (F(1, 10), "100m"),
    (F(3, 2), "1500m"),
    (F(-1, 10), "-100m"),
    (F(1, 10_000), "0.0001"),
    (F(-1, 10**9), "-0.000000001"),
    (F(1024**3), "1073741824"),
    (F(1, 3), "0.333333333"),
]


@pytest.mark.parametrize(("q", "text"), FORMATS, ids=[t for _, t in FORMATS])
def test_format_quantity(q: Fraction, text: str) -> None:
    assert format_quantity(q) == text


@pytest.mark.parametrize(
    "q", [F(3), F(0), F(-7), F(1, 10), F(-1, 1000), F(1234567, 1000), F(1, 10**6)], ids=str
)
def test_format_round_trips(q: Fraction) -> None:
    assert parse_quantity(format_quantity(q)) == q


# Quantity.String(): the canonical text the API server quotes values back in.
GO_STRINGS: list[tuple[str, str]] = [
    ("0", "0"),
    ("1", "1"),
    ("0.5", "500m"),
    ("1.5", "1500m"),
    ("1500", "1500"),
    ("2000", "2k"),
    ("1e3", "1e3"),
    ("1500e0", "1500"),
    ("100Mi", "100Mi"),
    ("1536Mi", "1536Mi"),
    ("6Gi", "6Gi"),
    ("1024Mi", "1Gi"),
    ("512Ki", "512Ki"),
    ("0.5Ki", "512"),  # below 1024 a binary quantity shows in decimal
    ("1.5Mi", "1536Ki"),
    ("0.1n", "1n"),  # Go keeps nano precision, rounding up
    (".3", "300m"),
    ("-2Gi", "-2Gi"),
]


@pytest.mark.parametrize(("text", "shown"), GO_STRINGS, ids=[t for t, _ in GO_STRINGS])
def test_quantity_string(text: str, shown: str) -> None:
    assert quantity_string(parse_quantity(text), quantity_format(text)) == shown


def test_quantity_string_of_a_sum_keeps_the_first_format() -> None:
    total = parse_quantity("100Mi") + parse_quantity("50Mi")
    assert quantity_string(total, quantity_format("100Mi")) == "150Mi"
    assert quantity_string(parse_quantity("1") + parse_quantity("0.5")) == "1500m"
    assert quantity_format(1024) == quantity_format(0.5) == "DecimalSI"
