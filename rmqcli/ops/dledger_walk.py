"""The walk ``DLedgerMmapFileStore.recover`` (openmessaging/dledger 0.3.1.2) makes over a DLedger log at
start, done offline: where the data ends, the last entry, and the index units to rewrite. The walk starts
at the third-last data file (earlier when that file's first entry disagrees with its index unit: the pre-
check goes back one file at a time) and checks entry headers only, never the message inside: a blank magic
moves to the next file; a size of 0, a header cut short, a pos that is not the entry's own offset, ``size
!= bodySize + 48``, an entry running past its file, a magic other than ``MAGIC_1``, an index that does not
follow the previous one, a lower term, or ``size <= 44`` (``HEADER_SIZE``: an entry with an empty body, 48
bytes, is sound) ends it. Each entry is compared with its index unit (magic, pos, size, index, term) until
the first disagreement (or a missing unit); from there every unit is written again from the data. A walk
that stops more than one file before the last data file makes the broker exit ("processOffset is too
small, check it manually"): it is refused the same way here."""

from __future__ import annotations

from dataclasses import dataclass, field

from formats import dledger as dfmt
from rmqcli.errors import CorruptDataError, NotFoundError
from rmqcli.store.mapped import MappedFile, MappedFileQueue
from rmqcli.store.read.dledger import DLedgerCommitLog

_HEADER = dfmt.ENTRY_HEADER_STRUCT
_UNIT = dfmt.INDEX_UNIT_STRUCT
_BODY = dfmt.BODY_OFFSET


@dataclass
class Walk:
    """What the walk found: ``end`` is ``processOffset`` (where the data ends), ``last_index`` and
    ``last_term`` the last sound entry's (-1 with none); ``units`` maps an entry index to the index
    unit to write for it (from the first disagreement on, only units that differ); ``stop`` says
    why the walk ended (``None``: at the end of the data)."""

    end: int
    last_index: int = -1
    last_term: int = -1
    last_end: int = 0  # pos + size of the last sound entry
    first_index: int | None = None
    units: dict[int, bytes] = field(default_factory=dict)
    rewrite_from: int | None = None  # the first entry whose unit disagreed
    stop: tuple[str, int, str] | None = None  # (file, position in it, why)
    positions: dict[int, tuple[int, int]] = field(default_factory=dict)  # index -> (pos, size)


def _unit(index_queue: MappedFileQueue, entry_index: int) -> tuple | None:
    """The index unit of ``entry_index`` as stored, or ``None`` when no file holds it."""
    at = entry_index * dfmt.INDEX_UNIT_SIZE
    try:
        mf = index_queue.find(at)
    except NotFoundError:
        return None
    rel = at - mf.from_offset
    if rel + dfmt.INDEX_UNIT_SIZE > mf.size:
        return None
    return _UNIT.unpack_from(mf.map(), rel)


def _first_entry_checks(mf: MappedFile, index_queue: MappedFileQueue) -> bool:
    """``recover``'s pre-check of a file's first entry: a sound header that its index unit repeats."""
    buf = mf.map()
    if len(buf) < _BODY:
        return False
    magic, size, index, term, pos, _, _, _, body_size = _HEADER.unpack_from(buf, 0)
    if magic == dfmt.BLANK_MAGIC or not dfmt.is_entry_magic(magic) or size <= dfmt.HEADER_SIZE:
        return False
    if pos != mf.from_offset or body_size + _BODY != size:
        return False
    return _unit(index_queue, index) == (magic, pos, size, index, term)


def start_file(log: DLedgerCommitLog) -> int:
    """The index of the data file the walk starts at (``recover``'s loop from ``size - 3`` down)."""
    files = log.data_files
    i = max(len(files) - 3, 0)
    while i > 0 and not _first_entry_checks(files[i], log.index_queue):
        i -= 1
    return i


def walk(log: DLedgerCommitLog) -> Walk:
    """Walk the data as ``recover`` does; ``CorruptDataError`` where the broker exits instead."""
    files = log.data_files
    if not files:
        return Walk(0)
    i = start_file(log)
    mf = files[i]
    result = Walk(mf.from_offset)
    process = mf.from_offset
    at = 0
    checking = True  # units are compared until the first disagreement
    while True:
        buf = mf.map()
        limit = len(buf)
        stop = _entry_stop(buf, at, limit, mf, result)
        if stop == "blank":
            process = mf.from_offset + max(mf.size, limit)
            i += 1
            if i >= len(files):
                break
            mf, at, process = files[i], 0, files[i].from_offset
            continue
        if stop is not None:
            result.stop = (str(mf.path), at, stop)
            break
        magic, size, index, term, pos, _, _, _, _ = _HEADER.unpack_from(buf, at)
        if checking and _unit(log.index_queue, index) != (magic, pos, size, index, term):
            checking = False
            result.rewrite_from = index
        if not checking:
            unit = _UNIT.pack(magic, pos, size, index, term)
            if _unit(log.index_queue, index) != (magic, pos, size, index, term):
                result.units[index] = unit
        if result.first_index is None:
            result.first_index = index
        result.last_index, result.last_term, result.last_end = index, term, pos + size
        result.positions[index] = (pos, size)
        process += size
        at += size
    result.end = process
    last = files[-1]
    if last.from_offset - process > last.size:
        raise CorruptDataError(
            f"the walk stops at offset {process}, more than a file before the last data file: a broker "
            "exits here (processOffset is too small); check the log by hand (rmq verify)",
            *(result.stop[:2] if result.stop else (str(last.path), 0)),
        )
    return result


def _entry_stop(buf, at: int, limit: int, mf: MappedFile, result: Walk) -> str | None:
    """Why ``recover`` stops at ``at`` ("blank": next file), in its order of checks; ``None``: an entry."""
    if at + 4 > limit:
        return f"no entry header: {limit - at} bytes left in the file"
    if int.from_bytes(buf[at : at + 4], "big", signed=True) == dfmt.BLANK_MAGIC:
        return "blank"
    if at + 8 > limit:
        return "entry header cut short"
    if int.from_bytes(buf[at + 4 : at + 8], "big", signed=True) == 0:
        return "size 0: the end of the data"
    if at + _BODY > limit:
        return "entry header cut short"
    magic, size, index, term, pos, _, _, _, body_size = _HEADER.unpack_from(buf, at)
    if pos != mf.from_offset + at:
        return f"entry pos {pos} != its offset {mf.from_offset + at}"
    if body_size + _BODY != size:
        return f"entry size {size} != body size {body_size} + {_BODY}"
    if size < 0 or at + size > limit:
        return f"entry size {size} runs past the end of the file"
    if not dfmt.is_entry_magic(magic):
        return f"bad entry magic {magic}"
    if result.last_index != -1 and index != result.last_index + 1:
        return f"entry index {index} does not follow {result.last_index}"
    if term < result.last_term:
        return f"entry term {term} is lower than the previous entry's {result.last_term}"
    if size <= dfmt.HEADER_SIZE:
        return f"entry size {size} is not more than the header's {dfmt.HEADER_SIZE}"
    return None
