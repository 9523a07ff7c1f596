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


class JavaInt(int):
    """A ``java.lang.Integer``."""


class JavaLong(int):
    """A ``java.lang.Long``."""


class EvaluationError(Exception):
    """What Java throws while evaluating (NumberFormatException, ClassCastException, ...)."""


INT_RANGE = (-(1 << 31), (1 << 31) - 1)
LONG_RANGE = (-(1 << 63), (1 << 63) - 1)
_JAVA_INTEGER = re.compile(r"[+-]?\d+")  # any Unicode decimal digits, as Character.digit takes them
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_HEX_DOUBLE = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)


def java_integer(text: str, kind: type[int]) -> int:
    """``Integer.valueOf`` / ``Long.valueOf`` of a String: decimal digits, an optional sign, in range."""
    low, high = INT_RANGE if kind is JavaInt else LONG_RANGE
    if not _JAVA_INTEGER.fullmatch(text):
        raise EvaluationError(f"NumberFormatException: For input string: {text!r}")
    value = int(text)
    if not low <= value <= high:
        raise EvaluationError(f"NumberFormatException: For input string: {text!r}")
    return kind(value)


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


def java_compare(lv: object, rv: object) -> int:
    """``ComparisonExpression.__compare(lv, rv, true)``: -1 for classes it cannot bring together."""
    lc, rc = java_class(lv), java_class(rv)
    if lc != rc:
        if lc == "Boolean":
            if rc == "String":  # 4.9.8 casts the Boolean itself to String here
                raise EvaluationError("ClassCastException: Boolean cannot be cast to String")
            return -1
        if lc == "Integer":
            if rc == "Long":
                lv = JavaLong(lv)  # type: ignore[arg-type]
            elif rc == "Double":
                lv = float(lv)  # type: ignore[arg-type]
            elif rc == "String":
                rv = java_integer(rv, JavaInt)  # type: ignore[arg-type]
            else:
                return -1
        elif lc == "Long":
            if rc == "Integer":
                rv = JavaLong(rv)  # type: ignore[arg-type]
            elif rc == "Double":
                lv = float(lv)  # type: ignore[arg-type]
            elif rc == "String":
                rv = java_integer(rv, JavaLong)  # type: ignore[arg-type]
            else:
                return -1
        elif lc == "Double":
            if rc in ("Integer", "Long"):
                rv = float(rv)  # type: ignore[arg-type]
            elif rc == "String":
                rv = java_double(rv)  # type: ignore[arg-type]
            else:
                return -1
        else:  # String
            if rc == "Boolean":
                lv = lv.lower() == "true"  # type: ignore[union-attr]  # Boolean.valueOf
            elif rc in ("Integer", "Long"):
                lv = java_integer(lv, JavaInt if rc == "Integer" else JavaLong)  # type: ignore[arg-type]
            elif rc == "Double":
                lv = java_double(lv)  # type: ignore[arg-type]
            else:
                return -1
    if isinstance(lv, float):
        return _double_compare(lv, rv)  # type: ignore[arg-type]
    if isinstance(lv, str):  # String.compareTo: UTF-16 code units
        a, b = lv.encode("utf-16-be", "surrogatepass"), rv.encode("utf-16-be", "surrogatepass")  # type: ignore[union-attr]
        return (a > b) - (a < b)
    return (lv > rv) - (lv < rv)  # type: ignore[operator]
