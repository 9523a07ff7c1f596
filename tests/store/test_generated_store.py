"""The generator's small store read back by the store readers (formats.md §1-§5)."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from fixtures.generate import PRESETS, ZLIB_SYS_FLAG, generate
from formats import commitlog as fmt
from formats.consumequeue import CQ_UNIT_SIZE
from rmqcli.store import Store
from rmqcli.store.configfiles import consumer_offsets, delay_offsets, load_config, topic_configs

SETTINGS = PRESETS["small"].settings


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "store"
    summary = generate(out, "small", seed=3)
    store = Store(out, SETTINGS)
    yield summary, store
    store.close()


def test_shape(generated):
    summary, store = generated
    assert summary.commitlog_files >= 3 and summary.index_files >= 3
    assert any(len(store.consume_queue(t, q).files) > 1 for t, q in store.queue_ids())
    topics = {s.topic for s in summary.sent}
    assert {"TopicA", "TopicB", "OrderTopic", "主题-Ünïcode", fmt.SCHEDULE_TOPIC, "TxTopic"} <= topics
    assert any(s.sys_flag == ZLIB_SYS_FLAG for s in summary.sent)
    assert any(s.sys_flag & fmt.TRANSACTION_MASK == fmt.TransactionType.COMMIT for s in summary.sent)
    assert any("batchIdx" in s.properties for s in summary.sent)
    assert not (summary.outdir / "abort").exists()
    assert (summary.outdir / "lock").read_bytes() == b"lock"


def test_every_record_reads_back(generated):
    summary, store = generated
    records = list(store.commitlog.records())
    assert len(records) == len(summary.sent)
    by_offset = {r.physical_offset: r for r in records}
    for sent in summary.sent:
        rec = by_offset[sent.physical_offset]
        assert (rec.topic, rec.queue_id, rec.queue_offset, rec.total_size) == (
            sent.topic,
            sent.queue_id,
            sent.queue_offset,
            sent.size,
        )
        assert rec.sys_flag == sent.sys_flag and rec.store_timestamp == sent.store_timestamp
        assert rec.properties == sent.properties and rec.msg_id == sent.msg_id
        assert rec.body() == sent.body
        assert rec.body_crc == fmt.body_crc(rec.stored_body)
        if rec.compressed:
            assert len(sent.body) >= 4096 and zlib.decompress(rec.stored_body) == sent.body


def test_consume_queues_point_at_their_records(generated):
    summary, store = generated
    expected = {}
    for sent in summary.sent:
        if sent.sys_flag & fmt.TRANSACTION_MASK in (0, fmt.TransactionType.COMMIT):
            expected.setdefault((sent.topic, sent.queue_id), []).append(sent)
    assert set(store.queue_ids()) == set(expected)
    for (topic, queue_id), sents in expected.items():
        units = list(store.consume_queue(topic, queue_id).units())
        assert [u.queue_offset for u in units] == list(range(len(sents)))
        for unit, sent in zip(units, sorted(sents, key=lambda s: s.queue_offset), strict=True):
            assert (unit.commitlog_offset, unit.size) == (sent.physical_offset, sent.size)
            assert unit.tags_code == fmt.dispatch_tags_code(topic, sent.properties, sent.store_timestamp)
        size = store.consume_queue(topic, queue_id).files[0].size
        assert size == SETTINGS.mapped_file_size_consume_queue and size % CQ_UNIT_SIZE == 0


def test_index_finds_every_key(generated):
    summary, store = generated
    for sent in summary.sent:
        keys = [k for k in sent.properties.get(fmt.PROPERTY_KEYS, "").split(" ") if k]
        uniq = sent.properties.get(fmt.PROPERTY_UNIQ_KEY)
        for key in keys + ([uniq] if uniq else []):
            found = store.index.query(sent.topic, key, 64)
            assert sent.physical_offset in found or len(found) == 64, (sent.topic, key)


def test_checkpoint_and_config(generated):
    summary, store = generated
    cp = store.checkpoint()
    last = max(summary.sent, key=lambda s: s.physical_offset)
    assert cp.physic_msg_timestamp == last.store_timestamp
    dispatched = [s for s in summary.sent if s.sys_flag & fmt.TRANSACTION_MASK in (0, 8)]
    assert cp.logics_msg_timestamp == max(dispatched, key=lambda s: s.physical_offset).store_timestamp
    full = [f for f in store.index.files if f.header.index_count >= SETTINGS.max_index_num]
    assert cp.index_msg_timestamp == full[-1].header.end_timestamp
    config = summary.outdir / "config"
    assert topic_configs(config)["TopicB"]["writeQueueNums"] == 8
    assert list(topic_configs(config)["TopicA"]) == sorted(topic_configs(config)["TopicA"])
    offsets = consumer_offsets(config)[("TopicB", "GroupB")]
    assert offsets == {q: store.consume_queue("TopicB", q).max_offset // 2 for q in range(8)}
    assert "{0:" in (config / "consumerOffset.json").read_text()
    delays = delay_offsets(config)
    assert delays and all(1 <= level <= 3 for level in delays)
    assert set(load_config(config, "subscriptionGroup.json").data["subscriptionGroupTable"]) == {
        "GroupA",
        "GroupB",
    }


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_deterministic(tmp_path):
    a = generate(tmp_path / "a", "small", seed=5)
    b = generate(tmp_path / "b", "small", seed=5)
    assert _tree(a.outdir) == _tree(b.outdir)
    c = generate(tmp_path / "c", "small", seed=6)
    assert _tree(a.outdir) != _tree(c.outdir)


def test_bench_records_match_schema(tmp_path):
    """The bench preset's records (encoded with the compiled forms) equal ``MessageRecord.build``."""
    summary = generate(tmp_path / "bench", "bench", size_mib=1, message_size=512)
    store = Store(summary.outdir, PRESETS["bench"].settings)
    count = 0
    for rec in store.commitlog.records():
        raw = store.commitlog.files[0].read(rec.position, rec.total_size)
        built = fmt.MessageRecord.build(
            dict(
                total_size=0,
                magic_code=fmt.MAGIC_V1,
                body_crc=fmt.body_crc(rec.stored_body),
                queue_id=rec.queue_id,
                flag=rec.flag,
                queue_offset=rec.queue_offset,
                physical_offset=rec.physical_offset,
                sys_flag=rec.sys_flag,
                born_timestamp=rec.born_timestamp,
                born_host=dict(address=rec.born_address, port=rec.born_port),
                store_timestamp=rec.store_timestamp,
                store_host=dict(address=rec.store_address, port=rec.store_port),
                reconsume_times=rec.reconsume_times,
                prepared_transaction_offset=rec.prepared_transaction_offset,
                body=rec.stored_body,
                topic=rec.topic,
                properties=rec.properties_raw,
            )
        )
        assert raw == built
        count += 1
    assert count == summary.messages
    store.close()


def test_cli_prints_one_line(tmp_path, capsys):
    from fixtures.generate import main

    main([str(tmp_path / "s"), "--preset", "small", "--seed", "2"])
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "messages=" in out
