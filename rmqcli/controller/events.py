"""The controller's events and their DLedger entry bodies (controller.md §3.2 and §3.3).

An entry body is the event type id as a big-endian i16 followed by the event's fastjson JSON in
UTF-8. The JSON holds the event's properties sorted by name, nulls left out, plus ``eventType`` (the
Java enum name), which readers ignore: the i16 types the entry. 5.1.1 writes it with fastjson's
default ``FastJsonConfig``, whose ``BrowserSecure`` feature escapes ``<``, ``>``, ``(`` and ``)`` as
``\\u003C``..., besides the usual escapes (``\\"``, ``\\\\``, ``\\b\\f\\n\\r\\t``, ``\\u00XX`` for the other
controls and for U+007F-U+009F, ``\\u2028``, ``\\u2029``); everything else is written as UTF-8. Sets
of ids come out in Java ``HashSet`` order (``javaorder``).

An empty body is a legal entry that carries no event (§3.3: a leader's first proposal, a read
barrier); ``decode_entry`` returns None for it. Any other body 5.1.1 could not turn into an event,
or whose event its state machine could not apply (no broker name, an unknown or non-positive type,
``ReadEvent``'s type 4, JSON that is not an object, an empty object, an alter event without its
set), raises ``CorruptDataError``: such an entry would stall a Java controller's state machine.
Readers are as lenient as fastjson where it matters: missing properties take the Java defaults, a
number or boolean may come as a string.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

from formats import fastjson
from rmqcli.controller.javaorder import copy_capacity, grown_capacity, hash_set_order
from rmqcli.errors import CorruptDataError

_I16 = struct.Struct(">h")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


class EventType(enum.IntEnum):
    """``EventType``: the i16 of an entry body; the member names are the Java enum names written as
    ``eventType``."""

    ALTER_SYNC_STATE_SET_EVENT = 1
    APPLY_BROKER_ID_EVENT = 2
    ELECT_MASTER_EVENT = 3
    READ_EVENT = 4  # never written: a read is an empty entry
    CLEAN_BROKER_DATA_EVENT = 5
    UPDATE_BROKER_ADDRESS = 6


@dataclass(frozen=True)
class AlterSyncStateSetEvent:
    """Replace a group's in-sync set (§2.5)."""

    broker_name: str
    new_sync_state_set: frozenset[int]

    event_type = EventType.ALTER_SYNC_STATE_SET_EVENT


@dataclass(frozen=True)
class ApplyBrokerIdEvent:
    """Give ``new_broker_id`` to a broker of the group, creating the group if needed (§2.16)."""

    cluster_name: str | None
    broker_name: str
    broker_address: str | None
    new_broker_id: int
    register_check_code: str | None

    event_type = EventType.APPLY_BROKER_ID_EVENT


@dataclass(frozen=True)
class ElectMasterEvent:
    """A master elected (``new_master_elected`` with its id) or the master gone with nobody to
    replace it (§3.5)."""

    broker_name: str
    new_master_elected: bool
    new_master_broker_id: int | None = None

    event_type = EventType.ELECT_MASTER_EVENT


@dataclass(frozen=True)
class CleanBrokerDataEvent:
    """Remove some ids of a group, or the whole group when ``broker_id_set_to_clean`` is None
    (§2.14)."""

    broker_name: str
    broker_id_set_to_clean: frozenset[int] | None = None

    event_type = EventType.CLEAN_BROKER_DATA_EVENT


@dataclass(frozen=True)
class UpdateBrokerAddressEvent:
    """A registered id now answers on another address (§2.7)."""

    cluster_name: str | None
    broker_name: str
    broker_address: str | None
    broker_id: int | None

    event_type = EventType.UPDATE_BROKER_ADDRESS


Event = (
    AlterSyncStateSetEvent
    | ApplyBrokerIdEvent
    | ElectMasterEvent
    | CleanBrokerDataEvent
    | UpdateBrokerAddressEvent
)


# --- writing -------------------------------------------------------------------------------------

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNICODE_ESCAPED = frozenset("<>()\u2028\u2029")


def _string(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or 0x7F <= code <= 0x9F or ch in _UNICODE_ESCAPED:
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    return "[" + ",".join(str(v) for v in value) + "]"  # a list of ids, already in Java order


def properties(event: Event) -> dict[str, Any]:
    """The event's JSON properties as 5.1.1 writes them, sorted by name, nulls left out; id sets
    as lists in ``HashSet`` order (the alter event's getter copies its set, the clean event's set
    was filled one id at a time)."""
    props: dict[str, Any] = {"brokerName": event.broker_name, "eventType": event.event_type.name}
    if isinstance(event, AlterSyncStateSetEvent):
        ids = sorted(event.new_sync_state_set)
        props["newSyncStateSet"] = hash_set_order(ids, copy_capacity(len(ids)))
    elif isinstance(event, ApplyBrokerIdEvent):
        props |= {
            "brokerAddress": event.broker_address,
            "clusterName": event.cluster_name,
            "newBrokerId": event.new_broker_id,
            "registerCheckCode": event.register_check_code,
        }
    elif isinstance(event, ElectMasterEvent):
        props |= {
            "newMasterBrokerId": event.new_master_broker_id,
            "newMasterElected": event.new_master_elected,
        }
    elif isinstance(event, CleanBrokerDataEvent):
        if event.broker_id_set_to_clean is not None:
            ids = sorted(event.broker_id_set_to_clean)
            props["brokerIdSetToClean"] = hash_set_order(ids, grown_capacity(len(ids)))
    else:
        props |= {
            "brokerAddress": event.broker_address,
            "brokerId": event.broker_id,
            "clusterName": event.cluster_name,
        }
    return {k: props[k] for k in sorted(props) if props[k] is not None}


def to_json(event: Event) -> bytes:
    """The event's fastjson text, UTF-8."""
    text = "{" + ",".join(f'"{k}":{_value(v)}' for k, v in properties(event).items()) + "}"
    return text.encode("utf-8")


def encode(event: Event) -> bytes:
    """The DLedger entry body of ``event`` (§3.3)."""
    return _I16.pack(event.event_type) + to_json(event)


# --- reading -------------------------------------------------------------------------------------


def _bad(message: str, path: str | None, offset: int | None) -> CorruptDataError:
    return CorruptDataError(f"controller event entry: {message}", path, offset)


class _Reader:
    def __init__(self, props: dict[str, Any], kind: EventType, path: str | None, offset: int | None):
        self.props, self.kind, self.path, self.offset = props, kind, path, offset

    def fail(self, message: str) -> CorruptDataError:
        return _bad(f"{self.kind.name}: {message}", self.path, self.offset)

    def string(self, name: str) -> str | None:
        value = self.props.get(name)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, bool | int):
            return str(value).lower() if isinstance(value, bool) else str(value)
        raise self.fail(f"{name} is not a string: {value!r}")

    def long(self, name: str) -> int | None:
        value = self.props.get(name)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise self.fail(f"{name} is not a number: {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int) or not _LONG_MIN <= value <= _LONG_MAX:
            raise self.fail(f"{name} is not a long: {value!r}")
        return value

    def boolean(self, name: str) -> bool:
        value = self.props.get(name)
        if value is None:
            return False
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if isinstance(value, int) and value in (0, 1):
            return value == 1
        raise self.fail(f"{name} is not a boolean: {value!r}")

    def ids(self, name: str) -> frozenset[int] | None:
        value = self.props.get(name)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.fail(f"{name} is not an array: {value!r}")
        out = set()
        for item in value:
            if item is None:
                raise self.fail(f"{name} holds a null id")
            out.add(_Reader({"id": item}, self.kind, self.path, self.offset).long("id"))
        return frozenset(i for i in out if i is not None)


def decode(body: bytes, path: str | None = None, offset: int | None = None) -> Event:
    """The event of a non-empty entry body; ``path`` and ``offset`` name where it was read, for the
    error message."""
    body = bytes(body)
    if len(body) < 2:
        raise _bad(f"body of {len(body)} bytes, shorter than its 2-byte event type", path, offset)
    (type_id,) = _I16.unpack_from(body)
    try:
        kind = EventType(type_id)
    except ValueError:
        raise _bad(f"unknown event type {type_id}", path, offset) from None
    if kind is EventType.READ_EVENT:
        raise _bad("event type 4 (ReadEvent) is never written with a body", path, offset)
    try:
        props = fastjson.loads(body[2:])
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(f"{kind.name}: JSON does not parse: {exc}", path, offset) from None
    if not isinstance(props, dict) or not props:
        raise _bad(f"{kind.name}: JSON is not a non-empty object", path, offset)
    r = _Reader(props, kind, path, offset)
    name = r.string("brokerName")
    if name is None:
        raise r.fail("no brokerName")
    if kind is EventType.ALTER_SYNC_STATE_SET_EVENT:
        new_set = r.ids("newSyncStateSet")
        if new_set is None:
            raise r.fail("no newSyncStateSet")
        return AlterSyncStateSetEvent(name, new_set)
    if kind is EventType.APPLY_BROKER_ID_EVENT:
        new_id = r.long("newBrokerId")
        return ApplyBrokerIdEvent(
            cluster_name=r.string("clusterName"),
            broker_name=name,
            broker_address=r.string("brokerAddress"),
            new_broker_id=0 if new_id is None else new_id,
            register_check_code=r.string("registerCheckCode"),
        )
    if kind is EventType.ELECT_MASTER_EVENT:
        elected, master = r.boolean("newMasterElected"), r.long("newMasterBrokerId")
        if elected and master is None:
            raise r.fail("a master elected without newMasterBrokerId")
        return ElectMasterEvent(name, elected, master)
    if kind is EventType.CLEAN_BROKER_DATA_EVENT:
        return CleanBrokerDataEvent(name, r.ids("brokerIdSetToClean"))
    return UpdateBrokerAddressEvent(
        cluster_name=r.string("clusterName"),
        broker_name=name,
        broker_address=r.string("brokerAddress"),
        broker_id=r.long("brokerId"),
    )


def decode_entry(body: bytes, path: str | None = None, offset: int | None = None) -> Event | None:
    """The event of a committed entry's body, None for an empty body (skipped on apply, §3.3)."""
    return None if len(body) == 0 else decode(body, path, offset)
