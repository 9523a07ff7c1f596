"""What the store writer is given and what it returns.

``Message`` is a message as a broker receives it from a producer (``SendMessageProcessor``);
``InnerMessage`` is what reaches ``CommitLog.putMessage`` (``MessageExtBrokerInner``): a
properties map plus, optionally, the properties string already serialised by its caller.
``BatchMessage`` is a classic ``SEND_BATCH_MESSAGE`` (formats.md §1.11).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any

from formats import commitlog as fmt


@dataclass(frozen=True, slots=True)
class Host:
    """A socket address as stored: raw address bytes (4 or 16) and a port (formats.md §1.5)."""

    address: bytes
    port: int

    @classmethod
    def parse(cls, text: str) -> Host:
        """``1.2.3.4:10911`` or ``[::1]:10911``."""
        addr, _, port = text.rpartition(":")
        return cls(ipaddress.ip_address(addr.strip("[]")).packed, int(port))

    @property
    def is_v6(self) -> bool:
        return len(self.address) == 16


# ``sysFlag & TRANSACTION_MASK`` values with a queue offset and CQ unit / an index entry (formats.md §7.3).
QUEUED_TRANSACTION_TYPES = frozenset(int(t) for t in fmt.TransactionType if fmt.is_dispatched_to_queue(t))
INDEXED_TRANSACTION_TYPES = frozenset(int(t) for t in fmt.TransactionType if fmt.is_indexed(t))

LOOPBACK = Host(bytes([127, 0, 0, 1]), 0)
DEFAULT_STORE_HOST = Host(bytes([127, 0, 0, 1]), 10911)


@dataclass(slots=True)
class Message:
    """A message as a broker receives it from a producer.

    ``properties`` is in the client's order (the order of the string it sent). ``body`` is
    stored verbatim: if ``sys_flag`` has the compressed bit, the producer already compressed it.
    ``store_host``/``store_timestamp`` default to the writer's store host and clock.
    """

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = LOOPBACK
    store_host: Host | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp: int | None = None


def _with_properties_string(message: type) -> list[tuple[str, Any, Any]]:
    """``message``'s fields with ``properties_string`` (bytes or None) after ``properties``."""
    out: list[tuple[str, Any, Any]] = []
    for f in fields(message):
        out.append((f.name, f.type, field(default=f.default, default_factory=f.default_factory)))
        if f.name == "properties":
            out.append(("properties_string", "bytes | None", field(default=None)))
    return out


# ``MessageExtBrokerInner`` carries a message's fields and the properties string: derived from
# ``Message`` so that the two never drift (positional order: ``Message``'s, the string 5th).
InnerMessage = make_dataclass("InnerMessage", _with_properties_string(Message), slots=True)
InnerMessage.__module__ = __name__  # for pickle and repr (``make_dataclass`` takes no module before 3.12)
InnerMessage.__doc__ = """``MessageExtBrokerInner``: what ``CommitLog.putMessage`` stores.

    ``properties`` is the broker's map (it decides delay handling); ``properties_string`` is the
    serialised form to store. When ``None`` the writer serialises the map in ``HashMap`` order.
    """


@dataclass(slots=True)
class BatchElement:
    """One message of a classic batch: the fields the client encodes per message."""

    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0


@dataclass(slots=True)
class BatchMessage:
    """A classic batch (``MessageExtBatch``); ``properties`` are the batch-level ones."""

    topic: str
    queue_id: int
    elements: list[BatchElement]
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = LOOPBACK
    store_host: Host | None = None
    reconsume_times: int = 0
    store_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class AppendResult:
    """One stored record (``AppendMessageResult`` of a single message)."""

    physical_offset: int
    queue_offset: int
    size: int
    store_timestamp: int
    topic: str
    queue_id: int
    store_host: Host

    @property
    def msg_id(self) -> str:
        """The offset message id (formats.md §1.5)."""
        return fmt.offset_msg_id(self.store_host.address, self.store_host.port, self.physical_offset)


@dataclass(frozen=True, slots=True)
class BatchAppendResult:
    """A classic batch: one record per element; ``msg_id`` is the ids joined by commas."""

    records: list[AppendResult]

    @property
    def msg_id(self) -> str:
        return ",".join(r.msg_id for r in self.records)

    @property
    def physical_offset(self) -> int:
        return self.records[0].physical_offset

    @property
    def queue_offset(self) -> int:
        return self.records[0].queue_offset


def stored_properties(props: dict[str, str], cluster: str | None) -> tuple[dict[str, str], bytes]:
    """What ``SendMessageProcessor`` stores of a sent message's properties: the map with ``CLUSTER``
    added and without ``WAIT`` (removed before serialising, from a ``HashMap`` that keeps the table
    it grew to with ``WAIT`` in it), and its serialisation. This map is what the reput reads back
    from the stored string."""
    stored = dict(props)
    if cluster:
        stored[fmt.PROPERTY_CLUSTER] = cluster
    grown_to = len(stored)
    stored.pop(fmt.PROPERTY_WAIT, None)
    return stored, fmt.encode_properties_as_broker(stored, grown_to=grown_to)


def broker_properties(props: dict[str, str], cluster: str | None) -> tuple[dict[str, str], bytes]:
    """``SendMessageProcessor``: add ``CLUSTER``; store without ``WAIT`` but keep it in the map.

    The broker removes ``WAIT`` before serialising and puts it back afterwards, so it returns
    at the end of the map's insertion order (and reappears if the map is serialised again,
    e.g. by the delay rewrite, formats.md §1.13).
    """
    stored, text = stored_properties(props, cluster)
    wait = props.get(fmt.PROPERTY_WAIT)
    if wait is not None:
        stored[fmt.PROPERTY_WAIT] = wait
    return stored, text


def inner_from_message(msg: Message, cluster: str | None) -> InnerMessage:
    props, text = broker_properties(msg.properties, cluster)
    return InnerMessage(
        msg.topic,
        msg.queue_id,
        msg.body,
        props,
        text,
        msg.flag,
        msg.sys_flag,
        msg.born_timestamp,
        msg.born_host,
        msg.store_host,
        msg.reconsume_times,
        msg.prepared_transaction_offset,
        msg.store_timestamp,
    )


def delay_level(props: dict[str, str]) -> int:
    """``Message.getDelayTimeLevel``: the ``DELAY`` property, 0 when absent."""
    text = props.get(fmt.PROPERTY_DELAY)
    return int(text) if text else 0


def apply_delay(inner: InnerMessage, max_level: int) -> None:
    """``CommitLog.putMessage`` (4.9.x): reroute a delayed message to ``SCHEDULE_TOPIC_XXXX``.

    Only NOT_TYPE and COMMIT messages are delayed; the level is clamped to the highest level;
    ``REAL_TOPIC``/``REAL_QID`` are added and the map is serialised again (formats.md §1.13).
    """
    if inner.sys_flag & fmt.TRANSACTION_MASK not in QUEUED_TRANSACTION_TYPES:
        return
    level = delay_level(inner.properties)
    if level <= 0:
        return
    if level > max_level:
        level = max_level
        inner.properties[fmt.PROPERTY_DELAY] = str(level)
    inner.properties[fmt.PROPERTY_REAL_TOPIC] = inner.topic
    inner.properties[fmt.PROPERTY_REAL_QID] = str(inner.queue_id)
    inner.properties_string = fmt.encode_properties_as_broker(inner.properties)
    inner.topic = fmt.SCHEDULE_TOPIC
    inner.queue_id = level - 1


def batch_properties(batch: BatchMessage, cluster: str | None) -> bytes:
    """The batch-level properties string the 4.9.x batch encoder appends to every element."""
    props = dict(batch.properties)
    if cluster:
        props[fmt.PROPERTY_CLUSTER] = cluster
    return fmt.encode_properties_as_broker(props)


def element_properties(element: BatchElement, batch_props: bytes) -> bytes:
    """``CommitLog.MessageExtBatchEncoder`` (4.9.x): element properties, then the batch's.

    A separator is inserted between the two when the element's own string is non-empty and
    does not already end with one (formats.md §1.7, duplicate keys are possible).
    """
    own = fmt.encode_properties_as_broker(element.properties)
    if not batch_props:
        return own
    if own and not own.endswith(fmt.PROPERTY_SEPARATOR.encode()):
        return own + fmt.PROPERTY_SEPARATOR.encode() + batch_props
    return own + batch_props
