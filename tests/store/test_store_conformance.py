"""The store readers against stores written by a real Apache RocketMQ broker (expected.json)."""

from __future__ import annotations

import hashlib

import pytest

from formats import commitlog as fmt
from formats import fastjson
from rmqcli.ops.records import BodyMode, record_fields
from rmqcli.store import Store
from rmqcli.store.configfiles import load_config
from tests.support.realfixtures import variant_params

pytestmark = pytest.mark.parametrize("variant", variant_params())


@pytest.fixture
def store(variant):
    s = Store.open(variant.store)
    yield s
    s.close()


def test_every_record_field_agrees(variant, store):
    records = list(store.commitlog.records())
    assert len(records) == len(variant.records) == variant.facts["commitlog"]["recordCount"]
    for rec, exp in zip(records, variant.records, strict=True):
        # the fields by RocketMQ's names (MessageDecoder), as rmq's dumps write them
        row = record_fields(rec, body=BodyMode.sha256, raw=True, properties_raw=True)
        common = set(row) & set(exp)
        assert len(common) >= 30
        assert {k: row[k] for k in common} == {k: exp[k] for k in common}, rec.position
        assert row["bodySha256"] == exp["body_sha256"], rec.position
        if "body_sha256_decompressed" in exp:
            assert hashlib.sha256(rec.body()).hexdigest() == exp["body_sha256_decompressed"]


def _hashmap_ordered(keys: list[str]) -> bool:
    return fmt.hashmap_order(keys) == keys


def test_properties_are_in_java_hashmap_order(variant, store):
    """Each record's map, or for a classic batch its own map followed by the batch's map (§1.7)."""
    for rec in store.commitlog.records():
        keys = [k for k, _ in fmt.property_pairs(rec.properties_raw)]
        assert _hashmap_ordered(keys) or any(
            _hashmap_ordered(keys[:i]) and _hashmap_ordered(keys[i:]) and "CLUSTER" in keys[i:]
            for i in range(1, len(keys))
        ), rec.position


def test_header_scan_agrees_with_full_decode(variant, store):
    headers = list(store.commitlog.headers())
    assert [(h.position, h.topic, h.queue_id, h.queue_offset, h.store_timestamp) for h in headers] == [
        (r["position"], r["topic"], r["queueId"], r["queueOffset"], r["storeTimestamp"])
        for r in variant.records
    ]


def test_commitlog_files_and_ends(variant, store):
    facts = variant.facts["commitlog"]
    assert [f.name for f in store.commitlog.files] == [f["name"] for f in facts["files"]]
    for mf, exp in zip(store.commitlog.files, facts["files"], strict=True):
        end = store.commitlog.file_end(mf)
        assert end.data_end == exp["dataEnd"]
        assert end.tail == exp["tail"]["kind"]
        if end.tail == "blank":
            assert end.blank_size == exp["tail"]["blankTotalSize"]
    assert store.commitlog.min_offset == facts["firstFileFromOffset"]
    assert store.commitlog.max_offset() == facts["endOfLastRecord"]


def test_consume_queue_units_agree(variant, store):
    mine = sorted(
        (t, q, u.queue_offset, u.commitlog_offset, u.size, u.tags_code, u.is_filler)
        for t, q in store.queue_ids()
        for u in store.consume_queue(t, q).units()
    )
    theirs = sorted(
        (c["topic"], c["queueId"], c["cqOffset"], c["phyOffset"], c["size"], c["tagsCode"], c["fillPreBlank"])
        for c in variant.cq_units
    )
    assert mine == theirs


def test_queue_min_max_offsets_agree_with_store_view(variant, store):
    view = variant.facts["store_view"]
    for topic, queues in view["consumeQueues"].items():
        for qid, exp in queues.items():
            cq = store.consume_queue(topic, int(qid))
            assert cq.max_offset == exp["maxOffset"], (topic, qid)
            assert cq.min_offset(store.commitlog.min_offset) == exp["minOffset"], (topic, qid)


def test_index_lookups_agree(variant, store):
    index = variant.facts["index"]
    assert [f.name for f in store.index.files] == [f["name"] for f in index["files"]]
    for f, exp in zip(store.index.files, index["files"], strict=True):
        h = f.header
        assert (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset) == (
            exp["beginTimestamp"],
            exp["endTimestamp"],
            exp["beginPhyOffset"],
            exp["endPhyOffset"],
        )
        assert (h.hash_slot_count, h.index_count) == (exp["hashSlotCount"], exp["indexCount"])
        assert sum(1 for _ in f.used_slots()) == exp["nonEmptySlots(decoded from raw bytes)"]
    for query in index["queries"]:
        assert store.index.query(query["topic"], query["key"]) == query["phyOffsets"], query["key"]


def test_checkpoint_agrees(variant, store):
    exp = variant.facts["checkpoint"]
    cp = store.checkpoint()
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (
        exp["physicMsgTimestamp"],
        exp["logicsMsgTimestamp"],
        exp["indexMsgTimestamp"],
    )
    assert cp.min_timestamp == exp["minTimestamp(getMinTimestamp)"]
    assert cp.min_timestamp_index == exp["minTimestampIndex(getMinTimestampIndex)"]


def test_abort_and_lock(variant, store):
    assert store.abort_exists == variant.facts["abort_file_present"]
    assert store.lock_path.exists() == variant.facts["lock_file_present"]
    assert not store.lock_held()


def test_config_files_parse_and_rewrite_byte_identical(variant, store):
    for path in sorted(store.config_dir.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        assert fastjson.dumps(fastjson.loads(text), pretty=True) == text, path.name
    parsed = variant.facts.get("config_files", {}).get("parsed", {})
    for name, exp in parsed.items():
        data = load_config(store.config_dir, name).data
        for table, entries in exp.items():
            if isinstance(entries, dict) and table.endswith("Table"):
                assert sorted(map(str, data[table])) == sorted(map(str, entries)), (name, table)
