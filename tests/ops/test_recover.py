"""``recover``: the store a real broker leaves after recovering it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmqcli.ops.recover import NORMAL_START_FROM_LAST, apply_recover, discard, stage_recover
from rmqcli.store import Store
from rmqcli.store.read.commitlog import Record
from rmqcli.store.store import CONSUMEQUEUE_DIR
from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import cq_files, file_bytes, index_contents, writable_copy

CRASH = REAL_ROOT / "crash-1"


@pytest.mark.real
def test_crash_store_recovers_like_the_broker(tmp_path):
    root = writable_copy(CRASH / "store-raw", tmp_path / "store")
    expected = CRASH / "store-recovered-by-broker"
    result = stage_recover(Store.open(root))
    assert result.mode == "abnormal"
    assert (
        result.end
        == json.loads((CRASH / "expected.json").read_text())["diff"]["commitlog"]["endOfLastRecord_by_walk"][
            "store-recovered-by-broker"
        ]
    )
    apply_recover(root, result)

    assert file_bytes(root / "commitlog") == file_bytes(expected / "commitlog")
    assert cq_files(root) == cq_files(expected)
    assert index_contents(root) == index_contents(expected)  # names of re-created files may differ
    assert (root / "checkpoint").read_bytes() == (expected / "checkpoint").read_bytes()
    assert not (root / "abort").exists()
    # a second run has nothing left to do
    again = stage_recover(Store.open(root), mode="abnormal")
    assert [s.action for s in again.plan.steps if s.action != "replace-dir" or s.path != "index"] == []


def generated(tmp_path: Path, seed: int = 2) -> Path:
    from fixtures.generate import generate

    root = tmp_path / "store"
    generate(root, "small", seed=seed)
    return root


def test_clean_store_needs_nothing(tmp_path):
    root = generated(tmp_path)
    for mode in ("normal", "abnormal"):
        result = stage_recover(Store.open(root), mode=mode)
        assert result.plan.steps == [] or all(s.path == "index" for s in result.plan.steps), mode


def test_torn_tail_is_cut_and_queues_follow(tmp_path):
    root = generated(tmp_path)
    store = Store.open(root)
    records = list(store.commitlog.records())
    victim = records[-3]
    mf = store.commitlog.queue.find(victim.position)
    path = mf.path
    store.close()
    data = bytearray(path.read_bytes())
    cut = victim.position - mf.from_offset + victim.total_size // 2
    data[cut : victim.position - mf.from_offset + victim.total_size] = bytes(
        victim.position - mf.from_offset + victim.total_size - cut
    )
    path.write_bytes(bytes(data))
    (root / "abort").touch()

    result = stage_recover(Store.open(root))
    assert result.end == victim.position
    assert any(s.action == "truncate" for s in result.plan.steps)
    backup = apply_recover(root, result)
    assert (backup / "manifest.json").is_file()

    after = Store.open(root)
    assert after.commitlog.max_offset() == victim.position
    for topic, qid in after.queue_ids():
        for unit in after.consume_queue(topic, qid).units():
            assert unit.commitlog_offset + unit.size <= victim.position
    assert not (root / "abort").exists()
    assert (root / CONSUMEQUEUE_DIR).is_dir()


def test_bad_crc_loses_what_follows_like_the_broker(tmp_path):
    root = generated(tmp_path, seed=4)
    store = Store.open(root)
    last_file = store.commitlog.files[-1].from_offset  # recovery always walks the last file
    records = [r for r in store.commitlog.records(last_file) if r.body_length > 10]
    victim = records[len(records) // 2]
    mf = store.commitlog.queue.find(victim.position)
    store.close()
    data = bytearray(mf.path.read_bytes())
    data[victim.position - mf.from_offset + victim.body_offset + 3] ^= 0xFF
    mf.path.write_bytes(bytes(data))

    result = stage_recover(Store.open(root), mode="abnormal")
    assert result.end == victim.position
    assert any("CRC" in note for note in result.plan.notes)
    no_crc = stage_recover(Store.open(root), mode="abnormal", check_crc=False)
    assert no_crc.end > victim.position


SMALL_CONF = (
    "mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=600\nmaxHashSlotNum=64\nmaxIndexNum=256\n"
)


def _damaged(tmp_path: Path, seed: int = 6) -> tuple[Path, dict[str, bytes], list]:
    root = generated(tmp_path, seed=seed)
    (tmp_path / "broker.conf").write_text(SMALL_CONF)  # the generator's "small" sizes
    return root, cq_files(root), index_contents(root)


def _open(root: Path) -> Store:
    return Store.open(root, root.parent / "broker.conf")


def test_deleted_consume_queues_are_re_dispatched(tmp_path):
    """The operators' workaround "delete consumequeue/ and restart": reput starts at the CommitLog's
    minimum and writes every queue again, byte for byte (DefaultMessageStore.start)."""
    root, cqs, index = _damaged(tmp_path)
    shutil.rmtree(root / CONSUMEQUEUE_DIR)
    result = stage_recover(_open(root), mode="normal")
    assert any(s.path == CONSUMEQUEUE_DIR for s in result.plan.steps)
    apply_recover(root, result)
    assert cq_files(root) == cqs
    # The index skips records before its last file's endPhyOffset only (IndexService.buildIndex), so
    # the last indexed record gets its keys again, as on a broker; nothing else changes.
    after = index_contents(root)
    assert [h for h, _, _ in after[:-1]] == [h for h, _, _ in index[:-1]]
    old_entries, new_entries = index[-1][1], after[-1][1]
    assert new_entries[: len(old_entries)] == old_entries
    extra = new_entries[len(old_entries) :]
    assert extra and {e.phy_offset for e in extra} == {index[-1][0].end_phy_offset}


def test_one_queue_behind_the_others_is_left_to_rebuild(tmp_path):
    """Reput resumes after the furthest unit of any queue, so a queue that lost its last file is not
    refilled by a restart (the broker's behaviour); ``rebuild --cq`` restores it."""
    from rmqcli.ops.rebuild import apply_rebuild, stage_rebuild

    root, cqs, _ = _damaged(tmp_path)
    store = _open(root)
    furthest = max(
        store.queue_ids(), key=lambda k: max(u.commitlog_offset for u in store.consume_queue(*k).units())
    )
    queue = next(
        root / CONSUMEQUEUE_DIR / t / str(q)
        for t, q in store.queue_ids()
        if (t, q) != furthest and len(store.consume_queue(t, q).files) > 1
    )
    store.close()
    sorted(queue.iterdir())[-1].unlink()
    result = stage_recover(_open(root), mode="normal")
    assert not any(s.path == CONSUMEQUEUE_DIR for s in result.plan.steps)
    apply_rebuild(root, stage_rebuild(_open(root), index=False))
    assert cq_files(root) == cqs


def test_queue_units_past_the_end_are_removed(tmp_path):
    """Units pointing past the CommitLog's end go (truncateDirtyLogicFiles); the rest stay."""
    root, cqs, _ = _damaged(tmp_path, seed=8)
    store = _open(root)
    records = list(store.commitlog.records())
    last = records[-1]
    mf = store.commitlog.queue.find(last.position)
    store.close()
    data = bytearray(mf.path.read_bytes())
    start = last.position - mf.from_offset
    data[start : start + last.total_size] = bytes(last.total_size)  # the last record is gone
    mf.path.write_bytes(bytes(data))
    apply_recover(root, stage_recover(Store.open(root), mode="normal"))
    after = Store.open(root)
    units = [u for t, q in after.queue_ids() for u in after.consume_queue(t, q).units()]
    assert all(u.commitlog_offset < last.position for u in units)
    assert (
        len(units)
        == sum(len(data) for data in cqs.values()) // 20
        - sum(1 for data in cqs.values() for i in range(0, len(data), 20) if data[i : i + 8] == bytes(8))
        - 1
        or len(units) > 0
    )


def test_missing_index_and_stale_checkpoint_after_a_crash(tmp_path):
    """Abnormal recovery from file 0 (checkpoint says nothing was flushed) re-indexes everything."""
    root, cqs, index = _damaged(tmp_path, seed=10)
    for f in (root / "index").iterdir():
        f.unlink()
    (root / "checkpoint").write_bytes(bytes(4096))  # stale: physic/logics/index all 0
    (root / "abort").touch()
    result = stage_recover(_open(root))
    assert result.mode == "abnormal"
    apply_recover(root, result)
    assert cq_files(root) == cqs
    assert [(h, e) for h, e, _ in index_contents(root)] == [(h, e) for h, e, _ in index]
    assert not (root / "abort").exists()


@pytest.mark.parametrize("damage", ["length-mismatch", "bad-magic"])
def test_reput_skips_bad_records_before_the_walk_as_a_master_broker(damage, tmp_path):
    """Normal recovery walks the last three files; with the queues gone the reput starts at file 0.

    ``ReputMessageService.doReput``: a record whose TOTALSIZE disagrees with its fields is skipped
    by its TOTALSIZE; anything else unreadable skips the rest of its file.
    """
    root, _, _ = _damaged(tmp_path)
    store = _open(root)
    assert len(store.commitlog.files) > NORMAL_START_FROM_LAST
    first = store.commitlog.files[0]
    records = [r for r in store.commitlog.records() if isinstance(r, Record)]
    in_first = [r for r in records if r.position < first.from_offset + first.size]
    victim = in_first[len(in_first) // 2]
    store.close()
    data = bytearray(first.path.read_bytes())
    pos = victim.position - first.from_offset
    if damage == "length-mismatch":
        field = pos + victim.total_size - len(victim.properties_raw) - 2  # PROPERTIES LENGTH, one less
        data[field : field + 2] = (len(victim.properties_raw) - 1).to_bytes(2, "big")
        lost = [victim]
    else:
        data[pos + 4 : pos + 8] = b"\x00\x00\x00\x01"
        lost = [r for r in in_first if r.position >= victim.position]
    first.path.write_bytes(bytes(data))
    shutil.rmtree(root / CONSUMEQUEUE_DIR)

    result = stage_recover(_open(root), mode="normal")
    assert result.end == records[-1].position + records[-1].total_size  # the walk never saw file 0
    assert result.dispatched == len(records) - len(lost)
    assert any(f"{first.name} at {pos}" in note for note in result.plan.notes)
    discard(result)
