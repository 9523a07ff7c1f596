"""The log of a live DLedger member: entries appended, read back, truncated and committed as DLedger
0.3.1.2's ``DLedgerMmapFileStore`` does it, in the files ``formats.dledger`` declares.

- ``append_as_leader``: the next index in the member's term at the data's write position; the
  caller's ``hook`` patches the body for its position first (4.9.8's ``DLedgerCommitLog`` writes the
  message's PHYSICALOFFSET, ``pos + 48``). ``MmapFileList.preAppend``: an entry and 8 bytes that do
  not fit in what is left of a file are preceded by a blank (magic -1, the length left).
- ``append_as_follower``: a pushed entry stored as it came, at the same position (it must land at
  its ``pos``: every member uses the same data file size), with its index unit.
- ``truncate``: the ``TRUNCATE`` push: an entry the log already holds is kept and what follows it
  goes; another one replaces the log from its index on (an empty member starts its files at its
  position, ``MmapFileList.rebuildWithPos``). rmq zeroes the bytes it drops (the broker leaves them
  for its next append to overwrite) and logs the range: it is a suffix no quorum held.
- ``update_committed_index``: only forward, never past the end, ignored for an older term.
- ``persist_checkpoint``: ``committedIndex`` and ``endIndex`` (``persistCheckPoint``, the ``.bak``
  kept as ``IOUtils.string2File`` keeps it); ``flush``: the maps written to disk.

The log is opened after the store's recovery (``rmq recover``'s DLedger walk, which ``rmq serve``
runs first): a log the walk would cut is refused here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from formats import dledger as dfmt
from rmqcli.dledger import protocol as dp
from rmqcli.dledger.member import MemberState
from rmqcli.durable import fsync_dir, replace_file
from rmqcli.errors import CorruptDataError
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.read.commitlog import first_nonzero
from rmqcli.store.read.dledger import DLedgerCommitLog
from rmqcli.store.write.dledger_files import checkpoint_text, read_index_values
from rmqcli.store.write.files import WritableFile, WritableFileQueue, datasync_path

log = logging.getLogger(__name__)

Code = dp.DLedgerResponseCode
_HEADER = dfmt.ENTRY_HEADER_STRUCT
_UNIT = dfmt.INDEX_UNIT_STRUCT
_UNIT_SIZE = dfmt.INDEX_UNIT_SIZE
Hook = Callable[[bytearray, int], None]  # (entry body, entry pos): patch the body before it is stored


class LedgerError(Exception):
    """An operation the log refuses; ``code`` is the DLedger response code the Java store answers."""

    def __init__(self, code: dp.DLedgerResponseCode, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Stored:
    """Where an entry is: its index, term, position and whole size (header included)."""

    index: int
    term: int
    pos: int
    size: int

    @property
    def end(self) -> int:
        return self.pos + self.size


def same_entry(a: dp.DLedgerEntry, b: dp.DLedgerEntry) -> bool:
    """``DLedgerEntry.equals``: size, magic, index, term, channel, pos and body (not the crcs)."""
    return (a.size, a.magic, a.index, a.term, a.channel, a.pos, a.body or b"") == (
        b.size, b.magic, b.index, b.term, b.channel, b.pos, b.body or b""
    )  # fmt: skip


class Ledger:
    """``dledger-<selfId>/`` of one member; keeps ``state.ledger_end_index``/``ledger_end_term`` current."""

    def __init__(
        self,
        home: Path,
        state: MemberState,
        data_file_size: int,
        index_file_size: int = dfmt.DEFAULT_INDEX_FILE_SIZE,
    ):
        if data_file_size % _UNIT_SIZE or index_file_size % _UNIT_SIZE:
            raise ValueError("file sizes must be multiples of 32")
        self.home, self.state = home, state
        self.data = WritableFileQueue(home / dfmt.DATA_DIR, data_file_size)
        self.index = WritableFileQueue(home / dfmt.INDEX_DIR, index_file_size)
        self.begin_index = -1
        self.end_index = -1
        self.end_term = -1
        self.committed_index = -1
        self.committed_pos = -1
        self._dirty: set[Path] = set()  # files written since the last flush
        self.on_commit: Callable[[], None] | None = None  # told when the committed index moves
        self._checkpointed: tuple[int, int] | None = None
        self._load()

    # --- opening -------------------------------------------------------------------------------
    def _load(self) -> None:
        from rmqcli.ops.dledger_walk import walk

        reader = DLedgerCommitLog(
            MappedFileQueue.open(self.data.directory, self.data.file_size),
            MappedFileQueue.open(self.index.directory, self.index.file_size),
            self.home,
        )
        try:
            found = walk(reader)
            files = [(f.from_offset, f.path) for f in reader.files]
            tail = _bytes_after(reader, found.end)
        finally:
            reader.close()
        if tail or found.units:
            where = found.stop[:2] if found.stop else (str(self.data.directory), found.end)
            why = (
                found.stop[2]
                if found.stop and tail
                else f"index units disagree from entry {found.rewrite_from}"
            )
            raise CorruptDataError(f"the DLedger log needs recovery first (rmq recover): {why}", *where)
        if files and files[-1][0] > found.end:
            raise CorruptDataError(
                "a data file starts past the log's end: run rmq recover", str(files[-1][1]), 0
            )
        self.data.open_existing()
        for f in self.data.files:
            f.wrote = min(f.size, max(0, found.end - f.from_offset))
        self.index.open_existing()
        unit_end = (found.last_index + 1) * _UNIT_SIZE
        for f in self.index.files:
            f.wrote = min(f.size, max(0, unit_end - f.from_offset))
        self.end_index, self.end_term = found.last_index, found.last_term
        self.revise_begin()
        checkpoint = self.home / dfmt.CHECKPOINT_FILE
        if checkpoint.exists():
            values = read_index_values(checkpoint.read_bytes())
            self._commit_to(min(values.get(dfmt.COMMITTED_INDEX_KEY, -1), self.end_index))
        self._sync_state()

    def revise_begin(self) -> None:
        """``reviseLedgerBeginIndex``: the index of the first entry the first data file holds (older
        files cleaned up). Found in the index units, which stay (from entry 0, or zeros before the
        position a rebuilt log starts at): the first unit of an entry whose pos is in that file or
        past it, by bisection over ``[0, end_index]``."""
        self.begin_index = -1
        if self.end_index < 0 or not self.data.files:
            return
        start = self.data.files[0].from_offset
        low, high = 0, self.end_index + 1
        while low < high:
            mid = (low + high) // 2
            pos = self._unit_pos(mid)
            if pos is not None and pos >= start:
                high = mid
            else:
                low = mid + 1
        if low <= self.end_index:
            self.begin_index = low

    def _unit_pos(self, index: int) -> int | None:
        """The pos of entry ``index``'s unit; None where no unit was written (zeros, no file)."""
        at = index * _UNIT_SIZE
        try:
            f = _holding(self.index, at)
        except LedgerError:
            return None
        magic, pos, _size, got, _term = _UNIT.unpack_from(f.read(at - f.from_offset, _UNIT_SIZE))
        return pos if dfmt.is_entry_magic(magic) and got == index else None

    def _sync_state(self) -> None:
        self.state.ledger_end_index, self.state.ledger_end_term = self.end_index, self.end_term

    # --- reading -------------------------------------------------------------------------------
    @property
    def write_pos(self) -> int:
        return self.data.max_offset

    def stored(self, index: int) -> Stored:
        """The index unit of ``index`` (``INDEX_OUT_OF_RANGE`` / ``INDEX_LESS_THAN_LOCAL_BEGIN``)."""
        if index > self.end_index or index < 0:
            raise LedgerError(Code.INDEX_OUT_OF_RANGE, f"index {index} > end {self.end_index}")
        if index < self.begin_index:
            raise LedgerError(
                Code.INDEX_LESS_THAN_LOCAL_BEGIN,
                f"index {index} < begin {self.begin_index}",
            )
        at = index * _UNIT_SIZE
        f = _holding(self.index, at)
        _magic, pos, size, got, term = _UNIT.unpack_from(f.read(at - f.from_offset, _UNIT_SIZE))
        if got != index:
            raise LedgerError(Code.DISK_ERROR, f"index unit {index} holds entry {got}")
        return Stored(index, term, pos, size)

    def get(self, index: int) -> dp.DLedgerEntry:
        """``get(index)``: the entry as the peers' pushes carry it."""
        where = self.stored(index)
        f = _holding(self.data, where.pos)
        raw = f.read(where.pos - f.from_offset, where.size)
        magic, size, got, term, pos, channel, chain_crc, body_crc, _body_size = _HEADER.unpack_from(raw)
        if got != index or pos != where.pos:
            raise LedgerError(Code.DISK_ERROR, f"entry {index} at {where.pos} reads as {got}")
        return dp.DLedgerEntry(
            body=bytes(raw[_HEADER.size :]), body_crc=body_crc, chain_crc=chain_crc, channel=channel,
            index=index, magic=magic, pos=pos, size=size, term=term,
        )  # fmt: skip

    # --- writing -------------------------------------------------------------------------------
    def _pre_append(self, size: int) -> WritableFile:
        """``preAppend(size, useBlank=true)``: the file the entry goes in, a blank closing the last."""
        f = self.data.last_for(self.write_pos)
        if size + dfmt.MIN_BLANK_LEN > f.remaining:
            if size + dfmt.MIN_BLANK_LEN > self.data.file_size:
                raise LedgerError(Code.DISK_ERROR, f"entry of {size} bytes exceeds a data file")
            f.write_at(f.wrote, dfmt.BLANK_STRUCT.pack(dfmt.BLANK_MAGIC, f.remaining))
            f.wrote = f.size
            f = self.data.last_for(self.write_pos)
        return f

    def next_pos(self, size: int) -> int:
        """Where an entry of ``size`` bytes (header included) goes next; a file it does not fit in
        is closed by a blank first (``preAppend``)."""
        self._pre_append(size)
        return self.write_pos

    def _write(self, index: int, term: int, pos: int, raw: bytes, magic: int = dfmt.MAGIC_1) -> Stored:
        f = _holding(self.data, pos)
        f.append(raw)
        self._dirty.add(f.path)
        at = index * _UNIT_SIZE
        unit_file = self.index.last_for(at)
        if unit_file.from_offset + unit_file.wrote != at:
            got = unit_file.from_offset + unit_file.wrote
            raise LedgerError(Code.DISK_ERROR, f"the index unit of entry {index} would be at {got}, not {at}")
        unit_file.append(_UNIT.pack(magic, pos, len(raw), index, term))
        self._dirty.add(unit_file.path)
        if self.begin_index < 0:
            self.begin_index = index
        self.end_index, self.end_term = index, term
        self._sync_state()
        return Stored(index, term, pos, len(raw))

    def append_as_leader(self, term: int, body: bytes, hook: Hook | None = None) -> Stored:
        """``appendAsLeader``: ``body`` as entry ``end + 1`` of ``term``."""
        size = _HEADER.size + len(body)
        self._pre_append(size)
        pos, index = self.write_pos, self.end_index + 1
        patched = bytearray(body)
        if hook is not None:
            hook(patched, pos)
        header = _HEADER.pack(dfmt.MAGIC_1, size, index, term, pos, 0, 0, 0, len(body))
        return self._write(index, term, pos, header + patched)

    def append_as_follower(self, entry: dp.DLedgerEntry) -> Stored:
        """``appendAsFollower``: the pushed entry as it is (``INCONSISTENT_INDEX`` when it is not the
        next one; ``DISK_ERROR`` when it would not land at its ``pos``)."""
        if entry.index != self.end_index + 1:
            raise LedgerError(Code.INCONSISTENT_INDEX, f"entry {entry.index} != end {self.end_index} + 1")
        return self._append_pushed(entry)

    def _append_pushed(self, entry: dp.DLedgerEntry) -> Stored:
        raw = _encode(entry)
        self._pre_append(len(raw))
        if self.write_pos != entry.pos:
            raise LedgerError(
                Code.DISK_ERROR, f"entry {entry.index} would be at {self.write_pos}, not {entry.pos}"
            )
        return self._write(entry.index, entry.term, entry.pos, raw, entry.magic)

    def truncate(self, entry: dp.DLedgerEntry) -> int:
        """``truncate``: the log ends with ``entry`` (kept when the log holds it, else written)."""
        try:
            existed = same_entry(entry, self.get(entry.index))
        except LedgerError:
            existed = False
        cut = entry.pos + entry.size if existed else entry.pos
        if cut != self.write_pos:
            log.warning("DLedger %s: the log is cut at offset %d (it ended at %d), entry %d",
                        self.state.self_id, cut, self.write_pos, entry.index)  # fmt: skip
        kept = entry.index if existed else entry.index - 1
        _cut_queue(self.data, cut)
        _cut_queue(self.index, (kept + 1) * _UNIT_SIZE)
        if existed:
            self.end_index, self.end_term = entry.index, entry.term
        else:
            self._append_pushed(entry)
        if self.committed_index > self.end_index:  # a committed entry is never cut in a sound group
            self._commit_to(self.end_index)
        self.revise_begin()
        self._sync_state()
        self._dirty.update(f.path for f in (self.data.files[-1:] + self.index.files[-1:]))
        return entry.index

    # --- committing ----------------------------------------------------------------------------
    def update_committed_index(self, term: int, index: int) -> bool:
        """``updateCommittedIndex``: True when the committed index moved."""
        if (
            index == -1
            or self.end_index == -1
            or term < self.state.curr_term
            or index == self.committed_index
        ):
            return False
        if index < self.committed_index or index < self.begin_index:
            log.debug("DLedger %s: skip committed index %d (now %d, begin %d)",
                      self.state.self_id, index, self.committed_index, self.begin_index)  # fmt: skip
            return False
        self._commit_to(min(index, self.end_index))
        return True

    def _commit_to(self, index: int) -> None:
        if index < 0:
            self.committed_index, self.committed_pos = -1, -1
            return
        where = self.stored(index)
        moved = index > self.committed_index
        self.committed_index, self.committed_pos = index, where.end
        if moved and self.on_commit is not None:
            self.on_commit()

    def persist_checkpoint(self) -> None:
        """``persistCheckPoint`` when the values changed since the last one."""
        now = (self.committed_index, self.end_index)
        if now == self._checkpointed:
            return
        path = self.home / dfmt.CHECKPOINT_FILE
        self.home.mkdir(parents=True, exist_ok=True)
        old = path.read_bytes() if path.exists() else None
        replace_file(path, checkpoint_text(old, *now), backup=True)
        self._checkpointed = now

    def take_dirty(self) -> list[Path]:
        """The files written since the last call, for ``flush_files`` (a worker thread may run it)."""
        dirty, self._dirty = sorted(self._dirty), set()
        return dirty

    def flush(self) -> None:
        """The data and index written to disk (``FlushDataService``), on the calling thread."""
        flush_files(self.take_dirty())

    def close(self) -> None:
        self.flush()
        self.persist_checkpoint()
        self.data.close()
        self.index.close()


def flush_files(paths: list[Path]) -> None:
    """fdatasync of each file (one removed since, by a truncation, is skipped)."""
    for path in paths:
        datasync_path(path)


def _encode(entry: dp.DLedgerEntry) -> bytes:
    """``DLedgerEntryCoder.encode``: the header (size recomputed from the body) and the body."""
    body = entry.body or b""
    size = _HEADER.size + len(body)
    return _HEADER.pack(
        entry.magic, size, entry.index, entry.term, entry.pos, entry.channel, entry.chain_crc, entry.body_crc,
        len(body),
    ) + body  # fmt: skip


def _bytes_after(reader: DLedgerCommitLog, end: int) -> bool:
    """Whether the data file holding ``end`` has anything but zeros from there on."""
    for mf in reader.files:
        if mf.from_offset <= end < mf.from_offset + mf.size:
            buf = mf.map()
            return first_nonzero(buf, end - mf.from_offset, len(buf), mf.path) is not None
    return False


def _holding(queue: WritableFileQueue, offset: int) -> WritableFile:
    for f in reversed(queue.files):
        if f.from_offset <= offset < f.from_offset + f.size:
            return f
    raise LedgerError(Code.DISK_ERROR, f"no file of {queue.directory} holds offset {offset}")


def _cut_queue(queue: WritableFileQueue, offset: int) -> None:
    """``truncateOffset(offset)``, then ``rebuildWithPos(offset)`` when the files do not reach it:
    the queue's data ends at ``offset``; bytes past it are zeroed and files past it removed."""
    keep: list[WritableFile] = []
    for f in queue.files:
        if f.from_offset + f.size <= offset:
            keep.append(f)
        elif f.from_offset <= offset:
            at = offset - f.from_offset
            if f.wrote > at:
                f.write_at(at, bytes(f.wrote - at))
            f.wrote = at
            keep.append(f)
        else:
            _remove(f)
    if not keep or keep[-1].from_offset + keep[-1].size < offset:
        for f in keep:  # the files end before the position: a new file holds it (rebuildWithPos)
            _remove(f)
        queue.files = []
        queue.last_for(offset).wrote = offset % queue.file_size
    else:
        queue.files = keep
    fsync_dir(queue.directory)


def _remove(f: WritableFile) -> None:
    f.close()
    f.path.unlink(missing_ok=True)
