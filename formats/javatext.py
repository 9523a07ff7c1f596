"""Java's texts of numbers, where RocketMQ writes them with ``String.valueOf`` or fastjson."""

from __future__ import annotations

import math
from decimal import Decimal


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
