"""``recover``: the store a real broker leaves after recovering it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqcli.ops.recover import apply_recover, stage_recover
from rmqcli.store import Store
from rmqcli.store.store import CONSUMEQUEUE_DIR
from tests.realfixtures import REAL_ROOT
from tests.test_rebuild import cq_files, index_contents, writable_copy

CRASH = REAL_ROOT / "crash-1"


def tree(root: Path, sub: str) -> dict[str, bytes]:
    base = root / sub
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


@pytest.mark.skipif(not CRASH.is_dir(), reason="../shared/fixtures/real is absent")
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

    assert tree(root, "commitlog") == tree(expected, "commitlog")
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
