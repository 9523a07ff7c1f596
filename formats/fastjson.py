"""The JSON dialect of Alibaba fastjson, as RocketMQ writes config files and remoting bodies.

Specified by FORMATS.md §5.3 and PROTOCOL.md: maps with integer keys are written with bare
keys (``{0:123,1:456}``), maps keyed by objects put the object itself in key position, and the
pretty form indents with tabs and puts the entries of a non-string-keyed map on one line.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from typing import Any


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


_BARE = re.compile(r"[A-Za-z_$][\w$]*")
_decoder = json.JSONDecoder()


def loads(text: str | bytes) -> Any:
    """Parse strict JSON or fastjson's dialect."""
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    parser = _Parser(text)
    value = parser.value()
    parser.skip_ws()
    if parser.pos != len(text):
        raise FastjsonDecodeError("extra data", parser.pos)
    return value


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

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

    def object(self) -> dict[Any, Any]:
        self.expect("{")
        result: dict[Any, Any] = {}
        if self.peek() == "}":
            self.pos += 1
            return result
        while True:
            key = self.key()
            self.expect(":")
            result[key] = self.value()
            ch = self.peek()
            self.pos += 1
            if ch == "}":
                return result
            if ch != ",":
                raise FastjsonDecodeError("expected ',' or '}'", self.pos - 1)
            if self.peek() == "}":  # tolerate a trailing comma
                self.pos += 1
                return result

    def array(self) -> list[Any]:
        self.expect("[")
        result: list[Any] = []
        if self.peek() == "]":
            self.pos += 1
            return result
        while True:
            result.append(self.value())
            ch = self.peek()
            self.pos += 1
            if ch == "]":
                return result
            if ch != ",":
                raise FastjsonDecodeError("expected ',' or ']'", self.pos - 1)


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


def dumps(value: Any, *, pretty: bool = False, indent: int = 0) -> str:
    """Serialise like ``JSON.toJSONString(obj, prettyFormat)`` for the shapes RocketMQ uses.

    Maps keep their insertion order (callers sort bean fields themselves); integer and object
    keys are written bare.
    """
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        string_keyed = all(isinstance(k, str) for k in value)
        inner = indent + 1
        if not pretty:
            return "{" + ",".join(f"{_key(k, inner, False)}:{dumps(v)}" for k, v in value.items()) + "}"
        if string_keyed:
            body = ",".join(
                "\n" + "\t" * inner + f"{_scalar(k)}:{dumps(v, pretty=True, indent=inner)}"
                for k, v in value.items()
            )
        else:
            body = ",".join(
                f"{_key(k, inner, True)}:{dumps(v, pretty=True, indent=inner)}" for k, v in value.items()
            )
        return "{" + body + "\n" + "\t" * indent + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        if not pretty:
            return "[" + ",".join(dumps(v) for v in value) + "]"
        inner = indent + 1
        body = ",".join("\n" + "\t" * inner + dumps(v, pretty=True, indent=inner) for v in value)
        return "[" + body + "\n" + "\t" * indent + "]"
    return _scalar(value)
