"""Read a CommitLog written in DLedger mode: entries of ``dledger-<selfId>/data/``, each a header and
one CommitLog message record (``formats.dledger``; DLedger 0.3.1.2 ``DLedgerMmapFileStore``).

``DLedgerCommitLog`` answers what ``CommitLog`` answers (records, headers, header batches, a record
at a physical offset, the data end), so every command that reads a store reads this one too; a
record's ``position`` is its entry's ``pos + BODY_OFFSET``, the offset the consume queues hold.

What stops a scan is what stops ``DLedgerMmapFileStore.recover``: an entry whose magic, size, pos or
body size is wrong, or whose index or term breaks the chain (index + 1, term not decreasing); a
blank (magic -1) ends a file and zeros end the data. A stop with entries after it (in the file or
in a later one), or a message record that fails ``checkMessageAndReturnSize`` inside a sound entry,
is a ``CorruptDataError`` naming the file and byte offset, or with ``skip_corrupt``/``on_corrupt`` a
``Corruption`` after which the scan goes on at the next entry.

A store switched to DLedger mode keeps its old ``commitlog/`` files (``old``): 4.9.8's
``DLedgerCommitLog`` reads the old CommitLog below ``dividedCommitlogOffset`` (the first data
file's start; on the first start in DLedger mode the old last file's end, where the data files
begin) and the entries from it on (``getMessage``, ``getData``, ``getMinOffset``). So does this
log: ``files`` is the old files then the data files (one run of file offsets), records below the
divide are the old CommitLog's, with no entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from formats import dledger as dfmt
from formats.records import Record, RecordError, decode_record
from rmqcli.errors import CorruptDataError, NotFoundError, UsageError
from rmqcli.store.mapped import MappedFile, MappedFileQueue
from rmqcli.store.read.commitlog import CommitLog, Corruption, FileEnd, Header, MappedLog

if TYPE_CHECKING:
    from rmqcli.store.scan.headerscan import HeaderBatch

_HEADER = dfmt.ENTRY_HEADER_STRUCT
_BODY = dfmt.BODY_OFFSET
_MAGIC_1 = dfmt.MAGIC_1.to_bytes(4, "big", signed=True)
OnCorrupt = Callable[[Corruption], None]


class Entry(NamedTuple):
    """One entry header as read (``DLedgerEntryCoder.decode`` without the body)."""

    file: str
    file_position: int
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_size: int

    @property
    def body_position(self) -> int:
        """The global offset of the message record (its PHYSICALOFFSET)."""
        return self.pos + _BODY


class EntryError(Exception):
    """An entry header ``DLedgerMmapFileStore.recover`` rejects; ``reason`` is one line."""


def read_entry(buf, at: int, limit: int, mf: MappedFile) -> Entry:
    """The entry header at ``buf[at:]`` of ``mf``, checked as ``recover`` checks it."""
    if at + _HEADER.size > limit:
        raise EntryError(f"entry header cut short: {limit - at} bytes left in the file")
    entry = Entry(str(mf.path), at, *_HEADER.unpack_from(buf, at))
    if not dfmt.is_entry_magic(entry.magic):
        raise EntryError(f"bad entry magic {entry.magic} (expected {dfmt.MAGIC_1})")
    if entry.pos != mf.from_offset + at:
        raise EntryError(f"entry pos field {entry.pos} != its offset {mf.from_offset + at}")
    if entry.size != entry.body_size + _BODY or entry.body_size <= 0:
        raise EntryError(f"entry size {entry.size} != body size {entry.body_size} + {_BODY}")
    if entry.size > limit - at:
        raise EntryError(f"entry size {entry.size} runs past the end of the file ({limit - at} bytes left)")
    return entry


def file_stop(buf, at: int, limit: int) -> str | None:
    """What ends a file's entries at ``at``: "blank", "zeros", "end" (``None``: an entry, or garbage)."""
    if at >= limit:
        return "end"
    head = bytes(buf[at : min(at + dfmt.MIN_BLANK_LEN, limit)])
    if head[:4] == b"\xff\xff\xff\xff":
        return "blank"
    if len(head) < dfmt.MIN_BLANK_LEN or head[4:8] == b"\0\0\0\0":
        return "zeros" if not any(head) else None  # ``recover``: size 0 is the end of the data
    return None


def resync(buf, start: int, limit: int, mf: MappedFile) -> int | None:
    """The next position at or after ``start`` where a sound entry header starts at its own pos."""
    at = start
    while True:
        hit = buf.find(_MAGIC_1, at, limit)
        if hit < 0:
            return None
        try:
            read_entry(buf, hit, limit, mf)
            return hit
        except EntryError:
            at = hit + 1


@dataclass
class _Chain:
    """The chain ``recover`` checks across entries: index + 1, term never smaller."""

    index: int | None = None
    term: int | None = None

    def problem(self, e: Entry) -> str | None:
        if self.index is not None and e.index != self.index + 1:
            return f"entry index {e.index} does not follow {self.index}"
        if self.term is not None and e.term < self.term:
            return f"entry term {e.term} is lower than the previous entry's {self.term}"
        return None

    def take(self, e: Entry) -> None:
        self.index, self.term = e.index, e.term


def _after_zeros(buf, at: int, limit: int, mf: MappedFile) -> tuple[Corruption, int | None]:
    """The stop at zeros (an error only once entries follow) and where entries resume in the file."""
    nxt = resync(buf, at, limit, mf)
    name = str(mf.path)
    if nxt is None:
        reason = (
            "data ends here in zeros without a blank, yet a later file holds entries: recovery stops here"
        )
        return Corruption(name, mf.from_offset + at, limit - at, reason, at, "missing-blank"), None
    reason = f"zeros from here to byte {nxt}, then entries again: recovery stops at the zeros"
    return Corruption(name, mf.from_offset + at, nxt - at, reason, at, "zero-hole"), nxt


class Item(NamedTuple):
    """A sound entry and its message record."""

    entry: Entry
    record: Record


def _record(buf, e: Entry, mf: MappedFile) -> Record:
    """The message record of entry ``e``; ``RecordError`` when it fails the checks or is not the body."""
    rec = decode_record(buf, e.file_position + _BODY, e.file_position + e.size, str(mf.path), mf.from_offset)
    if rec.total_size != e.body_size:
        raise RecordError(f"message TOTALSIZE {rec.total_size} != the entry's body size {e.body_size}")
    return rec


class DLedgerCommitLog(MappedLog):
    """The CommitLog of a store in DLedger mode (``DLedgerCommitLog`` over ``DLedgerMmapFileStore``)."""

    extra_columns = (("entryIndex", "Index"), ("entryTerm", "Term"), ("entryPos", "EntryPos"))

    def __init__(
        self, queue: MappedFileQueue, index: MappedFileQueue, home: Path, old: CommitLog | None = None
    ):
        super().__init__(queue)
        self.index_queue = index
        self.home = home  # dledger-<selfId>/
        self.old = old if old is not None and old.files else None  # commitlog/ of a switched store

    # --- the two parts of a switched store ----------------------------------------------------
    @property
    def data_files(self) -> list[MappedFile]:
        """The DLedger data files (``dledger-<selfId>/data/``)."""
        return self.queue.files

    @property
    def files(self) -> list[MappedFile]:
        """Every file of the log: the old CommitLog's (a switched store) then the data files."""
        return self.old.files + self.queue.files if self.old is not None else self.queue.files

    @property
    def min_offset(self) -> int:
        return self.files[0].from_offset if self.files else 0

    @property
    def divided(self) -> int:
        """``dividedCommitlogOffset``: where the entries start (the first data file's offset; with
        no data file, the end of the old last file; 0 without an old CommitLog)."""
        if self.queue.files:
            return self.queue.files[0].from_offset
        if self.old is not None:
            last = self.old.files[-1]
            return last.from_offset + max(last.size, self.old.file_size)
        return 0

    def is_old(self, offset: int) -> bool:
        """Whether ``offset`` lies in the old CommitLog (below ``dividedCommitlogOffset``)."""
        return self.old is not None and offset < self.divided

    def _old_records(self, from_offset: int | None, skip_corrupt: bool) -> Iterator[Record | Corruption]:
        if self.old is not None and (from_offset is None or from_offset < self.divided):
            yield from self.old.records(from_offset, skip_corrupt=skip_corrupt)

    # --- entries ------------------------------------------------------------------------------
    def _start(self, from_offset: int | None) -> tuple[int, int]:
        """(file index, position) of the first entry whose record is at or after ``from_offset``."""
        if not self.queue.files or from_offset is None or from_offset <= self.queue.min_offset:
            return 0, 0
        try:
            mf = self.queue.find(from_offset)
        except NotFoundError:
            return len(self.queue.files), 0
        buf = mf.map()
        at, target = 0, from_offset - mf.from_offset
        while file_stop(buf, at, len(buf)) is None:
            try:
                e = read_entry(buf, at, len(buf), mf)
            except EntryError:
                break
            if at + _BODY >= target:
                break
            at += e.size
        return self.queue.index_of(mf), at

    def entries(
        self, from_offset: int | None = None, *, skip_corrupt: bool = False
    ) -> Iterator[Item | Corruption]:
        """Every sound entry with its record from ``from_offset`` on, in order (see the module
        docstring for what stops it: a ``CorruptDataError``, or a ``Corruption`` with ``skip_corrupt``)."""
        first, at = self._start(from_offset)
        chain = _Chain()
        pending: Corruption | None = None  # a stop that is only an error when entries follow
        for mf in self.queue.files[first:]:
            buf = mf.map()
            limit = len(buf)
            while True:
                stop = file_stop(buf, at, limit)
                if stop is not None:
                    if stop == "zeros" and pending is None:
                        pending, resumed = _after_zeros(buf, at, limit, mf)
                        if resumed is not None:
                            at = resumed
                            continue
                    break
                problem, nxt, entry, rec = self._one(buf, at, limit, mf, chain)
                if problem is None and pending is not None:
                    if not skip_corrupt:
                        raise CorruptDataError(pending.reason, pending.file, pending.file_position)
                    yield pending
                    pending = None
                if problem is None:
                    assert entry is not None and rec is not None
                    chain.take(entry)
                    yield Item(entry, rec)
                    at = nxt
                    continue
                if not skip_corrupt:
                    raise CorruptDataError(problem.reason, problem.file, problem.file_position)
                yield problem
                chain = _Chain()  # what follows a skipped stretch starts a new chain
                if entry is not None:  # a sound entry whose record is bad: the next entry follows
                    at = nxt
                    continue
                resumed = resync(buf, at + 1, limit, mf)
                if resumed is None:
                    break
                problem.length = resumed - at
                at = resumed
            at = 0

    def _one(
        self, buf, at: int, limit: int, mf: MappedFile, chain: _Chain
    ) -> tuple[Corruption | None, int, Entry | None, Record | None]:
        """The entry at ``at``: (problem, where the next entry starts, the entry, its record)."""
        name = str(mf.path)
        try:
            e = read_entry(buf, at, limit, mf)
        except EntryError as exc:
            return (
                Corruption(name, mf.from_offset + at, limit - at, str(exc), at, "bad-entry"),
                at,
                None,
                None,
            )
        broken = chain.problem(e)
        if broken is not None:
            return Corruption(name, mf.from_offset + at, e.size, broken, at, "chain"), at, None, None
        try:
            return None, at + e.size, e, _record(buf, e, mf)
        except RecordError as exc:
            reason = f"message record of entry {e.index}: {exc}"
            problem = Corruption(name, e.body_position, e.body_size, reason, at + _BODY, "bad-record")
            return problem, at + e.size, e, None

    # --- what CommitLog answers ---------------------------------------------------------------
    def records(
        self, from_offset: int | None = None, *, skip_corrupt: bool = False
    ) -> Iterator[Record | Corruption]:
        yield from self._old_records(from_offset, skip_corrupt)
        for item in self.entries(from_offset, skip_corrupt=skip_corrupt):
            yield item.record if isinstance(item, Item) else item

    def record_extra(self, rec: Record) -> dict[str, int]:
        """The entry fields ``dump-commitlog`` shows beside a record: index, term and pos (none for
        a record of the old CommitLog)."""
        if self.is_old(rec.position):
            return {}
        e = self.entry_of(rec.position)
        return {"entryIndex": e.index, "entryTerm": e.term, "entryPos": e.pos}

    def entry_of(self, offset: int) -> Entry:
        """The entry whose record is at physical ``offset`` (``UsageError`` below the divide: a
        record of the old CommitLog has none)."""
        if self.is_old(offset):
            raise UsageError(
                f"offset {offset} lies in the old commitlog/, below dividedCommitlogOffset {self.divided}: "
                "no DLedger entry holds it"
            )
        mf = self.queue.find(offset - _BODY)
        buf = mf.map()
        try:
            return read_entry(buf, offset - _BODY - mf.from_offset, len(buf), mf)
        except EntryError as exc:
            raise CorruptDataError(str(exc), str(mf.path), offset - _BODY - mf.from_offset) from None

    def read(self, offset: int) -> Record:
        """The record at physical ``offset`` (its entry's pos + BODY_OFFSET; below the divide, the
        old CommitLog's)."""
        if self.old is not None and self.is_old(offset):
            return self.old.read(offset)
        e = self.entry_of(offset)
        mf = self.queue.find(e.pos)
        try:
            return _record(mf.map(), e, mf)
        except RecordError as exc:
            raise CorruptDataError(str(exc), e.file, e.file_position + _BODY) from None

    def store_timestamp(self, offset: int) -> int | None:
        try:
            return self.read(offset).store_timestamp
        except (NotFoundError, CorruptDataError):
            return None

    def headers(self, from_offset: int | None = None) -> Iterator[Header]:
        for rec in self.records(from_offset):
            assert isinstance(rec, Record)
            yield _header(rec)

    def header_batches(
        self, from_offset: int | None = None, hints: object = None, *, on_corrupt: OnCorrupt | None = None
    ) -> Iterator[HeaderBatch]:
        """The records as ``HeaderBatch``es, one per file (``hints`` are not needed: entries say
        where records are; the old CommitLog's, with them, first)."""
        from rmqcli.store.scan.headerscan import batch_from_headers

        if self.old is not None and (from_offset is None or from_offset < self.divided):
            yield from self.old.header_batches(from_offset, hints, on_corrupt=on_corrupt)
        run: list[Header] = []
        file = None
        for item in self.entries(from_offset, skip_corrupt=on_corrupt is not None):
            if isinstance(item, Item):
                item = item.record
            if isinstance(item, Corruption):
                assert on_corrupt is not None
                on_corrupt(item)
                continue
            if file is not None and item.file != file and run:
                yield batch_from_headers(run, run[-1].position + run[-1].total_size)
                run = []
            file = item.file
            run.append(_header(item))
        if run:
            yield batch_from_headers(run, run[-1].position + run[-1].total_size)

    def file_end(self, mf: MappedFile) -> FileEnd:
        """Where one data file's sound entries end and what follows them (blank, zeros, end, garbage);
        for an old CommitLog file, where its records end."""
        if self.old is not None and mf.from_offset < self.divided:
            return self.old.file_end(mf)
        buf = mf.map()
        limit = len(buf)
        at = 0
        while (stop := file_stop(buf, at, limit)) is None:
            try:
                at += read_entry(buf, at, limit, mf).size
            except EntryError:
                return FileEnd(mf.name, mf.from_offset, at, "garbage")
        blank = dfmt.BLANK_STRUCT.unpack_from(buf, at)[1] if stop == "blank" else None
        return FileEnd(mf.name, mf.from_offset, at, stop, blank)

    def close(self) -> None:
        super().close()
        self.index_queue.close()
        if self.old is not None:
            self.old.close()


def _header(rec: Record) -> Header:
    return Header(
        rec.position,
        rec.total_size,
        rec.queue_id,
        rec.queue_offset,
        rec.sys_flag,
        rec.store_timestamp,
        rec.topic,
    )
