"""Recovery in bulk (``rmqcli.ops.recover_bulk``) gives the record-by-record recovery's store, byte for
byte: the staged consume queues and index files, the end, the plan and its notes, the checkpoint."""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path

import pytest

from rmqcli.ops.recover import NORMAL_START_FROM_LAST, discard, stage_recover
from rmqcli.store import Store
from rmqcli.store.sparse import same_tree
from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import writable_copy, zero_checkpoint_timestamps

SMALL_CONF = (
    "mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=600\nmaxHashSlotNum=64\nmaxIndexNum=256\n"
)
FELL_BACK = "recovery goes record by record"


def generated(tmp_path: Path, seed: int) -> Path:
    from fixtures.generate import generate

    root = tmp_path / "store"
    generate(root, "small", seed=seed)
    (tmp_path / "broker.conf").write_text(SMALL_CONF)
    return root


def both_ways(root: Path, tmp_path: Path, caplog, **kwargs) -> tuple[dict, bool]:
    """Stage the recovery in bulk and record by record; assert they agree. Returns the plan and
    whether the bulk path went all the way (no fall-back)."""
    conf = root.parent / "broker.conf"
    results = []
    for bulk in (True, False):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="rmqcli.ops.recover"):
            store = Store.open(root, conf if conf.exists() else None)
            result = stage_recover(store, bulk=bulk, **kwargs)
            store.close()
        copy = tmp_path / f"staged-{bulk}"
        shutil.copytree(result.staged, copy)
        results.append((result.to_dict(), result.checkpoint, copy, FELL_BACK not in caplog.text))
        discard(result)
    (bulk_plan, bulk_cp, bulk_dir, went_bulk), (each_plan, each_cp, each_dir, _) = results
    assert bulk_plan == each_plan
    assert bulk_cp == each_cp
    assert same_tree(bulk_dir, each_dir)
    return bulk_plan, went_bulk


def commitlog_files(root: Path) -> list[Path]:
    return sorted((root / "commitlog").iterdir())


def crash(root: Path, zero_checkpoint: bool = True) -> None:
    (root / "abort").touch()
    if zero_checkpoint:
        zero_checkpoint_timestamps(root)


@pytest.mark.parametrize("seed", range(8))
def test_bytes_damaged_after_a_crash(seed, tmp_path, caplog):
    """A crashed store (abort, checkpoint zeroed: the walk checks every file) with a few bytes of
    one CommitLog file overwritten: in a body (bad CRC), a header, a topic, a length."""
    rng = random.Random(seed)
    root = generated(tmp_path, seed=seed)
    crash(root)
    files = commitlog_files(root)
    victim = files[rng.randrange(len(files))]
    data = bytearray(victim.read_bytes())
    used = len(data.rstrip(b"\0")) or 1
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(used)
        data[at : at + 4] = rng.randbytes(4)
    victim.write_bytes(bytes(data))
    both_ways(root, tmp_path, caplog)


@pytest.mark.parametrize("mode", ["normal", "abnormal"])
@pytest.mark.parametrize("cut", [300, 1000, 5000])
def test_torn_tail(mode, cut, tmp_path, caplog):
    """The last bytes written are lost (zeroed), as after a power cut."""
    root = generated(tmp_path, seed=3)
    store = Store.open(root, root.parent / "broker.conf")
    written = store.commitlog.max_offset()
    store.close()
    crash(root, zero_checkpoint=False)
    last = commitlog_files(root)[-1]
    data = bytearray(last.read_bytes())
    end = len(data.rstrip(b"\0"))
    data[end - cut : end] = bytes(cut)
    last.write_bytes(bytes(data))
    plan, went_bulk = both_ways(root, tmp_path, caplog, mode=mode)
    assert went_bulk
    assert plan["end"] < written


def test_zeroed_checkpoint_and_no_index(tmp_path, caplog):
    """Everything re-indexed from file 0, in bulk."""
    root = generated(tmp_path, seed=10)
    shutil.rmtree(root / "index")
    crash(root)
    plan, went_bulk = both_ways(root, tmp_path, caplog)
    assert went_bulk and plan["dispatched"] > 0


def test_queue_files_lost(tmp_path, caplog):
    """Some consume-queue files are gone: the walk writes their units again."""
    root = generated(tmp_path, seed=4)
    crash(root)
    queues = sorted(p for p in (root / "consumequeue").glob("*/*") if p.is_dir())
    for q in queues[::3]:
        sorted(q.iterdir())[-1].unlink()
    plan, went_bulk = both_ways(root, tmp_path, caplog)
    assert went_bulk and any(s["path"] == "consumequeue" for s in plan["plan"]["steps"])


def test_queues_deleted_normal_recovery_falls_back(tmp_path, caplog):
    """The reput starts before the files the normal walk checked: record by record, same result."""
    root = generated(tmp_path, seed=6)
    assert len(commitlog_files(root)) > NORMAL_START_FROM_LAST
    shutil.rmtree(root / "consumequeue")
    plan, went_bulk = both_ways(root, tmp_path, caplog, mode="normal")
    assert not went_bulk and plan["dispatched"] > 0


@pytest.mark.real
def test_real_broker_crash_store(tmp_path, caplog):
    root = writable_copy(REAL_ROOT / "crash-1" / "store-raw", tmp_path / "store")
    plan, went_bulk = both_ways(root, tmp_path, caplog)
    assert went_bulk and plan["mode"] == "abnormal"
