"""CommitLog message record, BLANK end-of-file record, sysFlag bits, properties codec, msg ids.

Specified by formats.md §1 (Apache RocketMQ ``CommitLog.java``: ``calMsgLength``,
``checkMessageAndReturnSize``, ``MessageExtEncoder``; ``MessageDecoder.java``;
``MessageSysFlag.java``). Every integer is big-endian and signed.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping

import construct as cs
from construct import this
from isal.isal_zlib import crc32 as isal_crc32

from formats.derive import compile_struct, field_offsets, field_struct
from formats.javahash import hashmap_order, string_hash
from formats.names import SCHEDULE_TOPIC  # declared with the other system topics

# --- magic codes (formats.md §1.3) -------------------------------------------------------------
MAGIC_V1 = -626843481  # 0xDAA320A7: 1-byte topic length
MAGIC_V2 = -626843477  # 0xDAA320AB: 2-byte topic length (RocketMQ 5.1.0+)
BLANK_MAGIC = -875286124  # 0xCBD43194: end-of-file filler
MESSAGE_MAGICS = (MAGIC_V1, MAGIC_V2)

# --- sysFlag bits (formats.md §1.4) ------------------------------------------------------------
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_TYPE_SHIFT = 8


class TransactionType(enum.IntEnum):
    """``sysFlag & 0xC``."""

    NOT_TYPE = 0x0
    PREPARED = 0x4
    COMMIT = 0x8
    ROLLBACK = 0xC


class CompressionType(enum.IntEnum):
    """``(sysFlag & 0x700) >> 8``; 0 is ZLIB as written by clients before 4.9.4."""

    ZLIB_LEGACY = 0
    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


def transaction_type(sys_flag: int) -> TransactionType:
    return TransactionType(sys_flag & TRANSACTION_MASK)


def compression_type(sys_flag: int) -> CompressionType:
    return CompressionType((sys_flag & COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT)


def host_length(sys_flag: int, v6_bit: int) -> int:
    """Size of a host field: 4-byte address + i32 port, or 16 + 4 when ``v6_bit`` is set."""
    return 20 if sys_flag & v6_bit else 8


# --- schemas (formats.md §1.2) -----------------------------------------------------------------
HostV4 = cs.Struct("address" / cs.Bytes(4), "port" / cs.Int32sb)
HostV6 = cs.Struct("address" / cs.Bytes(16), "port" / cs.Int32sb)

# Fields 1-9: identical for every record and host kind.
RecordPrefix = cs.Struct(
    "total_size" / cs.Int32sb,
    "magic_code" / cs.Int32sb,
    "body_crc" / cs.Int32sb,
    "queue_id" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "queue_offset" / cs.Int64sb,
    "physical_offset" / cs.Int64sb,
    "sys_flag" / cs.Int32sb,
    "born_timestamp" / cs.Int64sb,
)
# Field 11, between the two hosts.
AfterBornHost = cs.Struct("store_timestamp" / cs.Int64sb)
# Fields 13-15: after the store host, up to the body.
AfterStoreHost = cs.Struct(
    "reconsume_times" / cs.Int32sb,
    "prepared_transaction_offset" / cs.Int64sb,
    "body_length" / cs.Int32sb,
)


def _host(v6_bit: int) -> cs.Construct:
    return cs.IfThenElse(lambda ctx: ctx.sys_flag & v6_bit, HostV6, HostV4)


def calc_msg_length(
    sys_flag: int, body_length: int, topic_length: int, properties_length: int, magic_code: int = MAGIC_V1
) -> int:
    """``CommitLog.calMsgLength``: the TOTALSIZE a record with these lengths must carry."""
    return (
        _FIXED_BEFORE_BODY[sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)]
        + max(body_length, 0)
        + (_TOPIC_LEN_SIZE_V2 if magic_code == MAGIC_V2 else _TOPIC_LEN_SIZE_V1)
        + topic_length
        + _PROPS_LEN_SIZE
        + max(properties_length, 0)
    )


def _record_length(ctx: cs.Container) -> int:
    return calc_msg_length(
        ctx.sys_flag, len(ctx.body), len(ctx.topic.encode()), len(ctx.properties), ctx.magic_code
    )


PROPERTIES_LENGTH = cs.Int16sb
TOPIC_LENGTH_V1 = cs.Int8sb  # signed: at most 127
TOPIC_LENGTH_V2 = cs.Int16sb
_TOPIC_LEN_SIZE_V1 = TOPIC_LENGTH_V1.sizeof()
_TOPIC_LEN_SIZE_V2 = TOPIC_LENGTH_V2.sizeof()
_PROPS_LEN_SIZE = PROPERTIES_LENGTH.sizeof()

# The whole message record. ``properties`` stays raw bytes: decode it with ``decode_properties``.
MessageRecord = cs.Struct(
    "total_size" / cs.Rebuild(cs.Int32sb, _record_length),
    *RecordPrefix.subcons[1:],
    "born_host" / _host(BORNHOST_V6_FLAG),
    *AfterBornHost.subcons,
    "store_host" / _host(STOREHOST_V6_FLAG),
    *AfterStoreHost.subcons[:-1],
    "body_length" / cs.Rebuild(cs.Int32sb, cs.len_(this.body)),
    "body" / cs.Bytes(this.body_length),
    "topic_length"
    / cs.Rebuild(
        cs.IfThenElse(this.magic_code == MAGIC_V2, TOPIC_LENGTH_V2, TOPIC_LENGTH_V1),
        lambda ctx: len(ctx.topic.encode()),
    ),
    "topic" / cs.StringEncoded(cs.Bytes(this.topic_length), "utf8"),
    "properties_length" / cs.Rebuild(PROPERTIES_LENGTH, cs.len_(this.properties)),
    "properties" / cs.Bytes(lambda ctx: max(ctx.properties_length, 0)),
)

# The record that fills the rest of a file: its size is the remaining length of the file and
# only these 8 bytes are written (formats.md §1.10).
BlankRecord = cs.Struct(
    "total_size" / cs.Int32sb,  # the rest of the file
    "magic_code" / cs.Const(BLANK_MAGIC, cs.Int32sb),
)
END_FILE_MIN_BLANK_LENGTH = BlankRecord.sizeof()  # all a BLANK record physically holds


def header_schema(born_v6: bool, store_v6: bool) -> cs.Struct:
    """The fixed part of a record (fields 1-15, up to the body) for one host combination."""
    return cs.Struct(
        *RecordPrefix.subcons,
        "born_host" / (HostV6 if born_v6 else HostV4),
        *AfterBornHost.subcons,
        "store_host" / (HostV6 if store_v6 else HostV4),
        *AfterStoreHost.subcons,
    )


# Compiled fast forms derived from the declarations above.
_FIXED_BEFORE_BODY = {
    (BORNHOST_V6_FLAG if b else 0) | (STOREHOST_V6_FLAG if s else 0): header_schema(b, s).sizeof()
    for b in (False, True)
    for s in (False, True)
}
PREFIX_STRUCT = compile_struct(RecordPrefix)
# TOTALSIZE and MAGICCODE, the first two fields of every record (BLANK included), and TOTALSIZE alone.
SIZE_MAGIC_STRUCT = compile_struct(cs.Struct(*RecordPrefix.subcons[:2]))
TOTAL_SIZE_STRUCT = compile_struct(cs.Struct(*RecordPrefix.subcons[:1]))
MAX_TOPIC_LENGTH_V1 = 2 ** (8 * TOPIC_LENGTH_V1.sizeof() - 1) - 1  # a signed byte: 127
PREFIX_SIZE = PREFIX_STRUCT.size
PREFIX_OFFSETS = field_offsets(RecordPrefix)
PHYSICAL_OFFSET_AT = PREFIX_OFFSETS["physical_offset"]  # a stored record's own CommitLog offset
PHYSICAL_OFFSET_STRUCT = field_struct(RecordPrefix, "physical_offset")


def stored_physical_offset(buf, pos: int = 0) -> int:  # type: ignore[no-untyped-def]
    """PHYSICALOFFSET of the record at ``pos`` of ``buf`` (a pull body, a replicated chunk...)."""
    return PHYSICAL_OFFSET_STRUCT.unpack_from(buf, pos + PHYSICAL_OFFSET_AT)[0]


STORE_TIMESTAMP_STRUCT = compile_struct(AfterBornHost)
AFTER_STORE_HOST_STRUCT = compile_struct(AfterStoreHost)
AFTER_STORE_HOST_OFFSETS = field_offsets(AfterStoreHost)
# Keyed by ``sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)``.
HEADER_STRUCTS = {
    (BORNHOST_V6_FLAG if b else 0) | (STOREHOST_V6_FLAG if s else 0): compile_struct(header_schema(b, s))
    for b in (False, True)
    for s in (False, True)
}
HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
# Single fields, for scans that read one at a time.
SYS_FLAG_STRUCT = field_struct(RecordPrefix, "sys_flag")
BODY_LENGTH_STRUCT = field_struct(AfterStoreHost, "body_length")
PROPERTIES_LENGTH_STRUCT = compile_struct(cs.Struct("properties_length" / PROPERTIES_LENGTH))
TOPIC_LENGTH_STRUCTS = {  # keyed by magic code
    MAGIC_V1: compile_struct(cs.Struct("topic_length" / TOPIC_LENGTH_V1)),
    MAGIC_V2: compile_struct(cs.Struct("topic_length" / TOPIC_LENGTH_V2)),
}
MIN_RECORD_SIZE = calc_msg_length(0, 0, 0, 0)  # no body, topic or properties


def topic_length_size(magic_code: int) -> int:
    return _TOPIC_LEN_SIZE_V2 if magic_code == MAGIC_V2 else _TOPIC_LEN_SIZE_V1


# --- classic batch element (formats.md §1.11) ----------------------------------------------------
# One message of a SEND_BATCH_MESSAGE body, as ``MessageDecoder.encodeMessage`` writes it; the
# broker expands each into a record of its own (magic and CRC are written as 0 and not read).
BatchElementHead = cs.Struct(
    "total_size" / cs.Int32sb,
    "magic_code" / cs.Int32sb,
    "body_crc" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "body_length" / cs.Int32sb,
)
BatchElement = cs.Struct(
    "total_size"
    / cs.Rebuild(
        cs.Int32sb,
        lambda ctx: BATCH_ELEMENT_HEAD_STRUCT.size + len(ctx.body) + _PROPS_LEN_SIZE + len(ctx.properties),
    ),
    *BatchElementHead.subcons[1:-1],
    "body_length" / cs.Rebuild(cs.Int32sb, cs.len_(this.body)),
    "body" / cs.Bytes(this.body_length),
    "properties_length" / cs.Rebuild(PROPERTIES_LENGTH, cs.len_(this.properties)),
    "properties" / cs.Bytes(this.properties_length),
)
BATCH_ELEMENT_HEAD_STRUCT = compile_struct(BatchElementHead)


# --- body CRC (formats.md §1.6) ----------------------------------------------------------------
def body_crc(body: bytes | memoryview) -> int:
    """``UtilAll.crc32``: the CRC32 of the stored body (zlib's; computed by ISA-L, the same value
    several times faster), masked to 31 bits."""
    return isal_crc32(body) & 0x7FFFFFFF


# --- properties (formats.md §1.7) --------------------------------------------------------------
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def decode_properties(raw: bytes | memoryview | str) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: empty keys/values dropped, last key wins.

    Accepts a trailing separator (written by 5.2.0+) and its absence (older brokers).
    """
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    props: dict[str, str] = {}
    for segment in text.split(PROPERTY_SEPARATOR):
        key, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if sep and key and value:
            props[key] = value
    return props


def property_pairs(raw: bytes | memoryview | str) -> list[tuple[str, str]]:
    """The name/value pairs of a properties string in stored order, duplicates kept."""
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    pairs = []
    for segment in text.split(PROPERTY_SEPARATOR):
        key, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if sep and key and value:
            pairs.append((key, value))
    return pairs


def encode_properties(
    props: Mapping[str, str] | Iterable[tuple[str, str]], *, trailing_separator: bool = False
) -> bytes:
    """``MessageDecoder.messageProperties2String`` over pairs in the given order.

    Entries with a ``None`` value are skipped. RocketMQ up to 5.1.x drops the final separator;
    5.2.0+ keeps it (``trailing_separator=True``).
    """
    if type(props) is list:  # pairs (the broker's order): no ABC check
        items: Iterable[tuple[str, str]] = props
    else:
        items = props.items() if isinstance(props, Mapping) else props
    return _joined([f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in items if v is not None], trailing_separator)


def _joined(parts: list[str], trailing_separator: bool) -> bytes:
    """``name\x01value`` parts as one properties string (empty without parts)."""
    if not parts:
        return b""
    text = PROPERTY_SEPARATOR.join(parts)
    return (text + PROPERTY_SEPARATOR if trailing_separator else text).encode("utf-8")


def encode_properties_as_broker(
    props: Mapping[str, str], *, trailing_separator: bool = False, grown_to: int = 0
) -> bytes:
    """Properties serialised as a broker does: in ``HashMap`` order of the insertion order, in a
    table grown to hold ``grown_to`` entries when the map held more before (``hashmap_order``)."""
    order = hashmap_order(props, grown_to=grown_to)
    parts = [f"{k}{NAME_VALUE_SEPARATOR}{v}" for k in order if (v := props[k]) is not None]
    return _joined(parts, trailing_separator)


# Property names (MessageConst.java).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QID = "REAL_QID"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_WAIT = "WAIT"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
KEY_SEPARATOR = " "


# --- message ids (formats.md §1.5) ---------------------------------------------------------------
def offset_msg_id(store_address: bytes, store_port: int, physical_offset: int) -> str:
    """``MessageDecoder.createMessageId``: upper-case hex of store host + port + offset."""
    return (
        (
            bytes(store_address)
            + (store_port & 0xFFFFFFFF).to_bytes(4, "big")
            + (physical_offset & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")
        )
        .hex()
        .upper()
    )


def decode_offset_msg_id(msg_id: str) -> tuple[bytes, int, int]:
    """``MessageDecoder.decodeMessageId``: (address bytes, port, physical offset)."""
    raw = bytes.fromhex(msg_id)
    if len(raw) not in (16, 28):
        raise ValueError(f"not an offset message id: {msg_id!r}")
    address, rest = raw[:-12], raw[-12:]
    return address, int.from_bytes(rest[:4], "big", signed=True), int.from_bytes(rest[4:], "big", signed=True)


def decode_unique_key(key: str) -> tuple[bytes, int, int, int, int]:
    """``MessageClientIDSetter``'s layout of a client message id (``UNIQ_KEY``): (ip bytes, pid,
    class loader hash, ms since the start of its month, counter). 16 bytes (IPv4) or 28 (IPv6)."""
    raw = bytes.fromhex(key)
    if len(raw) not in (16, 28):
        raise ValueError(f"not a unique key: {key!r}")
    ip, rest = raw[:-12], raw[-12:]
    pid = int.from_bytes(rest[0:2], "big")
    loader = int.from_bytes(rest[2:6], "big", signed=True)
    span = int.from_bytes(rest[6:10], "big")
    counter = int.from_bytes(rest[10:12], "big")
    return ip, pid, loader, span, counter


# --- tags code (formats.md §2.2) -----------------------------------------------------------------
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_TIME_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str = DEFAULT_DELAY_LEVELS) -> list[int]:
    """``messageDelayLevel``: delay of each level (1-based in RocketMQ) in milliseconds.

    Raises ``ValueError`` on an item that is not a number and a unit (s, m, h, d), or on no items,
    where ``ScheduleMessageService.parseDelayLevel`` fails and the broker does not start.
    """
    levels = []
    for item in spec.split():
        unit = _TIME_UNITS.get(item[-1:])
        if unit is None:
            raise ValueError(f"delay level {item!r} has no unit s, m, h or d")
        levels.append(int(item[:-1]) * unit)
    if not levels:
        raise ValueError("no delay levels")
    return levels


DEFAULT_DELAY_MILLIS = parse_delay_levels()


@functools.lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """``MessageExtBrokerInner.tagsString2tagsCode``: ``TAGS.hashCode()``, 0 when absent."""
    return string_hash(tags) if tags else 0


def dispatch_tags_code(
    topic: str, props: Mapping[str, str], store_timestamp: int, delay_millis: list[int] = DEFAULT_DELAY_MILLIS
) -> int:
    """The tags code a broker's dispatch puts in the consume queue for this record.

    Delay records in ``SCHEDULE_TOPIC_XXXX`` carry their delivery time instead of a tag hash
    (``CommitLog.checkMessageAndReturnSize``; ``ScheduleMessageService.computeDeliverTimestamp``).
    """
    code = tags_code(props.get(PROPERTY_TAGS))
    if topic == SCHEDULE_TOPIC:
        level_text = props.get(PROPERTY_DELAY)
        if level_text:
            level = min(int(level_text), len(delay_millis))
            if level > 0:
                code = store_timestamp + delay_millis[level - 1]
    return code


def is_dispatched_to_queue(sys_flag: int) -> bool:
    """CommitLogDispatcherBuildConsumeQueue: PREPARED and ROLLBACK records get no CQ unit."""
    return transaction_type(sys_flag) in (TransactionType.NOT_TYPE, TransactionType.COMMIT)


def is_indexed(sys_flag: int) -> bool:
    """CommitLogDispatcherBuildIndex: every record but ROLLBACK is indexed."""
    return transaction_type(sys_flag) != TransactionType.ROLLBACK
