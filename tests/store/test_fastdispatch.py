"""The bulk dispatch (``fastdispatch`` + ``propscan``) writes the per-record ``Dispatcher``'s bytes."""

from __future__ import annotations

import itertools
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from fixtures.generate import generate
from formats import commitlog as fmt
from formats import indexfile
from formats.javahash import string_hash
from rmqcli.errors import CorruptDataError
from rmqcli.ops.rebuild import rebuild_namer, stage_rebuild
from rmqcli.store import Store
from rmqcli.store.scan import propscan
from rmqcli.store.scan.fastdispatch import FastDispatcher, dispatch_commitlog
from rmqcli.store.settings import StoreSettings
from rmqcli.store.write.dispatch import Dispatcher
from rmqcli.store.write.messages import Host, InnerMessage
from rmqcli.store.write.writer import StoreWriter
from tests.support.realfixtures import variant_params
from tests.support.stores import geometry

SEP, NV = fmt.PROPERTY_SEPARATOR.encode(), fmt.NAME_VALUE_SEPARATOR.encode()


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def dispatch_both(root: Path, out: Path, conf: Path | None = None, **options) -> tuple:
    """Every record through ``Dispatcher`` into ``out/each`` and in bulk into ``out/bulk``."""
    store = Store.open(root, conf)
    settings = store.effective_settings()
    start = store.commitlog.min_offset
    each = Dispatcher(out / "each", settings, rebuild_namer, **options)
    count, error = 0, None
    try:
        for rec in store.commitlog.records(start):
            if rec.physical_offset >= start:
                each.dispatch_record(rec)
                count += 1
    except CorruptDataError as exc:
        error = exc
    each.flush()
    each.close()
    bulk = FastDispatcher(out / "bulk", settings, rebuild_namer, **options)
    bulk_error = dispatch_commitlog(store.commitlog, bulk, start, store.record_offsets())
    bulk.close()
    store.close()
    assert bulk.records == count
    assert str(bulk_error) == str(error)
    assert bulk.logics_msg_timestamp == each.logics_msg_timestamp
    assert bulk.completed_end_timestamp == each.index.completed_end_timestamp
    assert len(bulk.queues) == len(each.cqs)
    assert bulk.units == sum(cq.max_offset - cq.min_logic_offset // 20 for cq in each.cqs.values())
    assert bulk.index_entries == sum(max(f.index_count - 1, 0) for f in each.index.files)
    return tree(out / "each"), tree(out / "bulk")


def assert_same(root: Path, out: Path, conf: Path | None = None, **options) -> dict[str, bytes]:
    each, bulk = dispatch_both(root, out, conf, **options)
    assert sorted(each) == sorted(bulk)
    for name in each:
        assert each[name] == bulk[name], name
    return each


@pytest.mark.parametrize("variant", variant_params())
def test_real_stores(variant, tmp_path):
    files = assert_same(variant.store, tmp_path)
    assert any(name.startswith("index/") for name in files)


@pytest.mark.parametrize("preset,seed", [("small", 1), ("small", 4), ("demo", 2), ("demo", 9)])
def test_generated_stores(preset, seed, tmp_path):
    root = tmp_path / "store"
    generate(root, preset, seed=seed)
    files = assert_same(root, tmp_path / "out")
    assert sum(name.startswith("index/") for name in files) > 1  # index files roll over


def test_topic_only_and_index_only(tmp_path):
    root = tmp_path / "store"
    generate(root, "small", seed=6)
    assert_same(root, tmp_path / "a", index=False, topic="TopicA")
    assert_same(root, tmp_path / "b", consume_queues=False)


def test_expired_head_fills_pre_blank(tmp_path):
    """A CommitLog whose first files are gone: queues start past 0 (``fillPreBlank``)."""
    root = tmp_path / "store"
    generate(root, "demo", seed=5)
    for f in sorted((root / "commitlog").iterdir())[:2]:
        f.unlink()
    shutil.rmtree(root / "consumequeue")
    files = assert_same(root, tmp_path / "out")
    filler = bytes.fromhex("0000000000000000") + (0x7FFFFFFF).to_bytes(4, "big") + bytes(8)
    assert any(name.startswith("consumequeue/") and data.startswith(filler) for name, data in files.items())


def _props(pairs: list[tuple[bytes, bytes]], trailing: bool = False) -> bytes:
    text = SEP.join(k + NV + v for k, v in pairs)
    return text + SEP if trailing else text


def write_odd_store(root: Path, seed: int, settings: StoreSettings) -> None:
    """Records that exercise the property parser, the hashes and the dispatch rules."""
    rng = random.Random(seed)
    clock = [1_700_000_000_000]
    writer = StoreWriter(
        root, settings, clock=lambda: clock[0], index_namer=lambda ts: str(ts)[:17].zfill(17)
    )
    words = ["a", "ключ", "订单-7", "🚀x", "k" * 300, "", " ", "UNIQ_KEY", "x\x01y", "TAGS"]
    topics = ["TopicA", "主题-Ü", "T" * 120, fmt.SCHEDULE_TOPIC, "Tx"]
    v6 = Host(bytes(range(16)), 7)
    with writer:
        for i in range(900):
            clock[0] += rng.choice([0, 1, 999, 1000, 1001, 70_000])
            topic = rng.choice(topics)
            pairs: list[tuple[bytes, bytes]] = []
            for _ in range(rng.randrange(7)):
                name = rng.choice([b"KEYS", b"TAGS", b"UNIQ_KEY", b"DELAY", b"color", b"", b"KEYSX", b"TAG"])
                if name == b"DELAY":
                    value = rng.choice([b"1", b"3", b"18", b"40", b"0", b""])
                elif name == b"KEYS":
                    value = " ".join(rng.choice(words) for _ in range(rng.randrange(5))).encode()
                else:
                    value = rng.choice(words).encode() + rng.choice([b"", str(i).encode(), b"\xff\xfe"])
                pairs.append((name, value))
            if rng.random() < 0.05:
                pairs.append((b"big", b"v" * rng.randrange(400, 3000)))
            raw = _props(pairs, trailing=rng.random() < 0.5)
            if rng.random() < 0.05:
                raw = SEP + raw + SEP + NV + b"x" + SEP + b"KEYS" + NV
            tran = rng.choice([0, 0, 0, 0x4, 0x8, 0xC])
            writer.put_message(
                InnerMessage(
                    topic, rng.randrange(3), rng.randbytes(rng.randrange(50)), {}, raw, 0, tran, clock[0] - 5,
                    v6 if rng.random() < 0.2 else Host(bytes([10, 0, 0, 1]), 9), store_timestamp=clock[0],
                )
            )  # fmt: skip


ODD_SETTINGS = geometry(64 * 1024, 400, 7, 9)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_odd_records(seed, tmp_path):
    """Non-ASCII, duplicate and empty keys/values, long properties, delays, every transaction type."""
    root = tmp_path / "store"
    write_odd_store(root, seed, ODD_SETTINGS)
    conf = tmp_path / "broker.conf"
    conf.write_text("maxHashSlotNum=7\nmaxIndexNum=9\nmappedFileSizeConsumeQueue=400\n")
    shutil.rmtree(root / "index")
    files = assert_same(root, tmp_path / "out", conf)
    assert sum(name.startswith("index/") for name in files) > 20


def test_corrupt_record_stops_both_at_the_same_place(tmp_path):
    root = tmp_path / "store"
    generate(root, "demo", seed=3)
    victim = sorted((root / "commitlog").iterdir())[1]
    data = bytearray(victim.read_bytes())
    store = Store.open(root)
    records = [r for r in store.commitlog.records() if r.file.endswith(victim.name)]
    store.close()
    middle = records[len(records) // 2]
    data[middle.file_position + 4] ^= 0xFF  # the magic code
    victim.write_bytes(bytes(data))
    each, bulk = dispatch_both(root, tmp_path / "out")
    assert each == bulk


def test_stage_rebuild_uses_the_bulk_path_with_the_same_result(tmp_path):
    root = tmp_path / "store"
    generate(root, "demo", seed=8)
    store = Store.open(root)
    bulk = stage_rebuild(store)
    bulk_files = tree(bulk.staged)
    shutil.move(bulk.staged, tmp_path / "bulk")
    each = stage_rebuild(store, until=store.commitlog.max_offset() + 1)  # per-record path
    assert tree(each.staged) == bulk_files
    assert (bulk.records, bulk.queues, bulk.units, bulk.index_files, bulk.index_entries) == (
        each.records, each.queues, each.units, each.index_files, each.index_entries,
    )  # fmt: skip
    assert bulk.checkpoint == each.checkpoint


# --- propscan units ---------------------------------------------------------------------------------
def test_java_hashes_match_string_hash():
    rng = random.Random(7)
    alphabet = "abcXYZ09 #-_é字🚀\u0000\uffff"
    texts = ["", "TagA", "*", "a||b", "TopicTest#KEY1", "x" * 300, "y" * 257, "z" * 256]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(70))) for _ in range(3000)]
    raw = [t.encode() for t in texts] + [b"\xff\xfeabc", b"ab\xe4\xb8", b"\xed\xa0\x80"]
    data = np.frombuffer(b"".join(raw), dtype=np.uint8)
    lengths = np.array([len(r) for r in raw], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    hashes, units = propscan.java_hashes(data, starts, lengths)
    for r, h, u in zip(raw, hashes.tolist(), units.tolist(), strict=True):
        text = r.decode("utf-8", "replace")
        assert h == string_hash(text) & 0xFFFFFFFF, text
        assert u == len(text.encode("utf-16-le")) // 2
    assert propscan.signed32(hashes[:5]).tolist()[1:4] == [2598919, 42, 3012833]


def test_split_tokens_is_str_split():
    values = [b"a b", b"  a  b ", b"", b"one", b"x" * 300 + b" y", "ключ 订单".encode(), b" "]
    data = np.frombuffer(b"".join(values), dtype=np.uint8)
    lengths = np.array([len(v) for v in values], dtype=np.int64)
    vals = propscan.Values(lengths > 0, np.cumsum(lengths) - lengths, lengths)
    rec, start, length = propscan.split_tokens(data, vals)
    got = [(int(r), bytes(data[s : s + n]).decode()) for r, s, n in zip(rec, start, length, strict=True)]
    want = [(i, t) for i, v in enumerate(values) for t in v.decode().split(" ") if t]
    assert got == want


def test_scan_file_locates_the_last_non_empty_value(tmp_path):
    root = tmp_path / "store"
    write_odd_store(root, 11, ODD_SETTINGS)
    store = Store.open(root)
    for mf in store.commitlog.files:
        buf = mf.map()
        scan = propscan.scan_file(buf, 0, mf.from_offset, names=propscan.DISPATCH_PROPERTIES)
        assert scan is not None
        end = mf.from_offset + mf.size
        records = list(
            itertools.takewhile(
                lambda r, end=end: r.physical_offset < end, store.commitlog.records(mf.from_offset)
            )
        )
        assert len(scan) == len(records)
        for name in propscan.DISPATCH_PROPERTIES:
            got = scan.strings(name, np.arange(len(scan)))
            assert got == [rec.properties.get(name) for rec in records], name
        assert scan.physical.tolist() == [r.physical_offset for r in records]
        assert [scan.headers.topics[i] for i in scan.headers.topic_index] == [r.topic for r in records]
        assert scan.headers.store_timestamp.tolist() == [r.store_timestamp for r in records]
    store.close()


def test_index_key_hash_vector():
    assert indexfile.key_hash("TopicTest#KEY1") == 1656969516


def test_scan_file_reads_delay_only_where_dispatch_uses_it(tmp_path):
    """By default DELAY is located only in files holding SCHEDULE_TOPIC_XXXX records (their tags
    code is the delivery time); a file without them gives no DELAY values, and its tags codes and
    index keys are those of a scan that located every property."""
    write_odd_store(tmp_path / "odd", 11, ODD_SETTINGS)  # every file has SCHEDULE_TOPIC_XXXX records
    generate(tmp_path / "bench", "bench", size_mib=2, message_size=256)  # none
    seen = set()
    for root in (tmp_path / "odd", tmp_path / "bench"):
        store = Store.open(root)
        for mf in store.commitlog.files:
            buf = mf.map()
            default = propscan.scan_file(buf, 0, mf.from_offset)
            full = propscan.scan_file(buf, 0, mf.from_offset, names=propscan.DISPATCH_PROPERTIES)
            assert default is not None and full is not None
            rows = np.arange(len(full))
            scheduled = fmt.SCHEDULE_TOPIC in full.headers.topics
            seen.add(scheduled)
            assert (fmt.PROPERTY_DELAY in default.values) == scheduled
            assert propscan.tags_codes(default, rows).tolist() == propscan.tags_codes(full, rows).tolist()
            pairs = zip(propscan.index_keys(default, rows), propscan.index_keys(full, rows), strict=True)
            assert all(got.tolist() == want.tolist() for got, want in pairs)
        store.close()
    assert seen == {True, False}
