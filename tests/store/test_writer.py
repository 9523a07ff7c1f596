"""The store writer: record bytes, file rolling, dispatch, and a replay of real broker stores.

The replay (formats.md §1-§4, §7) feeds every record of a store written by Apache RocketMQ 4.9.8
to ``StoreWriter`` as the broker received it, and compares the files byte for byte:

- plain sends go through ``append`` (``SendMessageProcessor``): the stored ``CLUSTER`` is
  removed and added back by the writer, the properties re-serialised in ``HashMap`` order;
- records in ``SCHEDULE_TOPIC_XXXX`` are fed as the message before the delay rewrite (topic and
  queue from ``REAL_TOPIC``/``REAL_QID``, those two removed) to ``put_message``, so the writer
  does the rewrite itself; the retries among them carry their original ``CLUSTER`` (the broker
  copies the original message's map) and are fed with it;
- runs of records whose properties end with the batch-level ``CLUSTER``/``WAIT`` string are
  regrouped into one classic batch (``append_batch``);
- delay re-puts go through ``put_message`` with the stored properties string: it still holds
  ``DELAY`` while the broker's map does not (``ScheduleMessageService`` clears it from the map
  after serialising);
- everything else the broker built from a map (transaction half/op/commit records, retry
  messages) goes through ``put_message`` with the map only, serialised by the writer.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import commitlog as fmt
from formats import indexfile as ifmt
from formats.consumequeue import CQ_UNIT_SIZE, CQ_UNIT_STRUCT, FILLER_UNIT
from rmqcli.store import Store
from rmqcli.store.read.commitlog import Record
from rmqcli.store.settings import StoreSettings, load_broker_conf
from rmqcli.store.write.messages import (
    BatchElement,
    BatchMessage,
    Host,
    InnerMessage,
    Message,
    batch_properties,
)
from rmqcli.store.write.records import encode_record
from rmqcli.store.write.writer import StoreWriter
from tests.support.realfixtures import REAL_ROOT, real_params
from tests.support.stores import TINY, sparse_copy

REPLAYED = ["basic-1/store", "ipv6/store", "crash-1/store-recovered-by-broker", "expired/store"]


# --- record bytes ----------------------------------------------------------------------------------
_hosts = st.one_of(
    st.tuples(st.binary(min_size=4, max_size=4), st.integers(0, 65535)),
    st.tuples(st.binary(min_size=16, max_size=16), st.integers(0, 65535)),
)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(
    born=_hosts,
    store=_hosts,
    sys_flag=st.integers(0, 0x7FF),
    queue_id=_i32,
    flag=_i32,
    queue_offset=_i64,
    physical_offset=_i64,
    born_ts=_i64,
    store_ts=_i64,
    reconsume=_i32,
    prepared=_i64,
    body=st.binary(max_size=300),
    topic=st.text(min_size=1, max_size=30),
    props=st.dictionaries(st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8), max_size=5),
)
def test_encode_record_equals_schema_build(
    born, store, sys_flag, queue_id, flag, queue_offset, physical_offset, born_ts, store_ts, reconsume,
    prepared, body, topic, props,
):  # fmt: skip
    topic_bytes = topic.encode()[:127]
    topic = topic_bytes.decode("utf-8", "ignore")
    topic_bytes = topic.encode()
    sys_flag = (sys_flag & ~fmt.HOST_FLAGS) | (fmt.BORNHOST_V6_FLAG if len(born[0]) == 16 else 0)
    sys_flag |= fmt.STOREHOST_V6_FLAG if len(store[0]) == 16 else 0
    properties = fmt.encode_properties_as_broker(props)
    fields = dict(
        sys_flag=sys_flag, queue_id=queue_id, flag=flag, queue_offset=queue_offset,
        physical_offset=physical_offset, born_timestamp=born_ts, store_timestamp=store_ts,
        reconsume_times=reconsume, prepared_transaction_offset=prepared, body=body,
    )  # fmt: skip
    fast = encode_record(**fields, born_host=born, store_host=store, topic=topic_bytes, properties=properties)
    built = fmt.MessageRecord.build(
        dict(
            fields,
            total_size=0,
            magic_code=fmt.MAGIC_V1,
            body_crc=fmt.body_crc(body),
            born_host=dict(address=born[0], port=born[1]),
            store_host=dict(address=store[0], port=store[1]),
            topic=topic,
            properties=properties,
        )
    )
    assert fast == built


# --- small behaviours ------------------------------------------------------------------------------


def _clock():
    counter = itertools.count(1_700_000_000_000, 1000)
    return lambda: next(counter)


def _writer(root: Path, **kw) -> StoreWriter:
    names = (f"2023111400000{i:04d}" for i in itertools.count())
    return StoreWriter(root, TINY, clock=_clock(), index_namer=lambda _ts: next(names), **kw)


def test_rolls_with_blank_and_reads_back(tmp_path):
    with _writer(tmp_path) as w:
        assert (tmp_path / "abort").exists()
        results = [
            w.append(Message("T", i % 2, bytes([i]) * 300, {"KEYS": f"k{i}", "TAGS": "a"})) for i in range(40)
        ]
    assert not (tmp_path / "abort").exists()
    files = sorted((tmp_path / "commitlog").iterdir())
    assert len(files) > 2 and all(f.stat().st_size == 4096 for f in files)
    store = Store(tmp_path, TINY)
    records = list(store.commitlog.records())
    assert [r.physical_offset for r in records] == [r.physical_offset for r in results]
    assert [r.queue_offset for r in records] == [i // 2 for i in range(40)]
    for mf in store.commitlog.files[:-1]:
        end = store.commitlog.file_end(mf)
        assert end.tail == "blank" and end.blank_size == 4096 - end.data_end
        assert end.blank_size < records[0].total_size + 8
    assert records[0].properties == {"KEYS": "k0", "TAGS": "a", "CLUSTER": "DefaultCluster"}
    assert records[0].msg_id == results[0].msg_id
    cq = store.consume_queue("T", 1)
    assert [u.commitlog_offset for u in cq.units()] == [r.physical_offset for r in results[1::2]]
    assert len(list((tmp_path / "consumequeue" / "T" / "1").iterdir())) == 4  # 5 units a file
    for i, r in enumerate(results):
        assert store.index.query("T", f"k{i}") == [r.physical_offset]
    store.close()


def test_delay_prepared_and_filler(tmp_path):
    with _writer(tmp_path) as w:
        d = w.append(Message("T", 3, b"x", {"DELAY": "2", "TAGS": "t"}, store_timestamp=5000))
        assert (d.topic, d.queue_id, d.queue_offset) == (fmt.SCHEDULE_TOPIC, 1, 0)
        p = w.append(Message("T", 0, b"p", {"KEYS": "pk"}, sys_flag=fmt.TransactionType.PREPARED))
        delayed_prepared = w.append(Message("T", 0, b"p", {"DELAY": "1"}, sys_flag=0xC))
        assert p.queue_offset == 0 and delayed_prepared.topic == "T"
        w.queue_offsets[("Late", 0)] = 7
        w.append(Message("Late", 0, b"l"))
    store = Store(tmp_path, TINY)
    rec = store.commitlog.read(d.physical_offset)
    assert rec.properties["REAL_TOPIC"] == "T" and rec.properties["REAL_QID"] == "3"
    (unit,) = store.consume_queue(fmt.SCHEDULE_TOPIC, 1).units()
    assert unit.tags_code == 5000 + fmt.DEFAULT_DELAY_MILLIS[1]
    assert list(store.consume_queue("T", 0).units()) == []  # PREPARED and ROLLBACK: no unit
    assert store.index.query("T", "pk") == [p.physical_offset]  # PREPARED is indexed
    units = list(store.consume_queue("Late", 0).units())
    assert [u.is_filler for u in units] == [True] * 2 + [False]  # 7 % 5 fillers in file 5
    assert store.consume_queue("Late", 0).files[0].name == f"{5 * CQ_UNIT_SIZE:020d}"
    store.close()


def test_batch_moves_whole_to_next_file(tmp_path):
    with _writer(tmp_path) as w:
        w.append(Message("T", 0, b"a" * 3000))
        batch = BatchMessage("T", 0, [BatchElement(b"b" * 200, {"KEYS": f"b{i}"}) for i in range(5)])
        result = w.append_batch(batch)
    assert result.physical_offset == 4096
    assert result.msg_id.count(",") == 4
    store = Store(tmp_path, TINY)
    recs = list(store.commitlog.records())
    assert [r.queue_offset for r in recs] == list(range(6))
    assert len({r.store_timestamp for r in recs[1:]}) == 1
    assert recs[1].properties_raw.endswith(b"\x02" + batch_properties(batch, "DefaultCluster"))
    store.close()


def test_reopen_continues(tmp_path):
    with _writer(tmp_path) as w:
        for i in range(30):
            w.append(Message("T", 0, b"z" * 200, {"KEYS": f"k{i}"}))
    with _writer(tmp_path) as w:
        assert w.queue_max_offset("T", 0) == 30
        r = w.append(Message("T", 0, b"y", {"KEYS": "again"}))
        assert r.queue_offset == 30
    store = Store(tmp_path, TINY)
    assert store.index.query("T", "again") == [r.physical_offset]
    assert store.consume_queue("T", 0).max_offset == 31
    store.close()


def test_a_topic_grown_by_a_record_keeps_its_other_settings(tmp_path):
    """A record past a topic's write queues grows the queue counts and nothing else: its perm,
    order flag and 5.x attributes stay (topics.json is read and written by brokers of both lines)."""
    import json

    with _writer(tmp_path) as w:
        w.create_topic("Grown", 2, order=True, perm=4)
        w.config.topics["Grown"] = {"attributes": {"message.type": "FIFO"}, **w.config.topics["Grown"]}
        w.config.topics["Grown"]["readQueueNums"] = 8
        w.append(Message("Grown", 5, b"x", {}))
    topic = json.loads((tmp_path / "config" / "topics.json").read_text())["topicConfigTable"]["Grown"]
    assert topic["attributes"] == {"message.type": "FIFO"}
    assert (topic["perm"], topic["order"]) == (4, True)
    assert (topic["writeQueueNums"], topic["readQueueNums"]) == (6, 8)


def test_lock_refuses_second_writer(tmp_path):
    import subprocess
    import sys

    with _writer(tmp_path):
        code = (
            "import sys; from rmqcli.store.write.writer import StoreWriter\n"
            "try:\n    StoreWriter(sys.argv[1])\nexcept Exception as e:\n    print(type(e).__name__)\n"
        )
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
        assert out.stdout.strip() == "UsageError"
    assert (tmp_path / "lock").read_bytes() == b"lock"


# --- replay of real stores -------------------------------------------------------------------------
def _host(address: bytes, port: int) -> Host:
    return Host(bytes(address), port)


def _has_duplicate_keys(raw: bytes) -> bool:
    keys = [k for k, _ in fmt.property_pairs(raw)]
    return len(keys) != len(set(keys))


def _batch_suffix(cluster: str) -> bytes:
    return batch_properties(BatchMessage("", 0, [], {fmt.PROPERTY_WAIT: "true"}), cluster)


def _common(rec: Record) -> dict:
    return dict(
        body=rec.stored_body,
        flag=rec.flag,
        sys_flag=rec.sys_flag,
        born_timestamp=rec.born_timestamp,
        born_host=_host(rec.born_address, rec.born_port),
        store_host=_host(rec.store_address, rec.store_port),
        reconsume_times=rec.reconsume_times,
        prepared_transaction_offset=rec.prepared_transaction_offset,
        store_timestamp=rec.store_timestamp,
    )


def replay_record(w: StoreWriter, rec: Record) -> None:
    """Feed one stored record to the writer as its broker received it (see the module doc)."""
    props = dict(rec.properties)
    if rec.topic == fmt.SCHEDULE_TOPIC:
        topic = props.pop(fmt.PROPERTY_REAL_TOPIC)
        queue_id = int(props.pop(fmt.PROPERTY_REAL_QID))
        w.put_message(InnerMessage(topic, queue_id, properties=props, **_common(rec)))
    elif fmt.PROPERTY_CLUSTER in props and fmt.PROPERTY_WAIT not in props:
        del props[fmt.PROPERTY_CLUSTER]
        w.append(Message(rec.topic, rec.queue_id, properties=props, **_common(rec)))
    elif fmt.PROPERTY_DELAY in props:
        # A delay re-put: the stored string still has DELAY, the broker's map no longer does.
        del props[fmt.PROPERTY_DELAY]
        raw = rec.properties_raw
        w.put_message(
            InnerMessage(rec.topic, rec.queue_id, properties=props, properties_string=raw, **_common(rec))
        )
    else:
        # Made by the broker from a map (transaction half/op/commit, retries): serialised by the writer.
        w.put_message(InnerMessage(rec.topic, rec.queue_id, properties=props, **_common(rec)))


def replay_batch(w: StoreWriter, recs: list[Record], suffix: bytes) -> None:
    elements = [
        BatchElement(r.stored_body, fmt.decode_properties(r.properties_raw[: -len(suffix) - 1]), r.flag)
        for r in recs
    ]
    first = recs[0]
    common = _common(first)
    for name in ("body", "flag", "prepared_transaction_offset"):
        del common[name]
    w.append_batch(BatchMessage(first.topic, first.queue_id, elements, {fmt.PROPERTY_WAIT: "true"}, **common))


def _batch_key(rec: Record, suffix: bytes):
    if not rec.properties_raw.endswith(b"\x02" + suffix):
        return None
    return (rec.topic, rec.queue_id, rec.store_timestamp, rec.born_timestamp, rec.born_address, rec.born_port)


def replay(real: Path, out: Path, settings_: StoreSettings, *, store_host: Host | None = None) -> None:
    """Replay every record of the store at ``real`` into a new store at ``out``."""
    store = Store(real, settings_)
    suffix = _batch_suffix("DefaultCluster")
    records = list(store.commitlog.records())
    first = records[0]
    with StoreWriter(
        out,
        settings_,
        clock=lambda: first.store_timestamp,
        store_host=store_host or _host(first.store_address, first.store_port),
    ) as w:
        if store.commitlog.min_offset:
            # The broker deleted the first files (the 'expired' store): start where the store does,
            # and take each queue's first offset from its first surviving record, since the
            # deleted records (and cleanExpiredCQ's reset of TopicOld) cannot be replayed.
            w.commitlog.last_for(store.commitlog.min_offset)
            for rec in records:
                if fmt.is_dispatched_to_queue(rec.sys_flag):
                    w.queue_offsets.setdefault((rec.topic, rec.queue_id), rec.queue_offset)
        for key, group in itertools.groupby(records, key=lambda r: _batch_key(r, suffix)):
            group = list(group)
            if key is None:
                for rec in group:
                    replay_record(w, rec)
            else:
                replay_batch(w, group, suffix)
    store.close()


def _real_store(name: str) -> Path:
    path = REAL_ROOT / name
    assert path.is_dir(), f"{path} is absent"
    return path


@pytest.fixture(scope="module", params=real_params(REPLAYED))
def replayed(request, tmp_path_factory):
    real = _real_store(request.param)
    conf = load_broker_conf(real.parent / "broker.conf")
    out = tmp_path_factory.mktemp(request.param.replace("/", "-"))
    replay(real, out, conf)
    return request.param, real, out, conf


def test_replay_commitlog_identical(replayed):
    name, real, out, conf = replayed
    real_files = sorted((real / "commitlog").iterdir())
    ours = {p.name: p for p in (out / "commitlog").iterdir()}
    store = Store(real, conf)
    for mf in store.commitlog.files:
        end = store.commitlog.file_end(mf)
        if end.data_end == 0:
            continue  # a pre-allocated empty file left by a kill -9
        mine = ours[mf.name].read_bytes()
        theirs = mf.path.read_bytes()
        assert len(mine) == len(theirs)
        assert mine[: end.data_end] == theirs[: end.data_end], mf.name
        if end.tail == "blank":
            blank = end.data_end + fmt.BlankRecord.sizeof()
            assert mine[end.data_end : blank] == theirs[end.data_end : blank]
    assert len([f for f in real_files if f.name in ours]) == len(ours)
    store.close()


def test_replay_consume_queues_identical(replayed):
    """The same files, unit for unit, but where a unit is of a record below the CommitLog's first
    offset: the broker deleted those records (the 'expired' store) and they cannot be replayed, so
    the replay holds ``fillPreBlank``'s filler there, as the broker does for a queue whose first
    offset is not 0. A store that starts at offset 0 is thus compared byte for byte."""
    name, real, out, conf = replayed
    real_files = sorted(p.relative_to(real) for p in (real / "consumequeue").rglob("*") if p.is_file())
    our_files = sorted(p.relative_to(out) for p in (out / "consumequeue").rglob("*") if p.is_file())
    assert our_files == real_files
    store = Store(real, conf)
    min_offset = store.commitlog.min_offset
    store.close()
    deleted = 0
    for rel in real_files:
        theirs, mine = (real / rel).read_bytes(), (out / rel).read_bytes()
        assert len(mine) == len(theirs), rel
        for at in range(0, len(theirs), CQ_UNIT_SIZE):
            unit = theirs[at : at + CQ_UNIT_SIZE]
            offset, size, _ = CQ_UNIT_STRUCT.unpack(unit)
            if size > 0 and offset < min_offset:  # a unit of a deleted record
                deleted += 1
                assert mine[at : at + CQ_UNIT_SIZE] == FILLER_UNIT, (rel, at // CQ_UNIT_SIZE)
            else:
                assert mine[at : at + CQ_UNIT_SIZE] == unit, (rel, at // CQ_UNIT_SIZE)
    assert (deleted > 0) == (min_offset > 0)  # a store that lost its first records still has their units


def _index_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "index").iterdir() if p.is_file())


def _index_content(path: Path, conf: StoreSettings) -> tuple:
    data = path.read_bytes()
    header = ifmt.HEADER_STRUCT.unpack_from(data, 0)
    return header, data[ifmt.HEADER_SIZE :]


def test_replay_index_identical(replayed, tmp_path):
    name, real, out, conf = replayed
    real_files = _index_files(real)
    ours = _index_files(out)
    if name.startswith("crash-1"):
        # The broker's abnormal recovery deleted the last index file and re-dispatched every record:
        # ``buildIndex`` skips only offsets below the last (full) file's endPhyOffset, so the record
        # whose keys straddled the full file is indexed again, completely, in the new file. Do the same.
        copy = tmp_path / "store"
        shutil.copytree(out, copy, copy_function=sparse_copy)
        (copy / "abort").unlink(missing_ok=True)
        _index_files(copy)[-1].unlink()
        _redispatch_index(copy, conf)
        ours = _index_files(copy)
    if name.startswith("expired"):
        # Index files are filled by every record since the first, and the first ones were deleted:
        # the files cannot match, but every (key hash, offset) entry of a surviving record must.
        min_offset = Store(real, conf).commitlog.min_offset
        assert _entries(real_files, conf, min_offset) == _entries(ours, conf, min_offset)
        return
    assert len(ours) == len(real_files)
    for mine, theirs in zip(ours, real_files, strict=True):
        assert _index_content(mine, conf) == _index_content(theirs, conf), theirs.name


def _entries(paths: list[Path], conf: StoreSettings, min_offset: int) -> list[tuple[int, int]]:
    from rmqcli.store.read.index import IndexFile

    found = []
    for path in paths:
        f = IndexFile(path, conf.max_hash_slot_num, conf.max_index_num)
        found += [(e.key_hash, e.phy_offset) for e in f.entries() if e.phy_offset >= min_offset]
        f.close()
    return sorted(found)


def _redispatch_index(root: Path, conf: StoreSettings) -> None:
    from rmqcli.store.write.index import IndexWriter

    store = Store(root, conf)
    index = IndexWriter(
        root / "index", conf.max_hash_slot_num, conf.max_index_num, lambda ts: "29990101000000000"
    )
    index.load()
    for rec in store.commitlog.records():
        props = rec.properties
        index.build_index(
            rec.topic, rec.physical_offset, rec.store_timestamp, rec.sys_flag,
            props.get(fmt.PROPERTY_UNIQ_KEY), props.get(fmt.PROPERTY_KEYS),
        )  # fmt: skip
    index.close()
    store.close()


def test_replay_checkpoint(replayed):
    name, real, out, conf = replayed
    ours = Store(out, conf).checkpoint()
    theirs = Store(real, conf).checkpoint()
    if name.startswith("crash-1"):
        # Written by a broker that recovered after a kill -9: physicMsgTimestamp was never flushed
        # (ASYNC_FLUSH) and logicsMsgTimestamp is the store time of the last re-dispatched unit.
        assert ours.index_msg_timestamp == theirs.index_msg_timestamp
        return
    if name.startswith("expired"):
        # indexMsgTimestamp comes from index files filled partly by the deleted records.
        assert (ours.physic_msg_timestamp, ours.logics_msg_timestamp) == (
            theirs.physic_msg_timestamp,
            theirs.logics_msg_timestamp,
        )
        return
    assert ours == theirs


def test_replay_reads_back_like_the_real_store(replayed):
    name, real, out, conf = replayed
    a, b = Store(real, conf), Store(out, conf)
    for x, y in zip(a.commitlog.records(), b.commitlog.records(), strict=True):
        assert (x.position, x.total_size, x.properties_raw) == (y.position, y.total_size, y.properties_raw)
    a.close()
    b.close()


def test_random_messages_read_back(tmp_path):
    rng = random.Random(7)
    sent = []
    with _writer(tmp_path) as w:
        for i in range(200):
            body = rng.randbytes(rng.randint(0, 700))
            props = {"KEYS": f"key{i} shared", "TAGS": rng.choice(["A", "B", "标签"])}
            sent.append((w.append(Message(f"T{i % 3}", rng.randint(0, 3), body, props)), body))
    store = Store(tmp_path, TINY)
    for result, body in sent:
        rec = store.commitlog.read(result.physical_offset)
        assert rec.stored_body == body and rec.queue_offset == result.queue_offset
        unit = store.consume_queue(result.topic, result.queue_id).unit(result.queue_offset)
        assert (unit.commitlog_offset, unit.size) == (result.physical_offset, result.size)
    store.close()


def test_reopened_store_corrects_queue_minimums_past_deleted_commitlog_files(tmp_path):
    """``recoverTopicQueueTable`` -> ``correctMinOffset``: after the first CommitLog files expired, a
    queue starts at its first unit pointing at a record that still exists."""
    settings = dataclasses.replace(TINY, mapped_file_size_consume_queue=2000)  # one CQ file per queue
    with StoreWriter(tmp_path, settings, clock=_clock()) as w:
        for i in range(120):
            w.append(Message("T", i % 3, bytes([65 + i % 26]) * 200, {"TAGS": "a"}))
    first = sorted((tmp_path / "commitlog").iterdir())[:2]
    for path in first:
        path.unlink()  # as the broker's CommitLog clean-up deletes expired files
    store = Store.open(tmp_path)
    low = store.commitlog.min_offset
    expected = {key: store.consume_queue(*key).min_offset(low) for key in store.queue_ids()}
    store.close()
    assert all(m > 0 for m in expected.values())
    with StoreWriter(tmp_path, settings, clock=_clock()) as w:
        got = {key: cq.min_logic_offset // CQ_UNIT_SIZE for key, cq in w.dispatcher.cqs.items()}
    assert got == expected
