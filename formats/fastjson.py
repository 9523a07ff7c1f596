"""The JSON dialect of Alibaba fastjson, as RocketMQ writes config files and remoting bodies.

Specified by formats.md §5.3 and protocol.md: maps with integer keys are written with bare
keys (``{0:123,1:456}``), maps keyed by objects put the object itself in key position, and the
pretty form indents with tabs and puts the entries of a non-string-keyed map on one line.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays that ``loads`` returns (rmq's own limit): the code that
walks a parsed value (``dumps``, the beans) recurses once per level, as does the dialect parser."""


class ObjectKey(tuple):
    """A map key that is itself a JSON object (e.g. a ``MessageQueue``); hashable, ordered."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self)

    @classmethod
    def of(cls, mapping: Mapping[str, Any]) -> ObjectKey:
        return cls(mapping.items())


class FastjsonDecodeError(ValueError):
    def __init__(self, message: str, pos: int):
        super().__init__(f"{message} at character {pos}")
        self.pos = pos


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def parse_int(token: str) -> int | str:
    """A JSON integer's digits as an ``int``; past ``int()``'s digit limit, the digits as they came
    (fastjson reads a ``BigInteger``, whose ``toString`` a header's String field receives)."""
    limit = sys.get_int_max_str_digits()
    if limit and len(token) - token.startswith("-") > limit:
        return token
    return int(token)


class NestingError(ValueError):
    """JSON nested deeper than the limit."""

    def __init__(self, limit: int):
        super().__init__(f"nested more than {limit} levels deep")
        self.limit = limit


def value_depth(value: Any, limit: int | None = None) -> int:
    """How deeply dicts, lists and tuples nest in a parsed value (a scalar is 0, ``[[]]`` is 2),
    level by level without recursion; stops at ``limit + 1`` when given."""
    depth = 0
    level = [value] if type(value) in _CONTAINERS else []
    while level:
        depth += 1
        if limit is not None and depth > limit:
            return depth
        below: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is dict:
                below += [v for v in item.values() if type(v) in _CONTAINERS]
                below += [k for k in item if type(k) in _CONTAINERS]  # the dialect's object keys
            elif kind is ObjectKey:
                below += [v for _, v in item if type(v) in _CONTAINERS]
            else:
                below += [v for v in item if type(v) in _CONTAINERS]
        level = below
    return depth


def check_depth(value: Any, text: str | bytes, limit: int = MAX_DEPTH) -> None:
    """Raise ``NestingError`` when ``value``, parsed from ``text``, nests deeper than ``limit``;
    text with at most ``limit`` opening brackets cannot, and is passed after two counts."""
    if isinstance(text, str):
        opened = text.count("{") + text.count("[")
    else:
        opened = text.count(b"{") + text.count(b"[")
    if opened > limit and value_depth(value, limit) > limit:
        raise NestingError(limit)


_BARE = re.compile(r"[A-Za-z_$][\w$]*")
_INT = r"-?(?:0|[1-9]\d*)"
_INT_PAIR = re.compile(rf"({_INT})[ \t\n\r]*:[ \t\n\r]*({_INT})")
_PAIR = rf"{_INT}[ \t\n\r]*:[ \t\n\r]*{_INT}"
# a whole map of integers to integers, as fastjson writes offset tables (a trailing comma allowed)
_INT_MAP = re.compile(rf"\{{[ \t\n\r]*(?:{_PAIR}(?:[ \t\n\r]*,[ \t\n\r]*{_PAIR})*[ \t\n\r]*,?)?[ \t\n\r]*\}}")
_decoder = json.JSONDecoder()


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse strict JSON or fastjson's dialect. Text nested deeper than ``max_depth`` raises
    ``NestingError`` (a ``ValueError``): json's C parser stops near the recursion limit (its own
    guard), what it returns is measured without recursion, and the dialect parser counts levels."""
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("utf-8")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise NestingError(max_depth) from None
    else:
        check_depth(value, text, max_depth)
        return value
    parser = _Parser(text, max_depth)
    value = parser.value()
    parser.skip_ws()
    if parser.pos != len(text):
        raise FastjsonDecodeError("extra data", parser.pos)
    return value


_CONTAINERS = frozenset((dict, list, tuple, ObjectKey))


class _Parser:
    def __init__(self, text: str, max_depth: int = MAX_DEPTH):
        self.text = text
        self.pos = 0
        self.max_depth = max_depth
        self.depth = 0  # objects and arrays open

    def enter(self, ch: str) -> None:
        self.expect(ch)
        self.depth += 1
        if self.depth > self.max_depth:
            raise NestingError(self.max_depth)

    def skip_ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def peek(self) -> str:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise FastjsonDecodeError("unexpected end of input", self.pos)
        return self.text[self.pos]

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            raise FastjsonDecodeError(f"expected {ch!r}", self.pos)
        self.pos += 1

    def value(self) -> Any:
        ch = self.peek()
        if ch == "{":
            return self.object()
        if ch == "[":
            return self.array()
        if ch == '"':
            value, self.pos = _decoder.raw_decode(self.text, self.pos)
            return value
        number = _NUMBER.match(self.text, self.pos)
        if number:
            self.pos = number.end()
            token = number.group()
            return float(token) if any(c in token for c in ".eE") else parse_int(token)
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return value
        raise FastjsonDecodeError("unexpected character", self.pos)

    def key(self) -> Any:
        ch = self.peek()
        if ch == "{":
            return ObjectKey.of(self.object())
        if ch == "[":
            return tuple(self.array())
        bare = _BARE.match(self.text, self.pos)
        if bare and ch != '"':
            self.pos = bare.end()
            return bare.group()
        return self.value()

    def members(self, opening: str, closing: str, *, trailing_comma: bool) -> Iterator[None]:
        """Enter an object or array and yield once per member, which the caller parses at each
        yield; the commas, the closing bracket and the nesting depth are handled here. Objects
        tolerate a trailing comma (fastjson does), arrays do not."""
        self.enter(opening)
        if self.peek() == closing:
            self.pos += 1
        else:
            while True:
                yield
                ch = self.peek()
                self.pos += 1
                if ch == closing:
                    break
                if ch != ",":
                    raise FastjsonDecodeError(f"expected ',' or '{closing}'", self.pos - 1)
                if trailing_comma and self.peek() == closing:
                    self.pos += 1
                    break
        self.depth -= 1

    def object(self) -> dict[Any, Any]:
        flat = _INT_MAP.match(self.text, self.pos)
        if flat is not None and self.depth < self.max_depth:  # {0:54,1:67}: the offset tables
            self.pos = flat.end()
            return {parse_int(k): parse_int(v) for k, v in _INT_PAIR.findall(flat.group())}
        result: dict[Any, Any] = {}
        for _ in self.members("{", "}", trailing_comma=True):
            start = self.pos
            key = self.key()
            self.expect(":")
            try:
                result[key] = self.value()
            except TypeError:  # an object or array key holding objects or arrays
                raise FastjsonDecodeError("a map key nests an object or array", start) from None
        return result

    def array(self) -> list[Any]:
        result: list[Any] = []
        for _ in self.members("[", "]", trailing_comma=False):
            result.append(self.value())
        return result


def _scalar(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _key(key: Any, indent: int, pretty: bool) -> str:
    if isinstance(key, ObjectKey):
        return dumps(key.as_dict(), pretty=False)
    if isinstance(key, bool) or key is None:
        return _scalar(key)
    if isinstance(key, int | float):
        return str(key)
    return _scalar(str(key))


def dumps(value: Any, *, pretty: bool = False) -> str:
    """Serialise like ``JSON.toJSONString(obj, prettyFormat)`` for the shapes RocketMQ uses.

    Maps keep their insertion order (callers sort bean fields themselves); integer and object
    keys are written bare. A value whose maps are all ``dict``s keyed by strings is written by
    ``json``'s own encoder, whose compact form and tab-indented form are this dialect's, byte for
    byte (``tree_dumps`` is the reference; tests compare the two).
    """
    if isinstance(value, dict | list | tuple) and _string_keyed(value, 0):
        if pretty:
            return json.dumps(value, indent="\t", separators=(",", ":"), ensure_ascii=False)
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return tree_dumps(value, pretty=pretty)


def _string_keyed(value: Any, depth: int) -> bool:
    """Whether every map within ``value`` is a ``dict`` with string keys only."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return False
            if isinstance(item, Mapping | list | tuple) and not _string_keyed(item, depth + 1):
                return False
        return True
    if isinstance(value, list | tuple):
        nested = (item for item in value if isinstance(item, Mapping | list | tuple))
        return all(_string_keyed(item, depth + 1) for item in nested)
    return not isinstance(value, Mapping)


def tree_dumps(value: Any, *, pretty: bool = False, indent: int = 0) -> str:
    """``dumps`` written out level by level: any key type (bare integer and object keys)."""
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        string_keyed = all(isinstance(k, str) for k in value)
        inner = indent + 1
        if not pretty:
            return "{" + ",".join(f"{_key(k, inner, False)}:{tree_dumps(v)}" for k, v in value.items()) + "}"
        if string_keyed:
            body = ",".join(
                "\n" + "\t" * inner + f"{_scalar(k)}:{tree_dumps(v, pretty=True, indent=inner)}"
                for k, v in value.items()
            )
        else:
            body = ",".join(
                f"{_key(k, inner, True)}:{tree_dumps(v, pretty=True, indent=inner)}" for k, v in value.items()
            )
        return "{" + body + "\n" + "\t" * indent + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        if not pretty:
            return "[" + ",".join(tree_dumps(v) for v in value) + "]"
        inner = indent + 1
        body = ",".join("\n" + "\t" * inner + tree_dumps(v, pretty=True, indent=inner) for v in value)
        return "[" + body + "\n" + "\t" * indent + "]"
    return _scalar(value)
