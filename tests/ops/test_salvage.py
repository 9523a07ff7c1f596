"""``rmq recover --salvage``: bad records become tombstones, the valid records after them stay."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from formats import commitlog as fmt
from formats.consumequeue import CQ_UNIT_STRUCT
from rmqcli.ops.rebuild import discard, stage_rebuild
from rmqcli.ops.recover import apply_recover, stage_recover, start_file_index
from rmqcli.ops.safety import restore_backup
from rmqcli.ops.salvage import GAP_TOPIC, SALVAGED_PROPERTY
from rmqcli.ops.verify import verify_store
from rmqcli.store import Store
from rmqcli.store.read.commitlog import Record
from tests.support.stores import converges_at_every_crash_point, cq_files, store_state

SMALL_CONF = (
    "mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=600\nmaxHashSlotNum=64\nmaxIndexNum=256\n"
)


def _store(tmp_path: Path, seed: int = 4) -> Path:
    from fixtures.generate import generate

    root = tmp_path / "store"
    generate(root, "small", seed=seed)
    (tmp_path / "broker.conf").write_text(SMALL_CONF)
    return root


def _open(root: Path) -> Store:
    return Store.open(root, root.parent / "broker.conf")


def _records(root: Path) -> list[Record]:
    store = _open(root)
    try:
        return [r for r in store.commitlog.records() if isinstance(r, Record)]
    finally:
        store.close()


def _recovery_start(root: Path, *, abnormal: bool = True) -> tuple[int, int]:
    """The CommitLog file a broker's recovery starts from, and how many files there are."""
    store = _open(root)
    try:
        return start_file_index(store, abnormal=abnormal), len(store.commitlog.files)
    finally:
        store.close()


def _victim(root: Path, file_index: int, *, last_in_file: bool = False) -> tuple[Record, Path, int]:
    """A record with a body in the middle (or at the end) of CommitLog file ``file_index``."""
    store = _open(root)
    mf = store.commitlog.files[file_index]
    inside = [
        r
        for r in store.commitlog.records(mf.from_offset)
        if isinstance(r, Record) and r.position < mf.from_offset + mf.size and r.body_length > 10
    ]
    store.close()
    victim = inside[-1] if last_in_file else inside[len(inside) // 2]
    return victim, mf.path, victim.position - mf.from_offset


def _damage(path: Path, at: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[at : at + len(data)] = data
    path.write_bytes(bytes(raw))


def _unchanged_outside(before: bytes, after: bytes, start: int, end: int) -> bool:
    return len(before) == len(after) and before[:start] == after[:start] and before[end:] == after[end:]


def _report(root: Path):
    store = _open(root)
    try:
        return verify_store(store, crc=True)
    finally:
        store.close()


def test_a_flipped_body_byte_becomes_a_tombstone_and_the_rest_stays(tmp_path):
    root = _store(tmp_path)
    walked, _ = _recovery_start(root)
    original = _records(root)
    victim, path, pos = _victim(root, walked)
    flipped = path.read_bytes()[pos + victim.body_offset + 3] ^ 0xFF
    _damage(path, pos + victim.body_offset + 3, bytes([flipped]))
    damaged = path.read_bytes()
    cq_before = cq_files(root)
    (root / "abort").touch()

    broker_like = stage_recover(_open(root))
    assert broker_like.end == victim.position  # the broker ends the CommitLog at the bad CRC
    discard(broker_like)

    result = stage_recover(_open(root), salvage=True)
    assert result.end == broker_like.previous_end  # nothing is cut
    [fill] = result.to_dict()["salvaged"]
    assert (fill["offset"], fill["length"], fill["reason"]) == (
        victim.position,
        victim.total_size,
        "body CRC mismatch",
    )
    assert [s.action for s in result.plan.steps][0] == "salvage"
    backup = apply_recover(root, result)

    after = path.read_bytes()
    assert _unchanged_outside(damaged, after, pos, pos + victim.total_size)
    records = _records(root)
    assert len(records) == len(original)
    [tomb] = [r for r in records if r.position == victim.position]
    assert (tomb.topic, tomb.queue_id, tomb.queue_offset, tomb.total_size) == (
        victim.topic,
        victim.queue_id,
        victim.queue_offset,
        victim.total_size,
    )
    assert tomb.store_timestamp == victim.store_timestamp
    assert tomb.properties[SALVAGED_PROPERTY] == "body CRC mismatch"
    assert fmt.PROPERTY_TAGS not in tomb.properties
    assert tomb.uniq_key == victim.uniq_key and tomb.keys == victim.keys
    body = after[pos + tomb.body_offset : pos + tomb.body_offset + tomb.body_length]
    assert fmt.body_crc(body) == tomb.body_crc and set(body) == {0x20}

    # the queue keeps its offsets: only the victim's unit changed, to the tombstone's tags code 0
    cq_after = cq_files(root)
    name = f"{victim.topic}/{victim.queue_id}/{_cq_file_of(root, victim)}"
    assert {n for n in cq_after if cq_after[n] != cq_before.get(n)} == {name}
    unit = _unit_at(cq_after[name], victim.position)
    assert unit == (victim.position, victim.total_size, 0)
    assert _unit_at(cq_before[name], victim.position)[:2] == unit[:2]

    # what a rebuild from the salvaged CommitLog gives is what recover left
    rebuilt = stage_rebuild(_open(root), index=False)
    assert rebuilt.plan.steps == []
    discard(rebuilt)
    report = _report(root)
    assert report.errors == 0, report
    again = stage_recover(_open(root), salvage=True)
    assert again.fills == [] and [s.action for s in again.plan.steps] == []
    discard(again)

    restore_backup(root, backup.name, yes=True)
    assert path.read_bytes() == damaged


def _cq_file_of(root: Path, rec: Record) -> str:
    store = _open(root)
    try:
        cq = store.consume_queue(rec.topic, rec.queue_id)
        unit_pos = rec.queue_offset * CQ_UNIT_STRUCT.size
        return next(f.name for f in cq.files if f.from_offset <= unit_pos < f.from_offset + f.size)
    finally:
        store.close()


def _unit_at(data: bytes, offset: int) -> tuple[int, int, int]:
    return next(u for u in CQ_UNIT_STRUCT.iter_unpack(data) if u[0] == offset)


@pytest.mark.parametrize(
    "damage",
    ["size-field", "two-records"],
)
def test_regions_whose_size_is_lost_are_cut_by_the_consume_queue_units(damage, tmp_path):
    root = _store(tmp_path)
    walked, _ = _recovery_start(root)
    original = _records(root)
    victim, path, pos = _victim(root, walked)
    following = next(r for r in original if r.position == victim.position + victim.total_size)
    if damage == "size-field":
        _damage(path, pos, (1 << 20).to_bytes(4, "big"))
        end = victim.position + victim.total_size
    else:  # from the victim's body into the next record's header
        length = victim.total_size - victim.body_offset + 30
        _damage(path, pos + victim.body_offset, b"\xee" * length)
        end = following.position + following.total_size
    damaged = path.read_bytes()
    (root / "abort").touch()

    result = stage_recover(_open(root), salvage=True)
    [fill] = result.fills
    assert (fill.position, fill.position + fill.length) == (victim.position, end)
    apply_recover(root, result)

    start = victim.position - (victim.position - pos)
    assert _unchanged_outside(damaged, path.read_bytes(), pos, end - start)
    records = _records(root)
    assert [(r.position, r.total_size) for r in records] == [(r.position, r.total_size) for r in original]
    replaced = [r for r in records if victim.position <= r.position < end]
    lost = [r for r in original if victim.position <= r.position < end]
    for tomb, rec in zip(replaced, lost, strict=True):
        assert (tomb.topic, tomb.queue_id, tomb.queue_offset) == (rec.topic, rec.queue_id, rec.queue_offset)
        assert SALVAGED_PROPERTY in tomb.properties
    report = _report(root)
    assert report.errors == 0, report


def test_garbage_to_the_end_of_a_file_ends_it_with_a_blank(tmp_path):
    """Normal recovery walks the last three files; the damage runs to the end of the first of them."""
    root = _store(tmp_path)
    walked, files = _recovery_start(root, abnormal=False)
    assert files - walked >= 2
    original = _records(root)
    victim, path, pos = _victim(root, walked, last_in_file=True)
    size = path.stat().st_size
    _damage(path, pos + 8, b"\xee" * (size - pos - 8))

    result = stage_recover(_open(root), mode="normal", salvage=True)
    [fill] = result.fills
    assert fill.ends_file and fill.position + fill.length == victim.position - pos + size
    apply_recover(root, result)
    records = _records(root)
    assert [r.position for r in records] == [r.position for r in original]
    [tomb] = [r for r in records if r.position == victim.position]
    assert (tomb.topic, tomb.queue_offset) == (victim.topic, victim.queue_offset)
    report = _report(root)
    assert report.errors == 0, report


def test_bytes_of_unknown_records_become_a_rollback_gap(tmp_path):
    """With the consume queues gone, nothing tells what the region held."""
    root = _store(tmp_path)
    walked, _ = _recovery_start(root)
    victim, path, pos = _victim(root, walked)
    _damage(path, pos, (1 << 20).to_bytes(4, "big"))
    shutil.rmtree(root / "consumequeue")
    (root / "abort").touch()

    result = stage_recover(_open(root), salvage=True)
    [fill] = result.fills
    assert fill.length == victim.total_size
    apply_recover(root, result)
    [gap] = [r for r in _records(root) if r.position == victim.position]
    assert gap.topic == GAP_TOPIC
    assert fmt.transaction_type(gap.sys_flag) == fmt.TransactionType.ROLLBACK
    store = _open(root)
    assert GAP_TOPIC not in store.topics()  # never dispatched
    store.close()


def test_nothing_valid_after_the_bad_record_ends_the_log_as_the_broker_does(tmp_path):
    root = _store(tmp_path)
    original = _records(root)
    last = original[-1]
    store = _open(root)
    mf = store.commitlog.queue.find(last.position)
    store.close()
    _damage(mf.path, last.position - mf.from_offset + last.body_offset, b"\xee" * 4)
    (root / "abort").touch()
    result = stage_recover(_open(root), salvage=True)
    assert result.fills == [] and result.end == last.position
    discard(result)


def test_cli_salvage_plan_then_apply_and_killed_runs_converge(tmp_path, rmq_proc):
    source = _store(tmp_path)
    walked, _ = _recovery_start(source)
    victim, path, pos = _victim(source, walked)
    _damage(path, pos + victim.body_offset, b"\xee")
    (source / "abort").touch()

    plan = rmq_proc("recover", str(source), "--salvage", "--json", check=True)
    planned = json.loads(plan.stdout)
    step = planned["steps"][0]
    assert (step["action"], step["bytesRemoved"]) == ("salvage", victim.total_size)
    assert step["detail"].startswith(f"bytes {pos}..{pos + victim.total_size} ")
    assert any(note.startswith("--salvage:") for note in planned["notes"])

    points, reference = converges_at_every_crash_point(["recover", "--salvage"], source, tmp_path)
    assert store_state(source) != store_state(reference)
    assert points >= 5, points
    verify = rmq_proc("verify", str(reference), "--json")
    assert verify.returncode == 0, verify.stdout
