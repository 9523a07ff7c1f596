"""The declarations added to ``formats/`` and the codec that moved there: the classic batch element
(formats.md §1.11) read by the broker's send path, the single-field compiled forms the scans use,
the record codec ``formats.records`` the admin tools share with the store, and the vocabulary of
``formats.names``."""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib

import pytest

from formats import commitlog, names, records
from formats.derive import field_struct
from rmqcli.broker.processor.send import SendError, decode_batch
from rmqcli.errors import CorruptDataError
from tests.support.records import GOLDEN_RECORD, golden_fields


def element(body: bytes, props: bytes, flag: int = 0) -> bytes:
    return commitlog.BatchElement.build(
        dict(magic_code=0, body_crc=0, flag=flag, body=body, properties=props)
    )


def test_batch_element_golden_bytes():
    # MessageDecoder.encodeMessage: i32 TOTALSIZE, i32 MAGICCODE, i32 BODYCRC, i32 FLAG, i32 BODYLEN,
    # body, i16 PROPLEN, properties.
    raw = element(b"hi", b"KEYS\x01k", flag=7)
    assert raw == struct.pack(">iiiii", 30, 0, 0, 7, 2) + b"hi" + struct.pack(">h", 6) + b"KEYS\x01k"
    assert commitlog.BATCH_ELEMENT_HEAD_STRUCT.size == commitlog.BatchElementHead.sizeof() == 20
    assert commitlog.BatchElement.parse(raw).body == b"hi"


def test_broker_reads_batches_as_declared():
    body = element(b"a" * 10, b"KEYS\x01x\x02TAGS\x01t", 1) + element(b"", b"") + element(b"zz", b"", 4)
    got = [(e.body, e.properties, e.flag) for e in decode_batch(body)]
    assert got == [(b"a" * 10, {"KEYS": "x", "TAGS": "t"}, 1), (b"", {}, 0), (b"zz", {}, 4)]
    with pytest.raises(SendError, match="truncated"):
        decode_batch(element(b"q", b"")[:10])
    with pytest.raises(SendError, match="bad batch element at byte 67"):
        decode_batch(body[:-1])


def test_single_field_forms_follow_the_declarations():
    rec = GOLDEN_RECORD
    parsed = commitlog.MessageRecord.parse(rec)
    at = commitlog.PREFIX_OFFSETS["sys_flag"]
    assert commitlog.SYS_FLAG_STRUCT.unpack_from(rec, at)[0] == parsed.sys_flag
    header = commitlog.HEADER_STRUCTS[0].size
    assert commitlog.BODY_LENGTH_STRUCT.unpack_from(rec, header - 4)[0] == parsed.body_length == 2
    topic_at = header + parsed.body_length
    v1 = commitlog.TOPIC_LENGTH_STRUCTS[commitlog.MAGIC_V1]
    assert v1.unpack_from(rec, topic_at)[0] == parsed.topic_length == 1
    assert v1.size == commitlog.TOPIC_LENGTH_V1.sizeof() == 1
    assert commitlog.TOPIC_LENGTH_STRUCTS[commitlog.MAGIC_V2].size == 2
    props_at = topic_at + v1.size + parsed.topic_length
    assert commitlog.PROPERTIES_LENGTH_STRUCT.unpack_from(rec, props_at)[0] == parsed.properties_length
    assert commitlog.MIN_RECORD_SIZE == commitlog.calc_msg_length(0, 0, 0, 0)
    with pytest.raises(KeyError):
        field_struct(commitlog.RecordPrefix, "no_such_field")


def test_record_codec_decodes_and_checks():
    rec = records.decode_record(GOLDEN_RECORD, 0, len(GOLDEN_RECORD), "f", 1000)
    assert (rec.file, rec.position, rec.topic, rec.body(), rec.properties) == (
        "f",
        1000,
        "T",
        b"hi",
        {"TAGS": "a"},
    )
    assert rec.born_host == "127.0.0.1:50000" and rec.store_host == "127.0.0.1:10911"
    assert records.format_host(bytes(15) + b"\x01", 9) == "[0:0:0:0:0:0:0:1]:9"
    bad = bytearray(GOLDEN_RECORD)
    bad[-8] = 9  # the properties length
    with pytest.raises(records.RecordError, match="properties length"):
        records.decode_record(bytes(bad), 0, len(bad))
    with pytest.raises(records.RecordError, match="illegal magic"):
        records.decode_record(bytes(8) + GOLDEN_RECORD, 0, 108)


def test_record_codec_inflates_and_names_a_bad_body():
    fields = golden_fields()
    fields.update(sys_flag=commitlog.COMPRESSED_FLAG | (3 << 8), body=zlib.compress(b"hello" * 20))
    raw = commitlog.MessageRecord.build(fields)
    assert records.decode_record(raw, 0, len(raw)).body() == b"hello" * 20
    fields["body"] = b"not zlib"
    raw = commitlog.MessageRecord.build(fields)
    with pytest.raises(CorruptDataError, match="cannot decompress ZLIB body"):
        records.decode_record(raw, 0, len(raw), "x").body()


def test_admin_decodes_records_without_the_store():
    code = (
        "import sys\n"
        "from rmqcli.admin.message import decode_messages\n"
        f"[m] = decode_messages(bytes.fromhex({GOLDEN_RECORD.hex()!r}))\n"
        "print(m.topic, m.store_host, sorted(k for k in sys.modules if k.startswith('rmqcli.store')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["T", "127.0.0.1:10911", "[]"]


def test_vocabulary():
    assert names.PERM_READ_WRITE == names.PERM_READ | names.PERM_WRITE == 6
    assert names.SCHEDULE_TOPIC == commitlog.SCHEDULE_TOPIC == "SCHEDULE_TOPIC_XXXX"
    assert names.NOT_ALLOWED_SEND_TOPICS < set(names.SYSTEM_TOPICS)
    assert (
        names.DEFAULT_TOPIC in names.SYSTEM_TOPICS
        and names.DEFAULT_TOPIC not in names.NOT_ALLOWED_SEND_TOPICS
    )
