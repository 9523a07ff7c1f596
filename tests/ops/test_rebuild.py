"""``rebuild``: consume queues and index files regenerated from the CommitLog, as the broker's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmqcli.errors import UsageError
from rmqcli.ops.rebuild import apply_rebuild, discard, stage_rebuild
from rmqcli.store import Store
from rmqcli.store.store import CONSUMEQUEUE_DIR, INDEX_DIR
from tests.support.realfixtures import Variant, variant_params
from tests.support.stores import cq_files, index_contents, writable_copy


def index_written_by_dispatch(variant: Variant) -> Path:
    """The store whose index files a rebuild of ``variant`` must equal: its own, unless the broker's
    abnormal recovery rewrote them. expected.json's ``diff`` says so: ``variant`` is the recovered
    one (``to``), both hold the same records, and an index file is the recovered one's only (the
    last, deleted by IndexService.load(lastExitOK=false) and rebuilt under a new name, the message
    that straddled the full file before it indexed again: the recover tests cover that). The
    rebuild then equals the index of ``from``, which the broker wrote by its ordinary dispatch of
    those same records."""
    expected = json.loads((variant.scenario / "expected.json").read_text(encoding="utf-8"))
    diff = expected.get("diff")
    if diff is None or diff["to"] != variant.name:
        return variant.store
    source = diff["from"]
    rewritten = [name for name, counts in diff["index"]["files"].items() if counts[source] is None]
    if not rewritten:
        return variant.store
    assert diff["records"][f"only_in_{source}"] == diff["records"][f"only_in_{variant.name}"] == 0
    return variant.scenario / expected["variants"][source]["store_dir"]


@pytest.mark.parametrize("variant", variant_params())
def test_staged_rebuild_equals_the_brokers_files(variant, tmp_path):
    root = writable_copy(variant.store, tmp_path / "store")
    store = Store.open(root)
    result = stage_rebuild(store)
    staged_cqs = cq_files(result.staged)
    if variant.id.startswith("expired"):
        # The broker's first CQ files still hold units of deleted records; the rebuild holds
        # fillers there (fillPreBlank). Every unit of a surviving record is identical.
        assert set(cq_files(root)) <= set(staged_cqs)
        rebuilt = Store(result.staged)  # a staging directory: no CommitLog
        for (topic, qid), real in ((k, store.consume_queue(*k)) for k in store.queue_ids()):
            lo = real.min_offset(store.commitlog.min_offset)
            mine = list(rebuilt.consume_queue(topic, qid).units(lo))
            assert mine == list(real.units(lo)), (topic, qid)
    else:
        assert staged_cqs == cq_files(root)
        assert index_contents(result.staged) == index_contents(index_written_by_dispatch(variant))
    assert result.records == variant.facts["commitlog"]["recordCount"]
    discard(result)
    assert not result.staged.exists()


def test_apply_rebuild_of_a_damaged_generated_store(tmp_path):
    from fixtures.generate import generate

    root = tmp_path / "store"
    generate(root, "small", seed=3)
    original_cqs = cq_files(root)
    original_index = index_contents(root)
    # damage: remove one queue, zero another's file, delete the index
    queues = sorted((root / CONSUMEQUEUE_DIR).glob("*/*"))
    shutil.rmtree(queues[0])
    victim = next(p for p in queues[1].iterdir())
    victim.write_bytes(bytes(victim.stat().st_size))
    shutil.rmtree(root / INDEX_DIR)

    # Without index files the geometry comes from broker.conf, as for a broker.
    conf = tmp_path / "broker.conf"
    conf.write_text("maxHashSlotNum=64\nmaxIndexNum=256\nmappedFileSizeConsumeQueue=600\n")
    store = Store.open(root, conf)
    result = stage_rebuild(store)
    assert [s.action for s in result.plan.steps][:2] == ["replace-dir", "replace-dir"]
    backup = apply_rebuild(root, result)
    assert backup.is_dir()
    assert cq_files(root) == original_cqs
    assert index_contents(root) == original_index
    assert not result.staged.exists()
    again = stage_rebuild(Store.open(root, conf))
    assert again.plan.steps == []  # a rebuild of an intact store changes nothing
    discard(again)


def test_from_offset_and_topic(tmp_path):
    from fixtures.generate import generate

    root = tmp_path / "store"
    generate(root, "small", seed=5)
    original_cqs = cq_files(root)
    original_index = index_contents(root)
    store = Store.open(root)
    middle = store.commitlog.files[len(store.commitlog.files) // 2].from_offset + 100
    result = stage_rebuild(store, from_offset=middle)
    apply_rebuild(root, result)
    assert cq_files(root) == original_cqs
    assert index_contents(root) == original_index

    topic = sorted(p.name for p in (root / CONSUMEQUEUE_DIR).iterdir())[0]
    shutil.rmtree(root / CONSUMEQUEUE_DIR / topic)
    store = Store.open(root)
    result = stage_rebuild(store, index=False, topic=topic)
    assert [s.path for s in result.plan.steps][:1] == [f"{CONSUMEQUEUE_DIR}/{topic}"]
    apply_rebuild(root, result)
    assert cq_files(root) == original_cqs


def test_topic_with_index_is_a_usage_error(tmp_path):
    from fixtures.generate import generate

    generate(tmp_path / "s", "small", seed=1)
    with pytest.raises(UsageError):
        stage_rebuild(Store.open(tmp_path / "s"), topic="TopicA")


def test_a_record_whose_size_disagrees_with_its_fields_is_skipped_as_by_the_reput(tmp_path):
    """The bulk path gives up on such a CommitLog; the record-by-record path skips the record."""
    from fixtures.generate import generate
    from rmqcli.store.read.commitlog import Record

    root = tmp_path / "store"
    generate(root, "small", seed=8)
    (tmp_path / "broker.conf").write_text(
        "mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=600\nmaxHashSlotNum=64\nmaxIndexNum=256\n"
    )
    store = Store.open(root, tmp_path / "broker.conf")
    records = [r for r in store.commitlog.records() if isinstance(r, Record)]
    victim = next(r for r in records[len(records) // 2 :] if r.body_length > 10)
    mf = store.commitlog.queue.find(victim.position)
    store.close()
    data = bytearray(mf.path.read_bytes())
    field = victim.position - mf.from_offset + victim.total_size - len(victim.properties_raw) - 2
    data[field : field + 2] = (len(victim.properties_raw) - 1).to_bytes(2, "big")  # PROPERTIES LENGTH
    mf.path.write_bytes(bytes(data))

    result = stage_rebuild(Store.open(root, tmp_path / "broker.conf"))
    assert result.records == len(records) - 1
    assert any(f"at {victim.position - mf.from_offset}" in note for note in result.plan.notes)
    staged = result.staged
    assert not any(
        int.from_bytes(unit[:8], "big") == victim.position
        for path in (staged / CONSUMEQUEUE_DIR).rglob("*")
        if path.is_file()
        for unit in (path.read_bytes()[i : i + 20] for i in range(0, path.stat().st_size, 20))
    )
    discard(result)
