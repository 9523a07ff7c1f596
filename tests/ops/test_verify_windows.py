"""``rmq verify`` reads CommitLog files a window at a time, index entries and the records' index keys
a run at a time, joins consume-queue units with their records a run at a time and lets them go
between checks (what keeps its memory bounded, issue 20). With windows and
runs far smaller than the stores' files and records, every fault of ``test_verify`` is found where
it was, and every report is the one the whole-file reading gives."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from formats import commitlog as fmt
from formats import indexfile
from formats.consumequeue import CQ_UNIT_SIZE
from rmqcli.ops import verify_commitlog, verify_index, verify_queues, verify_table
from rmqcli.store.read.index import IndexFile
from tests.ops.test_verify import *  # noqa: F403 - every case of test_verify, again with tiny windows
from tests.ops.test_verify import _patch, _records, _verify

WINDOW = 1000  # bytes: many windows per file, and records larger than a window
ENTRIES = 3
KEYS = 5  # index keys read back at once
UNITS = 4  # consume-queue units joined with their records at once


@pytest.fixture(autouse=True)
def tiny_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify_commitlog, "_WINDOW", WINDOW)
    monkeypatch.setattr(verify_index, "_ENTRIES_AT_ONCE", ENTRIES)
    monkeypatch.setattr(verify_table, "_KEYS_AT_ONCE", KEYS)
    monkeypatch.setattr(verify_queues, "_UNITS_AT_ONCE", UNITS)
    monkeypatch.setattr(verify_queues, "_UNITS_BETWEEN_TRIMS", UNITS)


def _middle(store: Path, fraction: float = 0.5) -> tuple[Path, int, int, int]:
    """(file, position, size, body offset) of a record with a body well inside the CommitLog."""
    recs = [r for r in _records(store) if r[4] > 0]
    name, pos, size, body_offset, *_ = recs[int(len(recs) * fraction)]
    return store / "commitlog" / name, pos, size, body_offset


def _flip_magic(store: Path) -> None:
    path, pos, *_ = _middle(store, 0.3)
    _patch(path, pos + fmt.PREFIX_OFFSETS["magic_code"], b"\0\0\0\0")


def _flip_body(store: Path) -> None:
    path, pos, _, body = _middle(store)
    _patch(path, pos + body, bytes([path.read_bytes()[pos + body] ^ 0xFF]))


def _zero_hole(store: Path) -> None:
    recs = _records(store)
    name, pos, *_ = recs[len(recs) // 2]
    following = [r for r in recs if r[0] == name and r[1] >= pos][:3]
    _patch(store / "commitlog" / name, pos, bytes(sum(r[2] for r in following)))


def _index_links(store: Path) -> None:
    """Entry 5 of the first index file links to itself; entry 7 loses its link."""
    path = sorted((store / "index").iterdir())[0]
    f = IndexFile(path)
    prev_at = 4 + 8 + 4  # key hash, offset, time difference
    five = indexfile.entry_position(5, f.hash_slot_num)
    seven = indexfile.entry_position(7, f.hash_slot_num)
    f.close()
    _patch(path, five + prev_at, struct.pack(">i", 5))
    _patch(path, seven + prev_at, struct.pack(">i", 0))


def _unit_size(store: Path) -> None:
    queue = max(
        (p for p in (store / "consumequeue").rglob("0*") if p.is_file()), key=lambda p: p.stat().st_size
    )
    _patch(queue, 3 * CQ_UNIT_SIZE + 8, struct.pack(">i", 17))


DAMAGES: dict[str, Callable[[Path], None]] = {
    "none": lambda store: None,
    "magic": _flip_magic,
    "body": _flip_body,
    "zero-hole": _zero_hole,
    "index-links": _index_links,
    "unit-size": _unit_size,
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_the_report_is_the_whole_file_reading_s(damage: str, damaged: Path, monkeypatch) -> None:
    DAMAGES[damage](damaged)
    windowed = dataclasses.asdict(_verify(damaged))
    monkeypatch.undo()  # the default window and run, larger than these stores' files
    assert verify_commitlog._WINDOW > WINDOW
    whole = dataclasses.asdict(_verify(damaged))
    assert windowed == whole
    if damage != "none":
        assert whole["problems"], "the damage was found"
