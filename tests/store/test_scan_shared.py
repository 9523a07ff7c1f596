"""The shared bulk scan (``headerscan.scan_records``) and what ``propscan`` and ``verify`` build on it
agree with the record-by-record reader (``decode_record``) on odd and damaged files."""

from __future__ import annotations

import numpy as np
import pytest

from formats import commitlog as fmt
from formats import indexfile
from formats.javahash import string_hash
from rmqcli.ops.verify import verify_store
from rmqcli.store import Store
from rmqcli.store.read.commitlog import RecordError, decode_record
from rmqcli.store.read.index import IndexFile
from rmqcli.store.scan import headerscan, propscan
from rmqcli.store.write.messages import Message
from rmqcli.store.write.writer import StoreWriter
from tests.support.records import build, mixed_records, props, reference, write_file


def test_bulk_fields_equal_decode_record(tmp_path):
    path = write_file(tmp_path, build(mixed_records() * 3))
    store = Store.open(tmp_path)
    buf = store.commitlog.files[0].map()
    expected = reference(buf, len(buf))
    batch = headerscan.scan_records(buf, 0, 0, properties=True)
    assert batch.bad is None and not batch.bad_topics and len(batch) == len(expected) == 21
    assert batch.tails is not None and len(batch.tails.rows) < len(batch)  # one tail read alone
    for i, rec in enumerate(expected):
        assert int(batch.position[i]) == rec.position
        assert batch.topics[batch.topic_index[i]] == rec.topic
        assert int(batch.physical_offset[i]) == rec.physical_offset
        assert int(batch.body_crc[i]) == rec.body_crc
        assert bytes(buf[batch.body_start[i] : batch.body_start[i] + batch.body_length[i]]) == rec.stored_body
        s, n = int(batch.properties_start[i]), int(batch.properties_length[i])
        assert batch.tails.data[s : s + n].tobytes() == rec.properties_raw
    scan = propscan.scan_file(buf, 0, 0, names=propscan.DISPATCH_PROPERTIES)
    assert scan is not None
    for name in propscan.DISPATCH_PROPERTIES:
        assert scan.strings(name, np.arange(len(scan))) == [r.properties.get(name) for r in expected], name
    # tags codes and index keys as a broker derives them
    rows = np.arange(len(scan))
    assert propscan.tags_codes(scan, rows).tolist() == [fmt.tags_code(r.tags) for r in expected]
    local, hashes = propscan.index_keys(scan, rows)
    want = [
        (i, indexfile.key_hash(indexfile.index_key(r.topic, key)))
        for i, r in enumerate(expected)
        for key in ([r.uniq_key] if r.uniq_key else []) + [k for k in r.keys if k]
    ]
    assert list(zip(local.tolist(), hashes.tolist(), strict=True)) == want
    assert path.exists()


def test_stats_batches_keep_their_meaning(tmp_path):
    write_file(tmp_path, build(mixed_records()))
    store = Store.open(tmp_path)
    batches = list(store.commitlog.header_batches())
    flat = [
        (int(b.position[i]), int(b.total_size[i]), int(b.queue_id[i]), int(b.queue_offset[i]),
         int(b.sys_flag[i]), int(b.store_timestamp[i]), b.topics[b.topic_index[i]])
        for b in batches for i in range(len(b))
    ]  # fmt: skip
    assert flat == [tuple(h) for h in store.commitlog.headers()]
    assert headerscan.scan_file(store.commitlog.files[0].map(), 0, 0) is not None


@pytest.mark.parametrize(
    "damage",
    ["magic", "total_small", "body_length", "topic_length", "props_length", "tail_garbage"],
)
def test_valid_prefix_and_bad_record(tmp_path, damage):
    recs = build(mixed_records())
    third = sum(len(r) for r in recs[:2])
    raw = bytearray(b"".join(recs))
    if damage == "magic":
        raw[third + 4 : third + 8] = b"\x12\x34\x56\x78"
    elif damage == "total_small":
        raw[third : third + 4] = (len(recs[2]) - 1).to_bytes(4, "big")
    elif damage == "body_length":
        at = third + fmt.HEADER_STRUCTS[fmt.BORNHOST_V6_FLAG | fmt.STOREHOST_V6_FLAG].size - 4
        raw[at : at + 4] = (10**6).to_bytes(4, "big")
    elif damage == "topic_length":
        at = third + fmt.HEADER_STRUCTS[fmt.BORNHOST_V6_FLAG | fmt.STOREHOST_V6_FLAG].size + 50
        raw[at] = 0x7F
    elif damage == "props_length":
        at = third + len(recs[2]) - len(mixed_records()[2][2]) - 2
        raw[at : at + 2] = (1).to_bytes(2, "big")
    path = write_file(tmp_path, [bytes(raw)], blank=False)
    if damage == "tail_garbage":  # no BLANK: junk right after the last record
        data = bytearray(path.read_bytes())
        data[len(raw) : len(raw) + 8] = b"\x00\x00\x00\x05junk"
        path.write_bytes(bytes(data))
        third = len(raw)
    buf = Store.open(tmp_path).commitlog.files[0].map()
    batch = headerscan.scan_records(buf, 0, 0, properties=True)
    assert batch.bad == third and batch.end == third
    assert len(batch) == (2 if damage != "tail_garbage" else len(recs))
    with pytest.raises(RecordError):
        decode_record(buf, third, len(buf))
    assert headerscan.scan_file(buf, 0, 0) is None and propscan.scan_file(buf, 0, 0) is None


def test_bad_utf8_properties_and_topics_are_found_exactly(tmp_path):
    specs = []
    for i in range(40):
        tags = "标签" if i % 3 else "plain"
        specs.append((b"b", "TopicA", props(("TAGS", tags), ("KEYS", f"k{i}")), 0, fmt.MAGIC_V1))
    recs = build(specs)
    bad_rows = {5: b"\xff", 17: b"\xe6\xa0", 31: b"\xed\xa0\x80"}  # invalid, truncated, surrogate
    for i, junk in bad_rows.items():
        rec = bytearray(recs[i])
        at = rec.rindex(b"k" + str(i).encode())
        rec[at : at + len(junk)] = junk
        recs[i] = bytes(rec)
    topic_row = 9
    rec = bytearray(recs[topic_row])
    at = rec.index(b"TopicA")
    rec[at : at + 2] = b"\xc3\x28"
    recs[topic_row] = bytes(rec)
    write_file(tmp_path, recs)
    store = Store.open(tmp_path)
    buf = store.commitlog.files[0].map()
    batch = headerscan.scan_records(buf, 0, 0, properties=True)
    assert len(batch) == 40 and batch.bad is None
    found = propscan.bad_utf8(batch)
    assert [i for i, _, _ in found] == sorted(bad_rows)
    for i, reason, at in found:
        s, n = int(batch.properties_start[i]), int(batch.properties_length[i])
        with pytest.raises(UnicodeDecodeError) as want:
            batch.tails.data[s : s + n].tobytes().decode("utf-8")
        assert (reason, at) == (want.value.reason, want.value.start)
    assert batch.bad_topics == [batch.topic_index[topic_row]]
    assert headerscan.scan_file(buf, 0, 0) is None  # the strict scan leaves it to the slow path
    report = verify_store(store)
    positions = [int(p) for p in batch.position]
    props_warned = sorted(p.offset for p in report.problems if p.kind == "bad-properties")
    assert props_warned == [positions[i] for i in sorted(bad_rows)]
    assert [p.offset for p in report.problems if p.kind == "bad-topic"] == [positions[topic_row]]


def test_java_hashes_of_many_widths():
    texts = ["", "a", "TagA", "x" * 8, "y" * 9, "z" * 33, "w" * 256, "q" * 257, "标签E", "é" * 100]
    raw = [t.encode() for t in texts] * 5
    data = np.frombuffer(b"".join(raw), dtype=np.uint8)
    lengths = np.array([len(r) for r in raw], dtype=np.int64)
    hashes, units = propscan.java_hashes(data, np.cumsum(lengths) - lengths, lengths)
    for r, h, u in zip(raw, hashes.tolist(), units.tolist(), strict=True):
        text = r.decode()
        assert h == string_hash(text) & 0xFFFFFFFF and u == len(text.encode("utf-16-le")) // 2


def test_index_with_a_key_listed_twice_is_covered(tmp_path):
    """``KEYS "dup dup"`` gives two entries of one hash; the in-order join and the general one agree."""
    root = tmp_path / "store"
    with StoreWriter(root) as writer:
        for i in range(30):
            keys = "dup dup" if i % 2 else f"k{i} k{i}x"
            writer.append(Message("TopicA", i % 2, f"m{i}".encode(), {"KEYS": keys, "TAGS": "t"}))
    store = Store.open(root)
    report = verify_store(store)
    assert report.errors == 0, report.problems
    assert report.index_entries == 60
    # the same store with the index entries shuffled out of record order: the general join
    path = sorted((root / "index").iterdir())[0]
    f = IndexFile(path)
    first = indexfile.entry_position(1, f.hash_slot_num)
    f.close()
    data = bytearray(path.read_bytes())
    size = indexfile.ENTRY_SIZE
    a, b = data[first : first + size], data[first + size : first + 2 * size]
    data[first : first + size], data[first + size : first + 2 * size] = b, a
    path.write_bytes(bytes(data))
    report = verify_store(Store.open(root))
    assert not [p for p in report.problems if p.kind.startswith("index-") and "missing" in p.kind]
