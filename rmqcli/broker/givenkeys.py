"""broker.conf keys read from the file as given (``BrokerConfig.given``) by the services that own
them (POP, the timer), so that ``rmqcli.broker.config`` needs no field per key.

A value that does not parse, or lies outside the range rmq can serve, is refused at start with
one line naming the key (``UsageError``), as ``broker_config_from_properties`` refuses its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from rmqcli.errors import UsageError


def given_int(given: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    """``key`` as an integer within ``[low, high]``; ``default`` when the file does not set it."""
    raw = given.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise UsageError(f"broker.conf: {key}={raw!r} is not valid") from None
    if not low <= value <= high:
        raise UsageError(f"broker.conf: {key}={value} is outside [{low}, {high}]")
    return value


def given_bool(given: Mapping[str, str], key: str, default: bool) -> bool:
    """``key`` as Java's ``Boolean.parseBoolean`` reads it; ``default`` when the file does not set it."""
    raw = given.get(key)
    return default if raw is None else raw.strip().lower() == "true"
