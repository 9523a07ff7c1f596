"""Encode CommitLog records with the compiled forms of ``formats.commitlog``.

Same bytes as ``MessageRecord.build`` (formats.md §1.2; ``CommitLog.MessageExtEncoder`` 4.9.x),
an order of magnitude faster: one ``struct`` pack for the fixed header, then body, topic and
properties. V1 records only: a 4.9.x broker rejects topics longer than 127 characters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from formats import commitlog as fmt
from rmqcli.errors import UsageError

if TYPE_CHECKING:
    from formats.records import Record

_TOPIC_LEN = fmt.TOPIC_LENGTH_STRUCTS[fmt.MAGIC_V1]
_PROPS_LEN = fmt.PROPERTIES_LENGTH_STRUCT
_MAX_TOPIC_LENGTH = 2 ** (8 * _TOPIC_LEN.size - 1) - 1  # signed i8
_MAX_PROPERTIES_LENGTH = 2 ** (8 * _PROPS_LEN.size - 1) - 1  # Short.MAX_VALUE
BLANK_RECORD_SIZE = fmt.BlankRecord.sizeof()


def host_flags(born_v6: bool, store_v6: bool) -> int:
    """The sysFlag host bits a broker sets from the socket address kinds (formats.md §1.5)."""
    return (fmt.BORNHOST_V6_FLAG if born_v6 else 0) | (fmt.STOREHOST_V6_FLAG if store_v6 else 0)


def check_lengths(topic: bytes, properties: bytes) -> None:
    """``DefaultMessageStore.checkMessage`` / ``CommitLog`` limits of a 4.x broker."""
    if len(topic) > _MAX_TOPIC_LENGTH:
        raise UsageError(f"topic is {len(topic)} bytes; a 4.x record holds at most {_MAX_TOPIC_LENGTH}")
    if len(properties) > _MAX_PROPERTIES_LENGTH:
        raise UsageError(f"properties are {len(properties)} bytes; at most {_MAX_PROPERTIES_LENGTH}")


def record_length(sys_flag: int, body: bytes, topic: bytes, properties: bytes) -> int:
    """``CommitLog.calMsgLength``."""
    return fmt.calc_msg_length(sys_flag, len(body), len(topic), len(properties))


def encode_record(
    *,
    sys_flag: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    born_timestamp: int,
    born_host: tuple[bytes, int],
    store_timestamp: int,
    store_host: tuple[bytes, int],
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    topic: bytes,
    properties: bytes,
    body_crc: int | None = None,
) -> bytes:
    """One V1 record. ``sys_flag`` must already carry the host bits matching the hosts."""
    header = fmt.HEADER_STRUCTS[sys_flag & fmt.HOST_FLAGS]
    total = header.size + len(body) + _TOPIC_LEN.size + len(topic) + _PROPS_LEN.size + len(properties)
    return b"".join(
        (
            header.pack(
                total,
                fmt.MAGIC_V1,
                fmt.body_crc(body) if body_crc is None else body_crc,
                queue_id,
                flag,
                queue_offset,
                physical_offset,
                sys_flag,
                born_timestamp,
                born_host[0],
                born_host[1],
                store_timestamp,
                store_host[0],
                store_host[1],
                reconsume_times,
                prepared_transaction_offset,
                len(body),
            ),
            body,
            _TOPIC_LEN.pack(len(topic)),
            topic,
            _PROPS_LEN.pack(len(properties)),
            properties,
        )
    )


_FIELDS_AGAIN = (  # the header fields ``encode_again`` takes from the record unless given anew
    "sys_flag", "queue_id", "flag", "queue_offset", "physical_offset", "born_timestamp",
    "store_timestamp", "reconsume_times", "prepared_transaction_offset",
)  # fmt: skip


def encode_again(record: Record, topic: bytes, properties: bytes, **changed: int) -> bytes:
    """``MessageDecoder.encode`` of a decoded ``record`` under ``topic`` with ``properties``: its
    header fields (``changed`` ones given anew: ``sys_flag``, ``queue_id``, the offsets), hosts,
    body and body CRC as stored."""
    fields = {name: getattr(record, name) for name in _FIELDS_AGAIN}
    fields.update(changed)
    return encode_record(
        **fields,
        born_host=(record.born_address, record.born_port),
        store_host=(record.store_address, record.store_port),
        body=record.stored_body,
        topic=topic,
        properties=properties,
        body_crc=record.body_crc,
    )


def blank_record(remaining: int) -> bytes:
    """The 8 bytes written where a file ends: its size is the rest of the file (formats.md §1.10)."""
    return fmt.BlankRecord.build({"total_size": remaining})
