"""Java's texts of numbers and booleans: where RocketMQ writes them with ``String.valueOf`` or
fastjson, and where it reads them from a header, a property, a config file or a command
(``Integer.parseInt``, ``Long.parseLong``, ``Boolean.parseBoolean``)."""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal

INT_RANGE = (-(1 << 31), (1 << 31) - 1)
LONG_RANGE = (-(1 << 63), (1 << 63) - 1)
_DIGITS = re.compile(r"[+-]?\d+")  # \d is Unicode's Nd, as Character.digit(ch, 10) is


def java_double(value: float) -> str:
    """fastjson's text of a double: ``Double.toString`` (shortest digits; ``1.0E7``, ``5.0E-4``
    outside [1e-3, 1e7)), ``null`` for NaN and the infinities."""
    if math.isnan(value) or math.isinf(value):
        return "null"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(text) - 1 + int(exponent)
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def java_fixed(value: float, places: int) -> str:
    """``String.format("%.Nf", d)``: the shortest decimal digits of ``d`` rounded half up (0.125
    gives ``0.13``), ``NaN``, ``-0.00`` for minus zero."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def java_round_half_up(value: float) -> str:
    """``new BigDecimal(d).setScale(0, ROUND_HALF_UP)``: the exact binary value rounded (no minus zero)."""
    rounded = Decimal(value).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return "0" if rounded == 0 else str(rounded)


def parse_boolean(text: str | None) -> bool:
    """``Boolean.parseBoolean``: true for ``true`` in any case, false for anything else (``None``,
    ``yes``, `` true`` with a space)."""
    return text is not None and text.lower() == "true"


class JavaNumberError(ValueError):
    """``NumberFormatException``, with Java's text."""

    def __init__(self, text: str):
        super().__init__(f'java.lang.NumberFormatException: For input string: "{text}"')
        self.text = text


def parse_integer(text: str, bounds: tuple[int, int]) -> int:
    """``Integer.parseInt`` / ``Long.parseLong`` (and ``valueOf``) for ``bounds`` ``INT_RANGE`` or
    ``LONG_RANGE``: an optional sign and decimal digits (any Unicode decimal digit, as
    ``Character.digit`` takes it) within the range; nothing is trimmed."""
    if _DIGITS.fullmatch(text):
        value = int(text)
        if bounds[0] <= value <= bounds[1]:
            return value
    raise JavaNumberError(text)


def parse_int(text: str) -> int:
    """``Integer.parseInt``."""
    return parse_integer(text, INT_RANGE)


def parse_long(text: str) -> int:
    """``Long.parseLong``."""
    return parse_integer(text, LONG_RANGE)
