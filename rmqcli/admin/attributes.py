"""RocketMQ 5.1.1's topic attributes (``common.attribute``): ``AttributeParser``'s ``+key=value,-key``
text, the attributes ``TopicAttributes`` knows, and the map's Java ``toString``.

Light (no I/O): mqadmin's ``updateTopic -a`` parses with it before anything is sent, the broker
again on UPDATE_AND_CREATE_TOPIC (``attributes`` header field). A ``ParseError`` carries the
exception the Java code throws: its class and message, and the source line of ``parseToMap`` (the
broker answers ``UtilAll.exceptionSimpleDesc`` of it, the parse being outside its ``try``).
"""

from __future__ import annotations

from dataclasses import dataclass

from formats.javahash import hashmap_spread, string_hash

PARSER_FRAME = "org.apache.rocketmq.common.attribute.AttributeParser.parseToMap(AttributeParser.java:{line})"
RUNTIME = "java.lang.RuntimeException"
OUT_OF_BOUNDS = "java.lang.ArrayIndexOutOfBoundsException"


class ParseError(ValueError):
    """What ``AttributeParser.parseToMap`` throws: ``java_class: message`` at ``line``."""

    def __init__(self, java_class: str, message: str, line: int):
        super().__init__(message)
        self.java_class = java_class
        self.message = message
        self.line = line

    def simple_desc(self) -> str:
        """``UtilAll.exceptionSimpleDesc``: the exception, then its first stack frame."""
        return f"{self.java_class}: {self.message}, {PARSER_FRAME.format(line=self.line)}"


def java_split(text: str, sep: str) -> list[str]:
    """``String.split`` with a one-character literal: trailing empty strings dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_to_map(text: str | None) -> dict[str, str]:
    """``AttributeParser.parseToMap``: ``{"+key": value, "-key": ""}``, in ``HashMap`` order."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for kv in java_split(text, ","):
        if "=" in kv:
            splits = java_split(kv, "=")
            if not splits:
                raise ParseError(OUT_OF_BOUNDS, "Index 0 out of bounds for length 0", 48)
            if len(splits) < 2:
                raise ParseError(OUT_OF_BOUNDS, "Index 1 out of bounds for length 1", 49)
            key, value = splits[0], splits[1]
            if "+" not in key:
                raise ParseError(RUNTIME, f"add/alter attribute format is wrong: {key}", 51)
        else:
            key, value = kv, ""
            if "-" not in key:
                raise ParseError(RUNTIME, f"delete attribute format is wrong: {key}", 57)
        if key in out:
            raise ParseError(RUNTIME, f"key duplication: {key}", 62)
        out[key] = value
    return hash_ordered(out)


def parse_to_string(attributes: dict[str, str] | None) -> str:
    """``AttributeParser.parseToString``: ``key=value`` (``key`` alone for an empty value), joined
    by commas in the map's order; empty for no map."""
    if not attributes:
        return ""
    return ",".join(k if not v else f"{k}={v}" for k, v in attributes.items())


def hash_ordered(mapping: dict[str, str], table: int = 16) -> dict[str, str]:
    """``mapping`` in the iteration order of a ``java.util.HashMap`` holding its keys (a table of
    ``table`` buckets, doubled past 3/4 full), as fastjson writes and ``toString`` shows it."""
    return {k: mapping[k] for k in hash_order(list(mapping), table)}


def hash_order(keys: list[str], table: int = 16) -> list[str]:
    while len(keys) > table * 3 // 4:
        table *= 2
    slots = {k: (hashmap_spread(string_hash(k)) & (table - 1), i) for i, k in enumerate(keys)}
    return sorted(keys, key=slots.__getitem__)


def map_string(attributes: dict[str, str]) -> str:
    """``AbstractMap.toString``: ``{k1=v1, k2=v2}``."""
    return "{" + ", ".join(f"{k}={v}" for k, v in attributes.items()) + "}"


@dataclass(frozen=True)
class EnumAttribute:
    """``EnumAttribute``: a value of ``universe``; ``changeable`` once the topic exists."""

    name: str
    changeable: bool
    universe: tuple[str, ...]  # in the order of guava's ``Sets.newHashSet`` (a table sized for them)
    default: str

    def problem(self, value: str) -> str | None:
        """``verify``'s message, None when ``value`` is allowed."""
        if value in self.universe:
            return None
        return f"value is not in set: [{', '.join(self.universe)}]"


def _enum(name: str, changeable: bool, values: tuple[str, ...], default: str) -> EnumAttribute:
    # Sets.newHashSet(E...) sizes its HashSet for the values: capacity n/0.75+1 (n + 1 below 3)
    n = len(values)
    capacity = n + 1 if n < 3 else int(n / 0.75 + 1.0)
    table = 1
    while table < capacity:
        table *= 2
    return EnumAttribute(name, changeable, tuple(hash_order(list(values), table)), default)


MESSAGE_TYPE = "message.type"
MESSAGE_TYPES = ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION")  # TopicMessageType
TOPIC_ATTRIBUTES: dict[str, EnumAttribute] = {
    a.name: a
    for a in (
        _enum("queue.type", False, ("BatchCQ", "SimpleCQ"), "SimpleCQ"),
        _enum("cleanup.policy", False, ("DELETE", "COMPACTION"), "DELETE"),
        _enum(MESSAGE_TYPE, True, MESSAGE_TYPES, "NORMAL"),
    )
}
"""``TopicAttributes.ALL`` (5.1.1): ``queue.type``, ``cleanup.policy`` (set at creation only) and
``message.type`` (changeable)."""
