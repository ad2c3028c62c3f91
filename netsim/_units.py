"""Quantities with units, as scenario files write them ("25 GB/s", "1.5 us", "4 MiB").

Everything inside netsim is SI: seconds, bytes, bytes per second. Plain numbers are taken as SI.
"""

from __future__ import annotations

import math
import numbers
import re
import reprlib

_PREFIX = {
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9, "ps": 1e-12}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµμ/]*)\s*$")


def _split(text: str, field: str) -> tuple[float, str]:
    m = _NUMBER.match(text)
    if not m:
        raise ValueError(f"{field}: cannot read {reprlib.repr(text)} as a number with a unit")
    return float(m.group(1)), m.group(2)


def _bytes_unit(unit: str) -> float | None:
    """Factor of a size unit: B, kB, MiB, Gb (bits), ..."""
    for prefix, factor in _PREFIX.items():
        if unit == prefix + "B":
            return factor
        if unit in (prefix + "b", prefix + "bit"):
            return factor / 8
    return None


def parse_quantity(value, kind: str, field: str) -> float:
    """Returns `value` in SI units; kind is "bytes", "time" or "bandwidth".

    Raises ValueError naming `field` when the value or its unit is not understood. The result may be
    negative or non-finite ("1e999 s"): `netsim._checks.quantity` checks the range.
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_":
        try:
            return float(value)
        except OverflowError:  # an int beyond float64's range (~1.8e308)
            raise ValueError(f"{field}: {reprlib.repr(value)} is beyond float64's range (~1.8e308)") from None
    if not isinstance(value, str):
        raise ValueError(f"{field}: expected a number or a string with a unit, got {reprlib.repr(value)}")
    number, unit = _split(value, field)
    if unit == "":
        return number
    if kind == "time" and unit in _TIME:
        return number * _TIME[unit]
    if kind == "bytes" and (factor := _bytes_unit(unit)) is not None:
        return number * factor
    if kind == "bandwidth":
        for suffix in ("/s", "ps"):
            if unit.endswith(suffix) and (factor := _bytes_unit(unit[: -len(suffix)])) is not None:
                return number * factor
    examples = {"time": "'2 us', '1.5ms'", "bytes": "'4 MiB', '1GB'", "bandwidth": "'25 GB/s', '100Gbps'"}
    raise ValueError(
        f"{field}: unknown {kind} unit {unit!r} in {reprlib.repr(value)} (examples: {examples[kind]})"
    )


def format_quantity(value: float, kind: str) -> str:
    """Short human form for summaries: 1.2 ms, 25.0 GB/s, 4.0 MiB."""
    if not math.isfinite(value):
        return str(value)
    if kind == "time":
        for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
            if abs(value) >= factor or unit == "ns":
                return f"{value / factor:.4g} {unit}"
    suffix = "/s" if kind == "bandwidth" else ""
    base = 1000.0
    for unit in ("", "k", "M", "G", "T"):
        if abs(value) < base or unit == "T":
            return f"{value:.4g} {unit}B{suffix}"
        value /= base
    raise AssertionError("unreachable")


def format_bytes(n: float) -> str:
    """A byte count as sizes are written: binary (4 MiB, 8 KiB) when a whole number of its largest binary
    unit, else decimal (1 MB, 1.573 MB; see `format_quantity`)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}" if float(n / scale).is_integer() else format_quantity(n, "bytes")
    return format_quantity(n, "bytes")
