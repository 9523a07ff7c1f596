"""Repairs that reach every damage they are for, say which geometry they assumed, and converge.

On copies of stores written by a real 4.9.8 broker (``../shared/fixtures/real``):

- a bad body in a CommitLog file before the one a broker's recovery starts from: ``recover
  --salvage`` tombstones it (a broker serves it as it is), and ``verify`` passes afterwards;
- a truncated index file: ``rebuild --index``, ``recover`` and ``rmq serve``'s start-up recovery
  replace it (backed up) instead of failing;
- a store without consume-queue or index files: the plan says which default sizes it assumes;
- ``truncate`` lists the committed consumer and delay offsets past the new queue ends and clamps
  them with ``--clamp-offsets``; every repair re-run on the store it left exits 0 with nothing to do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from formats import commitlog as fmt
from rmqcli.ops.salvage import SALVAGED_PROPERTY
from rmqcli.store import Store
from rmqcli.store.configfiles import consumer_offsets, delay_offsets
from rmqcli.store.read.commitlog import Record
from tests.support.cli import run_rmq
from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import converges_at_every_crash_point, store_state, writable_copy

BASIC = REAL_ROOT / "basic-1"
CRASH = REAL_ROOT / "crash-1"
pytestmark = pytest.mark.real

DAMAGED_INDEX = "20261122122105405"  # the second of basic-1's four index files
CUT = 4 * 1024 * 1024  # the start of basic-1's last CommitLog file


def _copy(tmp_path: Path, name: str = "store", source: Path | None = None) -> Path:
    root = writable_copy(source or BASIC / "store", tmp_path / name)
    (root / "lock").unlink()  # the broker's (unheld) lock file; a copy needs none
    return root


def _plan(*args: str) -> dict:
    proc = run_rmq(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _nothing_to_do(*args: str) -> None:
    proc = run_rmq(*args)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to do" in proc.stdout, proc.stdout


def _verify_ok(root: Path, *extra: str) -> None:
    proc = run_rmq("verify", str(root), *extra)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _index_keys_found(root: Path) -> None:
    """Every key of the fixture's sample (store.keys.tsv) is found through the index."""
    store = Store.open(root)
    try:
        for line in (BASIC / "store.keys.tsv").read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[0] in ("UNIQ_KEY", "KEYS"):
                assert store.index.query(parts[1], parts[2]), parts
    finally:
        store.close()


# --- (a) a bad body where a broker's recovery never looks ---------------------------------------
def _flip_body_in_second_file(root: Path) -> Record:
    """Flip a byte in the middle of the body of the first record of the 2nd of 5 CommitLog files
    (a broker's normal recovery checks the last three; this store's checkpoint has abnormal
    recovery start at the 3rd)."""
    store = Store.open(root)
    try:
        second = store.commitlog.files[1]
        victim = next(
            r
            for r in store.commitlog.records(second.from_offset)
            if isinstance(r, Record) and r.body_length > 100
        )
    finally:
        store.close()
    body_at = victim.position - second.from_offset + victim.body_offset + victim.body_length // 2
    raw = bytearray(second.path.read_bytes())
    raw[body_at] ^= 0xFF
    second.path.write_bytes(bytes(raw))
    return victim


def test_salvage_reaches_a_bad_body_before_the_recovery_start(tmp_path, rmq_proc):
    root = _copy(tmp_path)
    victim = _flip_body_in_second_file(root)
    assert rmq_proc("verify", str(root)).returncode == 4
    _nothing_to_do("recover", str(root))
    abnormal = _plan("recover", str(root), "--abnormal")  # re-indexes, but never reaches the record
    assert not any(s["path"].startswith("commitlog/") for s in abnormal["steps"])

    plan = _plan("recover", str(root), "--salvage")
    assert [s["action"] for s in plan["steps"]][0] == "salvage"
    assert plan["steps"][0]["path"] == "commitlog/00000000000001048576"
    assert any("checks only from 00000000000002097152" in n for n in plan["notes"])

    applied = rmq_proc("recover", str(root), "--salvage", "--yes")
    assert applied.returncode == 0, applied.stderr
    _verify_ok(root)
    store = Store.open(root)
    try:
        tombstone = next(iter(store.commitlog.records(victim.position)))
        assert isinstance(tombstone, Record) and tombstone.total_size == victim.total_size
        assert tombstone.properties[SALVAGED_PROPERTY] == "body CRC mismatch"
        assert (tombstone.topic, tombstone.queue_id, tombstone.queue_offset) == (
            victim.topic,
            victim.queue_id,
            victim.queue_offset,
        )
    finally:
        store.close()
    _index_keys_found(root)  # the index is rebuilt from the first file on, not from the fill
    _nothing_to_do("recover", str(root), "--salvage")
    _nothing_to_do("rebuild", str(root))  # queues and index are as a rebuild makes them


# --- (b) a truncated index file ------------------------------------------------------------------
def _truncate_index(root: Path) -> bytes:
    path = root / "index" / DAMAGED_INDEX
    with open(path, "r+b") as handle:
        handle.truncate(20000)
    return path.read_bytes()


@pytest.mark.parametrize("config", [False, True], ids=["files", "config"])
def test_rebuild_index_replaces_a_truncated_index_file(config, tmp_path, rmq_proc):
    root = _copy(tmp_path)
    damaged = _truncate_index(root)
    conf = ["--config", str(BASIC / "broker.conf")] if config else []
    plan = _plan("rebuild", "--index", str(root), *conf)
    assert any(f"index file {DAMAGED_INDEX} is 20000 bytes, not the 42040" in n for n in plan["notes"])
    proc = rmq_proc("rebuild", "--index", str(root), "--yes", *conf)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.stat().st_size for p in (root / "index").iterdir()) == [42040] * 4
    _verify_ok(root, *conf)
    _index_keys_found(root)
    kept = list((root / ".rmq-backup").glob(f"*/*.dir/{DAMAGED_INDEX}"))
    assert [p.read_bytes() for p in kept] == [damaged]  # the damaged file is in the backup
    _nothing_to_do("rebuild", "--index", str(root), *conf)


def test_recover_replaces_a_truncated_index_file(tmp_path, rmq_proc):
    root = _copy(tmp_path)
    _truncate_index(root)
    plan = _plan("recover", str(root))
    assert [s["action"] for s in plan["steps"]] == ["replace-dir"]
    assert any("rebuilt from CommitLog offset 1823927" in n for n in plan["notes"])
    proc = rmq_proc("recover", str(root), "--yes")
    assert proc.returncode == 0, proc.stderr
    _verify_ok(root)
    _index_keys_found(root)
    assert sorted(p.stat().st_size for p in (root / "index").iterdir()) == [42040] * 4
    _nothing_to_do("recover", str(root))
    truncated = rmq_proc("rebuild", "--index", str(root), "--from", "2000000")  # --from keeps what is sound
    assert truncated.returncode == 0, truncated.stderr


def test_rebuild_from_an_offset_reindexes_from_a_damaged_file(tmp_path, rmq_proc):
    root = _copy(tmp_path)
    _truncate_index(root)
    proc = rmq_proc("rebuild", "--index", str(root), "--from", str(CUT), "--yes")
    assert proc.returncode == 0, proc.stderr
    _verify_ok(root)
    _index_keys_found(root)


def test_serve_starts_on_a_store_with_a_truncated_index_file(tmp_path):
    from tests.support.serve import ServeProcess

    root = _copy(tmp_path)
    _truncate_index(root)
    server = ServeProcess(root)
    try:
        server.start(timeout=60)
        assert "recovered the store" in server.output()
        assert server.stop() == 0
    finally:
        server.kill()
    _verify_ok(root)
    _index_keys_found(root)


# --- (c) the geometry a repair assumes -----------------------------------------------------------
def test_recover_says_which_default_geometry_it_assumes(tmp_path, rmq_proc):
    root = _copy(tmp_path, source=CRASH / "store-raw")
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    notes = " ".join(_plan("recover", str(root))["notes"])
    assert "consume-queue files of 6000000 bytes assumed" in notes
    assert "index files of 5000000 slots and 20000000 entries" in notes
    assert "the CommitLog files are 1048576 bytes, not the default" in notes

    with_conf = _plan("recover", str(root), "--config", str(CRASH / "broker.conf"))
    assert not any("assumed" in n for n in with_conf["notes"])
    proc = rmq_proc("recover", str(root), "--config", str(CRASH / "broker.conf"), "--yes")
    assert proc.returncode == 0, proc.stderr
    assert {p.stat().st_size for p in (root / "consumequeue").rglob("0000*")} == {6000}
    assert {p.stat().st_size for p in (root / "index").iterdir()} == {42040}
    # the sizes are now read off the files: nothing assumed, nothing left to do
    again = _plan("recover", str(root))
    assert again["steps"] == [] and not any("assumed" in n for n in again["notes"])


# --- (d) truncate: committed offsets past the new ends, and re-runs ------------------------------
def test_truncate_lists_and_clamps_committed_offsets(tmp_path, rmq_proc):
    root = _copy(tmp_path)
    before_offsets = (root / "config" / "consumerOffset.json").read_bytes()
    plan = _plan("truncate", str(root), "--offset", str(CUT))
    notes = plan["notes"]
    assert any("TopicA@GroupA, TopicA queue 0: offset 351 lies past the queue's end 253" in n for n in notes)
    assert any(
        "delay level 3, SCHEDULE_TOPIC_XXXX queue 2: offset 30 lies past the queue's end 0" in n
        for n in notes
    )
    assert any("--clamp-offsets" in n for n in notes)
    assert not any(s["path"].startswith("config/") for s in plan["steps"])

    proc = rmq_proc("truncate", str(root), "--offset", str(CUT), "--clamp-offsets", "--yes")
    assert proc.returncode == 0, proc.stderr
    offsets = consumer_offsets(root / "config")
    store = Store.open(root)
    try:
        for (topic, _group), queues in offsets.items():
            for queue_id, offset in queues.items():
                assert offset <= store.consume_queue(topic, queue_id).max_offset, (topic, queue_id)
        assert offsets[("TopicA", "GroupA")] == {0: 253, 1: 271, 2: 282, 3: 293}
        assert offsets[("TopicB", "GroupB")] == {0: 81, 1: 67, 2: 61, 3: 75, 4: 54, 5: 69, 6: 70, 7: 70}
    finally:
        store.close()
    assert delay_offsets(root / "config") == {1: 0, 2: 0, 3: 0}
    _verify_ok(root)

    rerun = rmq_proc("truncate", str(root), "--offset", str(CUT), "--clamp-offsets", "--yes")
    assert rerun.returncode == 0, rerun.stderr
    assert "already cut: no record starts at or after --offset 4194304" in rerun.stdout
    assert "nothing to do" in rerun.stdout

    (backup,) = [p.name for p in (root / ".rmq-backup").iterdir() if not p.name.startswith(".")]
    undo = rmq_proc("restore-backup", str(root), backup, "--yes")
    assert undo.returncode == 0, undo.stderr
    assert (root / "config" / "consumerOffset.json").read_bytes() == before_offsets


def test_truncate_rerun_clamps_what_an_earlier_run_left(tmp_path, rmq_proc):
    root = _copy(tmp_path)
    assert rmq_proc("truncate", str(root), "--time", "1795350066917", "--yes").returncode == 0
    rerun = _plan("truncate", str(root), "--time", "1795350066917")  # converged: exit 0, no step
    assert rerun["steps"] == [] and any("already cut" in n for n in rerun["notes"])
    assert any("offset 351 lies past" in n for n in rerun["notes"])
    clamp = _plan("truncate", str(root), "--time", "1795350066917", "--clamp-offsets")
    assert {s["path"] for s in clamp["steps"]} == {"config/consumerOffset.json", "config/delayOffset.json"}


def test_truncate_with_clamp_killed_at_every_crash_point_converges(tmp_path):
    source = _copy(tmp_path, "source")
    command = ["truncate", "--offset", str(CUT), "--clamp-offsets"]
    points, _ = converges_at_every_crash_point(command, source, tmp_path)
    assert points >= 10, points


@pytest.mark.parametrize(
    "command",
    [["recover", "--abnormal"], ["rebuild"], ["rebuild", "--cq"], ["truncate", "--offset", str(CUT)]],
    ids=["recover", "rebuild", "rebuild-cq", "truncate"],
)
def test_a_repair_rerun_on_its_result_has_nothing_to_do(command, tmp_path, rmq_proc):
    root = _copy(tmp_path, source=CRASH / "store-raw")
    first = rmq_proc(command[0], str(root), *command[1:], "--yes")
    assert first.returncode == 0, first.stderr
    before = store_state(root)
    _nothing_to_do(command[0], str(root), *command[1:], "--yes")
    assert store_state(root) == before


def test_tombstone_record_is_a_valid_record(tmp_path, rmq_proc):
    """The salvaged store is one a reader takes record by record, CRCs included."""
    root = _copy(tmp_path)
    _flip_body_in_second_file(root)
    assert rmq_proc("recover", str(root), "--salvage", "--yes").returncode == 0
    store = Store.open(root)
    try:
        records = [r for r in store.commitlog.records() if isinstance(r, Record)]
        assert all(fmt.body_crc(r.stored_body) == r.body_crc for r in records if r.body_length)
    finally:
        store.close()


def test_salvage_in_the_first_index_files_range_reindexes_from_offset_0(tmp_path, rmq_proc):
    """A fill inside the first index file (which begins at CommitLog offset 0): that file is rebuilt
    from offset 0, so the records before the fill keep their index entries."""
    root = _copy(tmp_path, source=CRASH / "store-raw")
    victim = _flip_body_in_second_file(root)
    assert victim.position < 1696668  # inside the first index file, in a file normal recovery walks
    proc = rmq_proc("recover", str(root), "--normal", "--salvage", "--yes")
    assert proc.returncode == 0, proc.stderr
    store = Store.open(root)
    try:
        for line in (CRASH / "store-raw.keys.tsv").read_text(encoding="utf-8").splitlines():
            kind, topic, key = line.split("\t")
            if kind in ("UNIQ_KEY", "KEYS"):
                assert store.index.query(topic, key), (kind, topic, key)
    finally:
        store.close()


def test_truncate_at_the_first_record_empties_the_queues_and_index(tmp_path, rmq_proc):
    """A cut before every record leaves no unit and no index entry: empty directories are swapped in."""
    root = _copy(tmp_path, source=REAL_ROOT / "expired" / "store")
    proc = rmq_proc("truncate", str(root), "--offset", "0", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert not [p for p in (root / "consumequeue").rglob("*") if p.is_file()]
    assert not list((root / "index").iterdir())
    _verify_ok(root)
    _nothing_to_do("truncate", str(root), "--offset", "0", "--yes")
