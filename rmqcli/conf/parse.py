"""Reading broker.conf: the file (``read_properties``), a value by its key's row (``parse_value``),
and the file as read with its values typed (``BrokerConf``).

The rules are the Java broker's, ``MixAll.properties2Object``: a boolean is true for ``true`` in
any case and false for any other text (``Boolean.parseBoolean``); an int or a long is an optional
sign and decimal digits within the Java type's range (``Integer.parseInt``, ``Long.parseLong``); an
enum is one of its names, case and all (``Enum.valueOf``); a string is the text. Where a Java
broker drops a value it cannot parse and keeps the default, rmq refuses it at start, with one
``UsageError`` line naming the key; so too a value outside the range rmq takes (``Key.low``,
``high``, ``choices``). Every value is trimmed: ``Properties.load`` drops the blanks before a value
but keeps those after it, and ``properties2Object`` trims nothing, so ``listenPort=10911 `` is a
number rmq takes and a Java broker drops.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from formats.javatext import INT_RANGE, LONG_RANGE, parse_integer
from rmqcli.conf.keys import BOOL, ENUM, INT, KEYS, LONG, Key, settings_of
from rmqcli.errors import UsageError

_RANGES = {INT: INT_RANGE, LONG: LONG_RANGE}
V = TypeVar("V")


def read_properties(path: Path) -> dict[str, str]:
    """Java ``.properties``: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments."""
    result: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from exc
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                result[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            result[line] = ""
    return result


def refused(problem: str) -> UsageError:
    """The one line a bad broker.conf value stops the start with."""
    return UsageError(f"broker.conf: {problem}")


def parse_value(key: Key, raw: str) -> Any:
    """``raw`` as the Java broker reads ``key``, within the range rmq takes (else ``UsageError``)."""
    text = raw.strip()
    if key.kind == BOOL:
        if key.choices and text.lower() not in key.choices:
            raise refused(f"{key.name}={text!r} is not true or false")
        return text.lower() == "true"
    if key.kind == ENUM:
        if text not in key.choices:
            raise refused(f"{key.name} must be one of {', '.join(key.choices)}, not {text!r}")
        return text
    if key.kind not in _RANGES:
        return text
    try:
        value = parse_integer(text, _RANGES[key.kind])
    except ValueError:
        raise refused(f"{key.name}={text!r} is not valid") from None  # not an int (a long) of Java's range
    above_low = key.low is None or value >= key.low
    if key.high is not None and not (above_low and value <= key.high):
        raise refused(f"{key.name}={value} is outside [{key.low}, {key.high}]")
    if not above_low:
        if key.low == 1:
            raise refused(f"{key.name}={text!r} is not a positive number; it must be positive")
        raise refused(f"{key.name}={value} is below {key.low}")
    return value


def text(value: object) -> str:
    """A typed value as a Java broker prints it (GET_BROKER_CONFIG); a list joined with commas."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    if value is None:
        return ""
    return str(value)


class BrokerConf(Mapping[str, str]):
    """broker.conf as read: its keys in the file's order with their text (a ``Mapping``), and the
    value of any key of the table, typed (``value``; the default when the file does not set it).

    A value is parsed when asked for, so an offline store command that reads only the store's keys
    is not stopped by a bad broker key; ``rmq serve`` asks for them all at start."""

    def __init__(self, given: Mapping[str, str] | Iterable[tuple[str, str]] = ()):
        self._given = dict(given)

    def __getitem__(self, name: str) -> str:
        return self._given[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._given)

    def __len__(self) -> int:
        return len(self._given)

    def __repr__(self) -> str:
        return f"BrokerConf({self._given!r})"

    def value(self, name: str) -> Any:
        key = KEYS[name]
        raw = self._given.get(name)
        return key.default if raw is None else parse_value(key, raw)

    def values(self, view: type, given_only: bool = False) -> dict[str, Any]:
        """The attributes of a typed view (``keys.setting``) with their values: every one, or only
        those the file sets."""
        return {
            attribute: self.value(name)
            for name, attribute in settings_of(view).items()
            if not given_only or name in self._given
        }

    def view(self, view: type[V]) -> V:
        """A typed view whose every attribute is read from the file (or is the table's default)."""
        return view(**self.values(view))

    def check(self, names: Iterable[str]) -> None:
        """Parse each of ``names`` the file sets: a bad value stops here."""
        for name in names:
            self.value(name)

    def unimplemented(self) -> list[str]:
        """The keys of the file rmq does not implement, sorted: not in the table, or a key rmq
        leaves alone, or one it implements with one value only (``Key.only``) given another."""
        return sorted(name for name, raw in self._given.items() if not _implemented(name, raw))


def _implemented(name: str, raw: str) -> bool:
    key = KEYS.get(name)
    if key is None or not key.implemented:
        return False
    # ``only`` is a boolean's, compared as Java reads it (``yes``: false), never refused here
    return key.only is None or (raw.strip().lower() == "true") == key.only


def conf_of(props: Mapping[str, str]) -> BrokerConf:
    """``props`` as a ``BrokerConf`` (itself when it is one)."""
    return props if isinstance(props, BrokerConf) else BrokerConf(props)


def load(path: Path | None) -> BrokerConf:
    """The file at ``path`` (none: an empty one), read once."""
    return BrokerConf(read_properties(path) if path is not None else {})
