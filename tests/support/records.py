"""Records built from the schemas of ``formats/`` for the format and scan tests: the golden record of
formats.md §1.2, a record at a given position, and small CommitLog files of such records."""

from __future__ import annotations

from pathlib import Path

from formats import commitlog as fmt
from rmqcli.store.naming import offset_to_name
from rmqcli.store.read.commitlog import classify_tail, decode_record

SEP, NV = fmt.PROPERTY_SEPARATOR.encode(), fmt.NAME_VALUE_SEPARATOR.encode()
SCAN_FILE_SIZE = 256 * 1024  # write_file's CommitLog file size

# formats.md §1.2 worked example: topic T, body "hi", TAGS=a, v4/v4.
GOLDEN_RECORD = bytes.fromhex(
    "00000064daa320a758932aac0000000000000000000000000000000000000000"
    "00000000000000000000018bcfe568007f0000010000c3500000018bcfe56801"
    "7f00000100002a9f000000000000000000000000000000026869015400065441"
    "47530161"
)


def golden_fields() -> dict:
    return dict(
        magic_code=fmt.MAGIC_V1,
        body_crc=fmt.body_crc(b"hi"),
        queue_id=0,
        flag=0,
        queue_offset=0,
        physical_offset=0,
        sys_flag=0,
        born_timestamp=1700000000000,
        born_host=dict(address=bytes([127, 0, 0, 1]), port=50000),
        store_timestamp=1700000000001,
        store_host=dict(address=bytes([127, 0, 0, 1]), port=10911),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body=b"hi",
        topic="T",
        properties=b"TAGS\x01a",
    )


def record(
    position: int,
    body: bytes,
    topic: str = "T",
    sys_flag: int = 0,
    magic: int = fmt.MAGIC_V1,
    *,
    properties: bytes = b"TAGS\x01x",
    queue_id: int = 1,
    store_timestamp_base: int = 1000,
) -> bytes:
    """One record at ``position`` built from the schema (a record where ``position`` says)."""
    v6 = bool(sys_flag & fmt.BORNHOST_V6_FLAG)
    s6 = bool(sys_flag & fmt.STOREHOST_V6_FLAG)
    return fmt.MessageRecord.build(
        dict(
            magic_code=magic,
            body_crc=fmt.body_crc(body),
            queue_id=queue_id,
            flag=0,
            queue_offset=position,
            physical_offset=position,
            sys_flag=sys_flag,
            born_timestamp=1,
            born_host=dict(address=bytes(16 if v6 else 4), port=1),
            store_timestamp=store_timestamp_base + position,
            store_host=dict(address=bytes(16 if s6 else 4), port=2),
            reconsume_times=0,
            prepared_transaction_offset=0,
            body=body,
            topic=topic,
            properties=properties,
        )
    )


def props(*pairs: tuple[str, str]) -> bytes:
    return SEP.join(k.encode() + NV + v.encode() for k, v in pairs)


def scan_record(
    position: int, body: bytes, topic: str, properties: bytes, sys_flag: int = 0, magic: int = fmt.MAGIC_V1
) -> bytes:
    """A record for the bulk-scan tests: its properties, a queue by position, 2023 timestamps."""
    return record(
        position,
        body,
        topic,
        sys_flag,
        magic,
        properties=properties,
        queue_id=position % 3,
        store_timestamp_base=1_700_000_000_000,
    )


def mixed_records() -> list[tuple[bytes, str, bytes, int, int]]:
    """Bodies, topics, properties, flags and magic codes of every shape the scan must handle."""
    both_v6 = fmt.BORNHOST_V6_FLAG | fmt.STOREHOST_V6_FLAG
    long_value = "v" * 700  # wider than any tail block row: read one by one
    return [
        (b"plain", "TopicA", props(("TAGS", "TagA"), ("KEYS", "k1 k2"), ("UNIQ_KEY", "U1")), 0, fmt.MAGIC_V1),
        (b"", "TopicA", b"", 0, fmt.MAGIC_V1),
        (b"x" * 50, "TopicB", props(("TAGS", "标签"), ("KEYS", "ключ")), both_v6, fmt.MAGIC_V1),
        (b"v2", "T" * 200, props(("TAGS", "a"), ("TAGS", "b")), fmt.STOREHOST_V6_FLAG, fmt.MAGIC_V2),
        (b"y", "TopicA", props(("KEYS", long_value), ("TAGS", "t")), 0, fmt.MAGIC_V1),
        (b"z", "TopicA", SEP + b"TAGS" + NV + SEP + b"KEYS" + NV + b" a  b " + SEP, 0, fmt.MAGIC_V1),
        (b"w", "TopicB", props(("UNIQ_KEY", "only")), fmt.BORNHOST_V6_FLAG, fmt.MAGIC_V1),
    ]


def write_file(tmp_path: Path, records: list[bytes], blank: bool = True) -> Path:
    """``records`` as CommitLog file 0 of SCAN_FILE_SIZE bytes, a BLANK after them if ``blank``."""
    data = b"".join(records)
    if blank:
        data += fmt.BlankRecord.build(dict(total_size=SCAN_FILE_SIZE - len(data)))
    (tmp_path / "commitlog").mkdir(parents=True)
    path = tmp_path / "commitlog" / offset_to_name(0)
    path.write_bytes(data.ljust(SCAN_FILE_SIZE, b"\0"))
    return path


def build(specs) -> list[bytes]:
    out, pos = [], 0
    for body, topic, properties, flags, magic in specs:
        out.append(scan_record(pos, body, topic, properties, flags, magic))
        pos += len(out[-1])
    return out


def reference(buf, limit: int) -> list:
    pos, recs = 0, []
    while pos < limit and classify_tail(buf, pos, limit)[0] == "garbage":
        rec = decode_record(buf, pos, limit)
        recs.append(rec)
        pos += rec.total_size
    return recs


def body_records(body: bytes) -> list:
    """The stored records a PULL, POP or PEEK answer's body carries, one after the other."""
    out, pos = [], 0
    while pos < len(body):
        rec = decode_record(body, pos, len(body))
        out.append(rec)
        pos += rec.total_size
    return out
