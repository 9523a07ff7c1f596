"""The Java values a SQL92 selector compares, and ``ComparisonExpression.__compare``.

A message's properties are Java Strings; a selector's constants are Integer or Long (a decimal
literal: Integer when it fits), Double (a literal with a point or an exponent), String or Boolean.
Comparing two of different classes converts one as 4.9.8's ``__compare`` does with
``convertStringExpressions`` on (``SelectorParser.parse`` always sets it): a String meeting a
number is parsed with that number's ``valueOf``, and a ``NumberFormatException`` fails the whole
evaluation (the broker then counts the message as not matching). Byte, Short and Float values
never occur here.
"""

from __future__ import annotations

import math
import re

from formats.javatext import INT_RANGE, LONG_RANGE, parse_integer


class JavaInt(int):
    """A ``java.lang.Integer``."""


class JavaLong(int):
    """A ``java.lang.Long``."""


class EvaluationError(Exception):
    """What Java throws while evaluating (NumberFormatException, ClassCastException, ...)."""


_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_HEX_DOUBLE = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)


def java_integer(text: str, kind: type[int]) -> int:
    """``Integer.valueOf`` / ``Long.valueOf`` of a String: decimal digits, an optional sign, in range."""
    try:
        return kind(parse_integer(text, INT_RANGE if kind is JavaInt else LONG_RANGE))
    except ValueError:
        raise EvaluationError(f"NumberFormatException: For input string: {text!r}") from None


def java_double(text: str) -> float:
    """``Double.valueOf`` of a String: trimmed of characters up to space, decimal or hex digits,
    ``NaN``, ``Infinity``, an optional ``f``/``d`` suffix."""
    trimmed = _java_trim(text)
    if _JAVA_DOUBLE.fullmatch(trimmed):
        body = trimmed.rstrip("fFdD") if not trimmed.endswith(("NaN", "Infinity")) else trimmed
        return float(body.replace("Infinity", "inf").replace("NaN", "nan"))
    hexed = _JAVA_HEX_DOUBLE.fullmatch(trimmed)
    if hexed:
        return float.fromhex(hexed.group(1) + "0x" + hexed.group(2))
    raise EvaluationError(f"NumberFormatException: For input string: {text!r}")


def _java_trim(text: str) -> str:
    """``String.trim``: strips the characters up to U+0020 from both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def java_class(value: object) -> str:
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, JavaInt):
        return "Integer"
    if isinstance(value, JavaLong):
        return "Long"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, str):
        return "String"
    raise TypeError(f"not a selector value: {value!r}")


def _double_compare(a: float, b: float) -> int:
    """``Double.compare``: NaN above everything and equal to itself; -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = math.isnan(a), math.isnan(b)
    if a_nan or b_nan:
        return (a_nan > b_nan) - (a_nan < b_nan)
    a_neg, b_neg = math.copysign(1, a) < 0, math.copysign(1, b) < 0
    return (b_neg > a_neg) - (b_neg < a_neg)


_NUMBER_CLASSES = ("Integer", "Long", "Double")  # each converts to the ones after it


def _value_of(kind: str, text: str) -> object:
    """``Integer.valueOf``, ``Long.valueOf`` or ``Double.valueOf`` of ``text``."""
    if kind == "Double":
        return java_double(text)
    return java_integer(text, JavaInt if kind == "Integer" else JavaLong)


def _widened(value: object, kind: str) -> object:
    return float(value) if kind == "Double" else JavaLong(value)  # type: ignore[arg-type]


def java_compare(lv: object, rv: object) -> int:
    """``ComparisonExpression.__compare(lv, rv, true)``: -1 for classes it cannot bring together.
    Of two numbers the narrower is widened; a String meeting a number or a Boolean is parsed as
    that class (a Boolean meeting a String fails: 4.9.8 casts the Boolean itself)."""
    lc, rc = java_class(lv), java_class(rv)
    if lc != rc:
        if lc in _NUMBER_CLASSES and rc in _NUMBER_CLASSES:
            if _NUMBER_CLASSES.index(lc) < _NUMBER_CLASSES.index(rc):
                lv = _widened(lv, rc)
            else:
                rv = _widened(rv, lc)
        elif lc in _NUMBER_CLASSES and rc == "String":
            rv = _value_of(lc, rv)  # type: ignore[arg-type]
        elif lc == "String" and rc in _NUMBER_CLASSES:
            lv = _value_of(rc, lv)  # type: ignore[arg-type]
        elif lc == "String" and rc == "Boolean":
            lv = lv.lower() == "true"  # type: ignore[union-attr]  # Boolean.valueOf
        elif lc == "Boolean" and rc == "String":
            raise EvaluationError("ClassCastException: Boolean cannot be cast to String")
        else:
            return -1
    if isinstance(lv, float):
        return _double_compare(lv, rv)  # type: ignore[arg-type]
    if isinstance(lv, str):  # String.compareTo: UTF-16 code units
        a, b = lv.encode("utf-16-be", "surrogatepass"), rv.encode("utf-16-be", "surrogatepass")  # type: ignore[union-attr]
        return (a > b) - (a < b)
    return (lv > rv) - (lv < rv)  # type: ignore[operator]
