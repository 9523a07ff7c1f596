"""Request bodies a processor reads at once (HEART_BEAT, LOCK_BATCH_MQ, UNLOCK_BATCH_MQ, ...).

A 4.9.8 processor decodes such a body with ``RemotingSerializable.decode`` and dereferences it: a
missing body (``new String(null)``), a ``null`` one, or a ``null`` where the bean has an object, a
list or a string, ends in a ``NullPointerException`` that ``NettyRemotingAbstract`` answers with
SYSTEM_ERROR. ``required_body`` raises ``BodyError`` for each of these, which the connection
answers with SYSTEM_ERROR and the error's message, without logging a traceback.

``properties_body`` reads the ``key=value`` text of UPDATE_BROKER_CONFIG (25) and
UPDATE_NAMESRV_CONFIG (318), ``properties_text`` writes the one GET_BROKER_CONFIG (26) and
GET_NAMESRV_CONFIG (319) answer (B.4, B.2).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, TypeVar

from rmqcli.remoting import json_body as jb
from rmqcli.remoting.json_body import BodyError

T = TypeVar("T")


def _json_name(field: dataclasses.Field) -> str:
    name = field.metadata.get("json")
    if name:
        return name
    head, *rest = field.name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """(attribute, JSON name, may be null) of each field of a bean class, read once per class."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, _json_name(f), _optional(hints[f.name])) for f in dataclasses.fields(cls))


def _no_nulls(value: Any, where: str) -> None:
    """BodyError for the first ``null`` in a place the bean does not declare optional."""
    for name, json_name, optional in _fields(type(value)):
        item = getattr(value, name)
        path = f"{where}.{json_name}"
        if item is None:
            if not optional:
                raise BodyError(f"{path} is null")
        elif isinstance(item, list | dict):
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, element in pairs:
                if element is None:
                    raise BodyError(f"{path}[{key!r}] is null")
                if dataclasses.is_dataclass(element):
                    _no_nulls(element, f"{path}[{key!r}]")
        elif dataclasses.is_dataclass(item):
            _no_nulls(item, path)


def required_body(cls: type[T], body: bytes) -> T:
    """The body as ``cls``; BodyError when it is missing, ``null``, or holds a ``null`` the bean
    cannot take (see the module's docstring)."""
    if not body:
        raise BodyError(f"{cls.__name__} body is missing")
    value = jb.decode(cls, body)
    if value is None:
        raise BodyError(f"{cls.__name__} body is null")
    _no_nulls(value, cls.__name__)
    return value


def properties_body(body: bytes, *, pairs_only: bool = False) -> dict[str, str]:
    """``MixAll.string2Properties`` of a config body: ``key=value`` lines, ``#``/``!`` comments
    skipped, keys and values stripped. A line without ``=`` is a key with an empty value, unless
    ``pairs_only`` (the name server's reading), which also skips a line with an empty key."""
    out: dict[str, str] = {}
    for line in body.decode("utf-8", "replace").splitlines():
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        key, sep, value = text.partition("=")
        if pairs_only and not (sep and key.strip()):
            continue
        out[key.strip()] = value.strip()
    return out


def properties_text(props: dict[str, str]) -> bytes:
    """``Configuration.getAllConfigsFormatString``: one ``key=value`` line a property, UTF-8."""
    return "".join(f"{k}={v}\n" for k, v in props.items()).encode("utf-8")
