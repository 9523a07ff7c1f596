"""``rmq verify`` on real and generated stores, clean and with one fault each (real bytes, no mocks)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from formats import checkpoint as ckpt_fmt
from formats import commitlog as fmt
from formats import indexfile
from formats.consumequeue import CQ_UNIT_SIZE, CQ_UNIT_STRUCT
from formats.derive import field_offsets
from rmqcli.cli.main import invoke
from rmqcli.ops.verify import VerifyReport, verify_store
from rmqcli.store import Store
from rmqcli.store.read.index import IndexFile
from tests.support.components import require
from tests.support.realfixtures import REAL_ROOT, variant_params
from tests.support.stores import writable_copy

BASIC = REAL_ROOT / "basic-1" / "store"
_SIZE = struct.Struct(">i")
_CKPT_AT = field_offsets(ckpt_fmt.CheckpointFields)


def _verify(path: Path) -> VerifyReport:
    store = Store.open(path)
    try:
        return verify_store(store)
    finally:
        store.close()


def _find(report: VerifyReport, kind: str, file: str | None = None, offset: int | None = None):
    hits = [p for p in report.problems if p.kind == kind]
    assert hits, f"no {kind} problem in {[(p.kind, p.file, p.offset) for p in report.problems]}"
    if file is not None:
        hits = [p for p in hits if p.file == file]
        assert hits, f"{kind} not reported for {file}: {report.problems}"
    if offset is not None:
        assert offset in [p.offset for p in hits], f"{kind} at {[p.offset for p in hits]}, expected {offset}"
    return hits[0]


@pytest.fixture(params=["generated", "basic-1"])
def damaged(request, tmp_path, pristine) -> Path:
    """A writable copy of a store to damage."""
    if request.param == "basic-1":
        require("real")
        src = BASIC
    else:
        src = pristine
    return writable_copy(src, tmp_path / "store")


def _records(path: Path):
    """(file name, position in file, total size, body offset, body length) of every record."""
    store = Store.open(path)
    try:
        out = []
        for mf in store.commitlog.files:
            buf = mf.map()
            pos = 0
            while pos + 8 <= len(buf):
                size, magic = struct.unpack_from(">ii", buf, pos)
                if magic not in fmt.MESSAGE_MAGICS:
                    break
                rec = store.commitlog.read(mf.from_offset + pos)
                out.append((mf.name, pos, size, rec.body_offset, rec.body_length, mf.from_offset))
                pos += size
        return out
    finally:
        store.close()


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(data)


# --- clean stores ----------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", variant_params())
def test_real_stores_have_no_errors(variant) -> None:
    report = _verify(variant.store)
    assert report.errors == 0, [p for p in report.problems if p.severity == "error"]
    assert (
        report.records == variant.facts["commitlog"]["records"]
        if "records" in variant.facts.get("commitlog", {})
        else report.records > 0
    )
    assert report.crc_checked > 0 and report.units > 0 and report.index_entries > 0


def test_real_crash_store_warnings() -> None:
    raw = REAL_ROOT / "crash-1" / "store-raw"
    if not raw.is_dir():
        require("real")
    report = _verify(raw)
    assert report.errors == 0
    _find(report, "abort", "abort")
    _find(report, "preallocated-file", "commitlog/00000000000003145728", 0)


def test_generated_store_is_clean(pristine) -> None:
    report = _verify(pristine)
    assert report.errors == 0 and report.warnings == 0, report.problems
    assert report.records > 400 and report.units > 0 and report.index_entries > 0


# --- CommitLog faults ------------------------------------------------------------------------------
def test_torn_tail(damaged) -> None:
    name, pos, size, *_ = _records(damaged)[-1]
    _patch(damaged / "commitlog" / name, pos + size // 2, bytes(size - size // 2))
    _find(_verify(damaged), "torn-record", f"commitlog/{name}", pos)


def test_zeroed_tail_of_a_full_file(damaged) -> None:
    recs = _records(damaged)
    first = recs[0][0]
    name, pos, *_ = [r for r in recs if r[0] == first][-1]
    path = damaged / "commitlog" / name
    _patch(path, pos, bytes(path.stat().st_size - pos))  # the last record and the BLANK
    _find(_verify(damaged), "missing-blank", f"commitlog/{name}", pos)


def test_partial_record(damaged) -> None:
    name, pos, size, *_ = _records(damaged)[-1]
    path = damaged / "commitlog" / name
    end = pos + size
    header = bytearray(path.read_bytes()[pos : pos + size // 2])
    _SIZE.pack_into(header, 0, path.stat().st_size - end + 100)
    _patch(path, end, bytes(header))
    _find(_verify(damaged), "truncated-record", f"commitlog/{name}", end)


def test_flipped_body_byte(damaged) -> None:
    recs = [r for r in _records(damaged) if r[4] > 0]
    name, pos, _, body_offset, *_ = recs[len(recs) // 2]
    path = damaged / "commitlog" / name
    byte = path.read_bytes()[pos + body_offset]
    _patch(path, pos + body_offset, bytes([byte ^ 0xFF]))
    report = _verify(damaged)
    _find(report, "crc-mismatch", f"commitlog/{name}", pos)
    assert report.errors >= 1


def test_no_crc_skips_the_body_check(damaged) -> None:
    recs = [r for r in _records(damaged) if r[4] > 0]
    name, pos, _, body_offset, *_ = recs[len(recs) // 2]
    path = damaged / "commitlog" / name
    _patch(path, pos + body_offset, bytes([path.read_bytes()[pos + body_offset] ^ 0xFF]))
    store = Store.open(damaged)
    assert verify_store(store, crc=False).errors == 0
    store.close()


def test_flipped_magic_then_resync(damaged) -> None:
    recs = _records(damaged)
    name, pos, *_ = recs[len(recs) // 3]
    _patch(damaged / "commitlog" / name, pos + fmt.PREFIX_OFFSETS["magic_code"], b"\0\0\0\0")
    report = _verify(damaged)
    _find(report, "bad-magic", f"commitlog/{name}", pos)
    assert report.records == len(recs) - 1  # the scan resynced and read every other record


def test_wrong_total_size(damaged) -> None:
    recs = _records(damaged)
    name, pos, size, *_ = recs[len(recs) // 4]
    _patch(damaged / "commitlog" / name, pos, _SIZE.pack(size + 4))
    _find(_verify(damaged), "bad-size", f"commitlog/{name}", pos)


# --- consume-queue faults --------------------------------------------------------------------------
def _queue_with_units(path: Path) -> Path:
    """The first file of the busiest queue that is not full."""
    best = None
    for qdir in sorted((path / "consumequeue").glob("*/*")):
        files = sorted(qdir.iterdir())
        if best is None or len(files) > len(best):
            best = files
    assert best
    return best[-1]


def _valid_units(path: Path) -> int:
    data = path.read_bytes()
    for i, (off, size, _) in enumerate(CQ_UNIT_STRUCT.iter_unpack(data)):
        if off < 0 or size <= 0:
            return i
    return len(data) // CQ_UNIT_SIZE


def test_cq_unit_past_the_end(damaged) -> None:
    path = _queue_with_units(damaged)
    n = _valid_units(path)
    last = _records(damaged)[-1]
    end = last[5] + last[1] + last[2]
    _patch(path, n * CQ_UNIT_SIZE, CQ_UNIT_STRUCT.pack(end + 1000, 200, 0))
    _find(_verify(damaged), "cq-past-end", str(path.relative_to(damaged)), n * CQ_UNIT_SIZE)


def test_cq_unit_with_a_wrong_size(damaged) -> None:
    path = _queue_with_units(damaged)
    n = _valid_units(path)
    at = (n - 1) * CQ_UNIT_SIZE
    off, size, tags = CQ_UNIT_STRUCT.unpack_from(path.read_bytes(), at)
    _patch(path, at, CQ_UNIT_STRUCT.pack(off, size + 1, tags))
    _find(_verify(damaged), "cq-size-mismatch", str(path.relative_to(damaged)), at)


def test_missing_cq_file(damaged) -> None:
    qdir = max((d for d in (damaged / "consumequeue").glob("*/*")), key=lambda d: len(list(d.iterdir())))
    files = sorted(qdir.iterdir())
    assert len(files) >= 2
    files[0].unlink()
    report = _verify(damaged)
    _find(report, "cq-missing-unit", str(files[0].relative_to(damaged)), 0)
    assert report.errors


def test_missing_cq_dir(damaged) -> None:
    qdir = sorted((damaged / "consumequeue").glob("TopicB/*"))[0]
    shutil.rmtree(qdir)
    problem = _find(_verify(damaged), "missing-queue", str(qdir.relative_to(damaged)))
    assert problem.severity == "error" and problem.offset is None


# --- index faults ----------------------------------------------------------------------------------
def test_missing_index_file(damaged) -> None:
    files = sorted((damaged / "index").iterdir())
    assert len(files) >= 3
    victim = files[1]
    begin = IndexFile(victim).header.begin_phy_offset
    victim.unlink()
    report = _verify(damaged)
    rec = next(r for r in _records(damaged) if r[5] + r[1] == begin)
    _find(report, "index-missing-key", f"commitlog/{rec[0]}", rec[1])


def test_index_entry_with_a_wrong_hash(damaged) -> None:
    path = sorted((damaged / "index").iterdir())[0]
    f = IndexFile(path)
    at = indexfile.entry_position(1, f.hash_slot_num)
    key_hash = f.entry(1).key_hash
    f.close()
    _patch(path, at, struct.pack(">i", (key_hash + f.hash_slot_num) & 0x7FFFFFFF))  # same slot
    _find(_verify(damaged), "index-wrong-hash", str(path.relative_to(damaged)), at)


# --- checkpoint, abort, config ---------------------------------------------------------------------
def test_stale_checkpoint(damaged) -> None:
    path = damaged / "checkpoint"
    fields = ckpt_fmt.FIELDS_STRUCT.unpack_from(path.read_bytes())
    ahead = max(fields[:3]) + 600_000  # ten minutes after anything stored
    _patch(path, _CKPT_AT["physic_msg_timestamp"], struct.pack(">q", ahead))
    report = _verify(damaged)
    problem = _find(report, "checkpoint-ahead", "checkpoint", _CKPT_AT["physic_msg_timestamp"])
    assert problem.severity == "warning" and report.errors == 0


def test_abort_present(damaged) -> None:
    (damaged / "abort").write_bytes(b"")
    report = _verify(damaged)
    assert _find(report, "abort", "abort").severity == "warning"
    assert report.errors == 0


_BAD_JSON = '{"offsetTable":{0:1,]}'


def _json_error_at(text: str) -> int:
    from formats import fastjson

    with pytest.raises(ValueError) as info:
        fastjson.loads(text)
    return info.value.pos


def test_corrupt_config_with_bak(damaged) -> None:
    path = damaged / "config" / "consumerOffset.json"
    shutil.copyfile(path, path.with_name(path.name + ".bak"))
    path.write_text(_BAD_JSON, encoding="utf-8")
    problem = _find(_verify(damaged), "config-bak-used", "config/consumerOffset.json")
    assert problem.severity == "warning" and problem.offset == _json_error_at(_BAD_JSON)


def test_corrupt_config_without_bak(damaged) -> None:
    path = damaged / "config" / "consumerOffset.json"
    path.with_name(path.name + ".bak").unlink(missing_ok=True)
    path.write_text(_BAD_JSON, encoding="utf-8")
    problem = _find(_verify(damaged), "config-corrupt", "config/consumerOffset.json")
    assert problem.severity == "error" and problem.offset == _json_error_at(_BAD_JSON)


# --- command line ----------------------------------------------------------------------------------
def test_cli_exit_codes_and_json(pristine, tmp_path, capsys) -> None:
    assert invoke(["verify", str(pristine)]) == 0
    assert capsys.readouterr().out.startswith("OK: ")
    assert invoke(["verify", str(pristine), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["errors"] == 0 and data["problems"] == []
    bad = writable_copy(pristine, tmp_path / "bad")
    name, pos, *_ = _records(bad)[5]
    _patch(bad / "commitlog" / name, pos + fmt.PREFIX_OFFSETS["magic_code"], b"\1\2\3\4")
    assert invoke(["verify", str(bad), "--json", "--max-problems", "1"]) == 4
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["summary"]["errors"] >= 1 and len(data["problems"]) == 1
    assert data["problems"][0]["kind"] == "bad-magic" and data["problems"][0]["offset"] == pos
    assert "error" in captured.err
    assert invoke(["verify", str(bad), "--output", "jsonl", "--no-crc"]) == 4
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {line["section"] for line in lines} >= {"summary", "problem"}
