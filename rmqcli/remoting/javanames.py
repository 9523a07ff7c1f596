"""Java property names of Python field names, the one rule every JSON and header key follows, and
the one rule a value becomes Java text by.

A RocketMQ bean property or ``CommandCustomHeader`` field is camelCase (``brokerAddr``); the same
field here is snake_case (``broker_addr``). The remoting codecs (``headers``, ``json_body``) and the
CLI's ``--json`` output all name keys with ``camel``; header values and string bean properties
given other values are written with ``java_text``. Standard library only at import: cheap.
"""

from __future__ import annotations

from typing import Any


def camel(name: str) -> str:
    """``broker_addr`` -> ``brokerAddr``: the Java name of a snake_case Python name."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_fields(obj: Any, *names: str) -> dict[str, Any]:
    """The attributes ``names`` of ``obj`` as a JSON mapping, in that order, each under its
    ``camel`` name; ``"key=name"`` puts the attribute ``name`` under ``key``."""
    out: dict[str, Any] = {}
    for name in names:
        key, _, attribute = name.rpartition("=")
        out[key or camel(attribute)] = getattr(obj, attribute)
    return out


def java_text(value: Any) -> str:
    """A value as Java's ``toString`` / fastjson's string coercion writes it (protocol.md A.3, A.5):
    text as it is, ``true``/``false``, numbers in decimal, anything else as fastjson's JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    from formats import fastjson

    return fastjson.dumps(value)
