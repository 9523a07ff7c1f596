"""Read CommitLog records from any physical offset, across files.

Record layout and validation: formats.md §1.2 and §1.14 (``CommitLog.checkMessageAndReturnSize``).
A BLANK record or a zero tail ends a file (§1.10); records never straddle files. Properties and
bodies are decoded only when asked for.

Every scan (``records``, ``headers``, ``header_batches``) reports what stops it short of records
that are on disk, as ``verify`` does (``rmqcli.ops.verify_commitlog``): a record that fails the
checks, zeros inside a file with valid records after them (``zero-hole``: a recovering broker
stops at the zeros and abandons what follows), and, once a later file holds a record, a file
whose data ends in zeros without a BLANK record (``missing-blank``) or that is shorter than the
distance to the next file (``missing-bytes``, e.g. an empty file). Each is a ``CorruptDataError``
naming the file and byte offset, or with ``skip_corrupt`` / ``on_corrupt`` a ``Corruption``
after which the scan goes on at the next valid record.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from formats import commitlog as fmt
from formats.records import (  # noqa: F401 - the record codec, also importable from here
    Record,
    RecordError,
    decode_record,
    format_host,
)
from rmqcli.errors import CorruptDataError, NotFoundError
from rmqcli.store.filetail import classify_tail
from rmqcli.store.mapped import MappedFile, MappedFileQueue

if TYPE_CHECKING:
    from rmqcli.store.scan.headerscan import HeaderBatch

_SIZE_MAGIC = fmt.SIZE_MAGIC_STRUCT
assert fmt.PREFIX_OFFSETS["magic_code"] == 4
_HOST_LENGTHS = {
    flags: (fmt.host_length(flags, fmt.BORNHOST_V6_FLAG), fmt.host_length(flags, fmt.STOREHOST_V6_FLAG))
    for flags in fmt.HEADER_STRUCTS
}
_MIN_RECORD_SIZE = fmt.MIN_RECORD_SIZE
_PROPS_LEN = fmt.PROPERTIES_LENGTH_STRUCT
_TOPIC_LEN = fmt.TOPIC_LENGTH_STRUCTS
# The header scan reads body_length backwards from the end of the fixed header.
_BODY_LENGTH_BACK = fmt.AFTER_STORE_HOST_STRUCT.size - fmt.AFTER_STORE_HOST_OFFSETS["body_length"]


class Header(NamedTuple):
    """What the header-only scan reads of a record."""

    position: int
    total_size: int
    queue_id: int
    queue_offset: int
    sys_flag: int
    store_timestamp: int
    topic: str


@dataclass(slots=True)
class Corruption:
    """A stretch of a file that is not a valid record (reported by ``--skip-corrupt`` scans).

    ``kind``: "corrupt" (bytes that are no record), "zero-hole" (zeros, then valid records),
    "missing-blank" (a file's data ends in zeros without a BLANK record, and a later file holds
    records), "missing-bytes" (bytes between two files that no file holds).
    """

    file: str
    position: int
    length: int
    reason: str
    file_position: int = 0
    kind: str = "corrupt"

    def error(self, not_read: str) -> CorruptDataError:
        """The one-line error of a scan that stops here; ``not_read`` says what it left unread."""
        return CorruptDataError(f"{self.reason}; {not_read}", self.file, self.file_position)


@dataclass(slots=True)
class FileEnd:
    """Where valid data ends in one CommitLog file and what follows it."""

    file: str
    from_offset: int
    data_end: int  # position within the file
    tail: str  # "blank", "zeros", "end" (file exactly full) or "garbage"
    blank_size: int | None = None


def broker_read_length(buf, pos: int, limit: int) -> int | None:
    """The length ``checkMessageAndReturnSize`` (readBody=false) computes from a record's fields.

    The broker reads each field where the previous one ends, bounded by the file's data, not by
    TOTALSIZE: a negative body or properties length reads nothing, a negative topic length or a
    read past ``limit`` fails (None), as does an unknown magic.
    """
    if pos + fmt.PREFIX_SIZE > limit:
        return None
    magic = _SIZE_MAGIC.unpack_from(buf, pos)[1]
    if magic not in fmt.MESSAGE_MAGICS:
        return None
    sys_flag = fmt.SYS_FLAG_STRUCT.unpack_from(buf, pos + fmt.PREFIX_OFFSETS["sys_flag"])[0]
    header = fmt.HEADER_STRUCTS[sys_flag & fmt.HOST_FLAGS]
    if pos + header.size > limit:
        return None
    body_len = header.unpack_from(buf, pos)[-1]
    p = pos + header.size + max(body_len, 0)
    tl_struct = _TOPIC_LEN[magic]
    if p + tl_struct.size > limit:
        return None
    topic_len = tl_struct.unpack_from(buf, p)[0]
    p += tl_struct.size + topic_len
    if topic_len < 0 or p + _PROPS_LEN.size > limit:
        return None
    props_len = _PROPS_LEN.unpack_from(buf, p)[0]
    if p + _PROPS_LEN.size + max(props_len, 0) > limit:
        return None
    return fmt.calc_msg_length(sys_flag, body_len, topic_len, props_len, magic)


class MappedLog:
    """What a log over a mapped-file queue answers alike in every layout: its files, their size and
    its first offset (``CommitLog``; ``DLedgerCommitLog`` of ``rmqcli.store.read.dledger``)."""

    def __init__(self, queue: MappedFileQueue):
        self.queue = queue

    @property
    def files(self) -> list[MappedFile]:
        return self.queue.files

    @property
    def file_size(self) -> int:
        return self.queue.file_size

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    def file_end(self, mf: MappedFile) -> FileEnd:
        raise NotImplementedError

    def max_offset(self) -> int:
        """Global offset just past the last valid record (the broker's maxPhyOffset)."""
        for mf in reversed(self.files):
            end = self.file_end(mf)
            if end.data_end > 0:
                return mf.from_offset + end.data_end
        return self.min_offset

    def close(self) -> None:
        self.queue.close()


class CommitLog(MappedLog):
    """The CommitLog of a store: a mapped-file queue of record files."""

    # (field, title) that ``record_extra`` adds to a record's row (DLedger: the entry's fields)
    extra_columns: tuple[tuple[str, str], ...] = ()

    # --- positioning --------------------------------------------------------------------------
    def _start(self, from_offset: int | None) -> tuple[int, int]:
        """(file index, position in file) of the first record at or after ``from_offset``."""
        if not self.files:
            return 0, 0
        if from_offset is None or from_offset <= self.min_offset:
            return 0, 0
        try:
            mf = self.queue.find(from_offset)
        except NotFoundError:
            if from_offset >= self.files[-1].from_offset + self.file_size:
                return len(self.files), 0
            raise
        index = self.queue.index_of(mf)
        buf = mf.map()
        target = from_offset - mf.from_offset
        try:
            rec = decode_record(buf, target, len(buf))
            if rec.physical_offset == from_offset:
                return index, target
        except RecordError:
            pass
        pos = 0
        while pos < target:
            try:
                rec = decode_record(buf, pos, len(buf))
            except RecordError:
                return index + 1, 0  # nothing readable between here and the target
            pos += rec.total_size
        return index, pos

    # --- full records -------------------------------------------------------------------------
    def records(
        self, from_offset: int | None = None, *, skip_corrupt: bool = False
    ) -> Iterator[Record | Corruption]:
        """Every record from the first at or after ``from_offset``, in file order.

        What stops the scan short of records on disk (see the module docstring) raises
        ``CorruptDataError`` naming the file and offset; with ``skip_corrupt`` a ``Corruption``
        is yielded instead and the scan resumes at the next position that holds a valid record
        whose PHYSICALOFFSET field matches its position.
        """
        index, pos = self._start(from_offset)
        chain = FileChain(self.files)
        for mf in self.files[index:]:
            chain.start(mf)
            yield from self._file_records(mf, pos, skip_corrupt, chain)
            pos = 0

    def _file_records(
        self, mf: MappedFile, pos: int, skip_corrupt: bool, chain: FileChain
    ) -> Iterator[Record | Corruption]:
        buf = mf.map()
        limit = len(buf)
        name = str(mf.path)
        while True:
            while pos < limit and classify_tail(buf, pos, limit)[0] == "garbage":
                try:
                    rec = decode_record(buf, pos, limit, name, mf.from_offset)
                except RecordError:
                    break
                earlier = chain.take()
                if earlier is not None:
                    if not skip_corrupt:
                        raise FileChain.error(earlier, mf)
                    yield earlier
                yield rec
                pos += rec.total_size
            stop = stop_at(mf, buf, pos, limit)
            if stop.problem is not None:
                if not skip_corrupt:
                    raise _stop_error(stop.problem, buf, mf)
                yield stop.problem
            if stop.resume is None:
                short = chain.end(mf, pos, stop.zero_tail)
                if short is not None:
                    if not skip_corrupt:
                        raise chain.end_error(short, mf)
                    yield short
                return
            pos = stop.resume

    def record_extra(self, rec: Record) -> dict[str, int]:
        """Fields of the log's own framing beside a record (none here; ``DLedgerCommitLog``: its entry's)."""
        return {}

    def read(self, offset: int) -> Record:
        """The record at physical ``offset``."""
        mf = self.queue.find(offset)
        buf = mf.map()
        try:
            return decode_record(buf, offset - mf.from_offset, len(buf), str(mf.path), mf.from_offset)
        except RecordError as exc:
            raise CorruptDataError(str(exc), str(mf.path), offset - mf.from_offset) from None

    def store_timestamp(self, offset: int) -> int | None:
        """The STORETIMESTAMP of the record at ``offset`` from its header alone; None when no file
        holds the offset or no record (magic code) starts there."""
        try:
            mf = self.queue.find(offset)
        except NotFoundError:
            return None
        buf = mf.map()
        pos = offset - mf.from_offset
        if pos + fmt.PREFIX_SIZE > len(buf):
            return None
        _size, magic, _crc, _queue, _flag, _qoff, _phys, sys_flag = fmt.PREFIX_STRUCT.unpack_from(buf, pos)[
            :8
        ]
        if magic not in (fmt.MAGIC_V1, fmt.MAGIC_V2):
            return None
        at = pos + fmt.PREFIX_SIZE + fmt.host_length(sys_flag, fmt.BORNHOST_V6_FLAG)
        if at + fmt.STORE_TIMESTAMP_STRUCT.size > len(buf):
            return None
        return fmt.STORE_TIMESTAMP_STRUCT.unpack_from(buf, at)[0]

    # --- header-only scan ---------------------------------------------------------------------
    def headers(self, from_offset: int | None = None) -> Iterator[Header]:
        """A fast scan that reads only what ``stats`` needs; stops at corruption like ``records``."""
        index, pos = self._start(from_offset)
        chain = FileChain(self.files)
        for mf in self.files[index:]:
            chain.start(mf)
            buf = mf.map()
            limit = len(buf)
            while True:
                run, pos = self._header_run(mf, buf, pos, limit)
                if run:
                    earlier = chain.take()
                    if earlier is not None:
                        raise FileChain.error(earlier, mf)
                yield from run
                stop = stop_at(mf, buf, pos, limit)
                if stop.problem is not None:
                    raise _stop_error(stop.problem, buf, mf)
                if stop.resume is None:
                    short = chain.end(mf, pos, stop.zero_tail)
                    if short is not None:
                        raise chain.end_error(short, mf)
                    break
                pos = stop.resume
            pos = 0

    def _header_run(self, mf: MappedFile, buf, pos: int, limit: int) -> tuple[list[Header], int]:
        """The headers of the valid records from ``pos`` and where they stop (``stop_at`` says why)."""
        base = mf.from_offset
        unpack_prefix = fmt.PREFIX_STRUCT.unpack_from
        unpack_body_len = fmt.BODY_LENGTH_STRUCT.unpack_from
        unpack_store_ts = fmt.STORE_TIMESTAMP_STRUCT.unpack_from
        unpack_props_len = _PROPS_LEN.unpack_from
        unpack_topic_len_v2 = _TOPIC_LEN[fmt.MAGIC_V2].unpack_from
        host_lengths = _HOST_LENGTHS
        host_mask = fmt.HOST_FLAGS
        v1, v2 = fmt.MAGIC_V1, fmt.MAGIC_V2
        tl_v1, tl_v2 = fmt.topic_length_size(v1), fmt.topic_length_size(v2)
        max_v1 = fmt.MAX_TOPIC_LENGTH_V1
        props_len_size = _PROPS_LEN.size
        topics: dict[bytes, str] = {}
        prefix_size = fmt.PREFIX_SIZE
        tail_fixed = fmt.STORE_TIMESTAMP_STRUCT.size + fmt.AFTER_STORE_HOST_STRUCT.size
        body_back = _BODY_LENGTH_BACK
        run: list[Header] = []
        append = run.append
        while pos + prefix_size <= limit:  # a shorter tail can only be a BLANK or zeros
            total, magic, _, queue_id, _, queue_offset, _, sys_flag, _ = unpack_prefix(buf, pos)
            if magic == v1:
                tl_size = tl_v1
            elif magic == v2:
                tl_size = tl_v2
            else:
                break  # BLANK, zeros or corruption: ``stop_at`` decides
            if total > limit - pos or total < _MIN_RECORD_SIZE:
                break
            born_len, store_len = host_lengths[sys_flag & host_mask]
            store_ts = unpack_store_ts(buf, pos + prefix_size + born_len)[0]
            p = pos + prefix_size + born_len + store_len + tail_fixed
            body_len = unpack_body_len(buf, p - body_back)[0]
            p += body_len
            if body_len < 0 or p + tl_size + props_len_size > pos + total:
                break
            if tl_size == tl_v1:
                topic_len = buf[p]
                if topic_len > max_v1:
                    break
            else:
                topic_len = unpack_topic_len_v2(buf, p)[0]
            p += tl_size
            raw_topic = buf[p : p + topic_len]
            p += topic_len
            props_len = unpack_props_len(buf, p)[0]
            if p + props_len_size + (props_len if props_len > 0 else 0) != pos + total:
                break
            topic = topics.get(raw_topic)
            if topic is None:
                try:
                    topic = topics[raw_topic] = raw_topic.decode("utf-8")
                except UnicodeDecodeError:
                    break
            append(Header(base + pos, total, queue_id, queue_offset, sys_flag, store_ts, topic))
            pos += total
        return run, pos

    def header_batches(
        self,
        from_offset: int | None = None,
        hints=None,
        *,
        on_corrupt: Callable[[Corruption], None] | None = None,
    ) -> Iterator[HeaderBatch]:
        """The header-only scan as ``HeaderBatch``es of arrays, one per run of valid records
        (a whole file when it is clean; vectorised when possible).

        ``hints``: a sorted numpy array of offsets where records start (``Store.record_offsets``).
        What stops the scan short of records on disk raises ``CorruptDataError``; with
        ``on_corrupt`` it is passed there instead and the scan goes on at the next valid record.
        """
        from rmqcli.store.scan import headerscan

        def report(problem: Corruption, error: CorruptDataError) -> None:
            if on_corrupt is None:
                raise error
            on_corrupt(problem)

        index, pos = self._start(from_offset)
        chain = FileChain(self.files)
        for mf in self.files[index:]:
            chain.start(mf)
            buf = mf.map(whole=True)
            limit = len(buf)
            while True:
                batch = headerscan.scan_file(buf, pos, mf.from_offset, hints)
                if batch is None:
                    run, end = self._header_run(mf, buf, pos, limit)
                    batch = headerscan.batch_from_headers(run, end)
                if len(batch):
                    earlier = chain.take()
                    if earlier is not None:
                        report(earlier, FileChain.error(earlier, mf))
                    yield batch
                stop = stop_at(mf, buf, batch.end, limit)
                if stop.problem is not None:
                    report(stop.problem, _stop_error(stop.problem, buf, mf))
                if stop.resume is None:
                    short = chain.end(mf, batch.end, stop.zero_tail)
                    if short is not None:
                        report(short, chain.end_error(short, mf))
                    break
                pos = stop.resume
            pos = 0

    # --- file ends ----------------------------------------------------------------------------
    def file_end(self, mf: MappedFile) -> FileEnd:
        """Walk one file's records and report where its valid data ends."""
        buf = mf.map()
        limit = len(buf)
        pos = 0
        while pos < limit:
            tail, _ = classify_tail(buf, pos, limit)
            if tail in ("blank", "zeros"):
                break
            try:
                pos += decode_record(buf, pos, limit).total_size
            except RecordError:
                break
        tail, blank = classify_tail(buf, pos, limit)
        return FileEnd(mf.name, mf.from_offset, pos, tail, blank)


def resync(buf, start: int, limit: int, file_from: int) -> int:
    """The next position at or after ``start`` holding a valid record at its own offset."""
    needles = [m.to_bytes(4, "big", signed=True) for m in fmt.MESSAGE_MAGICS]
    pos = start
    while True:
        hits = [h for h in (buf.find(n, pos + 4, limit) for n in needles) if h >= 0]
        if not hits:
            return limit
        candidate = min(hits) - 4
        try:
            rec = decode_record(buf, candidate, limit)
            if rec.physical_offset == file_from + candidate:
                return candidate
        except RecordError:
            pass
        pos = candidate + 1


_HOLE_CHUNK = 1 << 24  # zeros are checked this many bytes at a time


def data_regions(path: Path | None, start: int, limit: int) -> list[tuple[int, int]]:
    """The stretches of ``[start, limit)`` of the file at ``path`` that may hold non-zero bytes.

    A CommitLog file is created sparse (``RandomAccessFile.setLength``), so what follows the last
    record is mostly a hole: ``SEEK_DATA``/``SEEK_HOLE`` skip it without reading a page. The whole
    range when the filesystem cannot tell (or ``path`` is no local file).
    """
    whole = [(start, limit)] if start < limit else []
    if path is None or not hasattr(os, "SEEK_DATA"):
        return whole
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return whole
    regions = []
    try:
        pos = start
        while pos < limit:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # a hole up to the end of the file
                    break
                return whole
            if data >= limit:
                break
            pos = min(os.lseek(fd, data, os.SEEK_HOLE), limit)
            regions.append((data, pos))
    finally:
        os.close(fd)
    return regions


def first_nonzero(buf, start: int, limit: int, path: Path | None = None) -> int | None:
    """The position of the first non-zero byte of ``buf[start:limit]`` (``None``: all zeros);
    ``path``: the file ``buf`` maps, whose holes are skipped (``data_regions``)."""
    import numpy as np

    arr = np.frombuffer(buf, dtype=np.uint8)
    for lo, hi in data_regions(path, start, limit):
        pos = lo
        while pos < hi:
            chunk = arr[pos : min(pos + _HOLE_CHUNK, hi)]
            if chunk.any():
                return pos + int(np.argmax(chunk != 0))
            pos += len(chunk)
    return None


def hole_end(buf, pos: int, limit: int, file_from: int, path: Path | None = None) -> int | None:
    """Where valid records resume after the zeros at ``pos`` (``None``: none follow in the file).

    The search ``verify`` makes (``zero-hole``): the first non-zero byte, then ``resync`` from one
    smallest record before it (a TOTALSIZE begins with zero bytes).
    """
    q = first_nonzero(buf, pos, limit, path)
    if q is None:
        return None
    nxt = resync(buf, max(q - _MIN_RECORD_SIZE, pos), limit, file_from)
    return nxt if nxt < limit else None


class Stop(NamedTuple):
    """What ends a run of valid records in a file."""

    problem: Corruption | None  # None: a BLANK record, the file's end, or zeros to the end
    resume: int | None  # where valid records resume in the file (None: the file is done)
    zero_tail: bool  # the data ends in zeros before the end of the file (no BLANK record)


def stop_at(mf: MappedFile, buf, pos: int, limit: int) -> Stop:
    """Why a run of valid records stops at ``pos`` of ``mf`` and where records resume."""
    tail, _ = classify_tail(buf, pos, limit)
    if tail in ("blank", "end"):
        return Stop(None, None, False)
    name = str(mf.path)
    if tail == "zeros":
        nxt = hole_end(buf, pos, limit, mf.from_offset, mf.path)
        if nxt is None:
            return Stop(None, None, True)
        if nxt == pos:  # a writer filled the zeros while they were read (a live store): read again
            return Stop(None, pos, False)
        reason = f"zeros from here to byte {nxt}, then valid records again (recovery stops at the zeros)"
        return Stop(Corruption(name, mf.from_offset + pos, nxt - pos, reason, pos, "zero-hole"), nxt, False)
    try:
        decode_record(buf, pos, limit)
        reason = "record rejected by the header scan"
    except RecordError as exc:
        reason = str(exc)
    nxt = resync(buf, pos + 1, limit, mf.from_offset)
    problem = Corruption(name, mf.from_offset + pos, nxt - pos, reason, pos)
    return Stop(problem, nxt if nxt < limit else None, False)


def _stop_error(problem: Corruption, buf, mf: MappedFile) -> CorruptDataError:
    """The error of a scan that stops at ``problem`` inside ``mf`` (a hole names what it left)."""
    if problem.kind != "zero-hole":
        return CorruptDataError(problem.reason, problem.file, problem.file_position)
    from rmqcli.store.scan import headerscan

    resume = problem.file_position + problem.length
    after = headerscan.scan_records(buf, resume, mf.from_offset)
    return problem.error(
        f"{len(after)} record(s) ({after.end - resume} bytes) after the hole in this file, and the files "
        "after it, were not read (--skip-corrupt reads past the hole)"
    )


class FileChain:
    """Problems between files: a file shorter than the others is reported where its data ends;
    the others are kept when a file ends short of the next and reported when a later record is read.

    Every file must be as large as the others (``MappedFileQueue.load`` refuses a file of another
    size) and reach the next one's start; a file whose data ends in zeros must end in a BLANK
    record once the CommitLog has moved on to the next file (``CommitLog.doAppend``; formats.md
    §1.10).
    """

    def __init__(self, files: list[MappedFile]) -> None:
        self.size = max((f.size for f in files), default=0)
        self.last = files[-1] if files else None
        self.pending: Corruption | None = None
        self.prev: MappedFile | None = None

    def start(self, mf: MappedFile) -> None:
        prev = self.prev
        if prev is None or self.pending is not None or prev.size < self.size:
            return
        end = prev.from_offset + prev.size
        if end < mf.from_offset:
            reason = (
                f"no file holds the {mf.from_offset - end} bytes from here to the next file "
                f"({mf.name}): the records there are missing"
            )
            self.pending = Corruption(
                str(prev.path), end, mf.from_offset - end, reason, prev.size, "missing-bytes"
            )

    def end(self, mf: MappedFile, data_end: int, zero_tail: bool) -> Corruption | None:
        """Note how ``mf``'s data ends; a file shorter than the others is returned as a problem."""
        self.prev = mf
        if mf.size == 0 == self.size:  # no file to compare with: still, a broker creates them full size
            reason = (
                "file is empty (0 bytes): a broker creates every CommitLog file at its full size, so the "
                "records it held are missing (the broker refuses to load a file of the wrong size)"
            )
            return Corruption(str(mf.path), mf.from_offset, 0, reason, 0, "missing-bytes")
        if mf.size < self.size:
            lost = self.size - mf.size
            reason = (
                f"file is {mf.size} bytes, {self.size} expected (the size of the other files): its last "
                f"{lost} bytes are missing (the broker refuses to load a file of the wrong size)"
            )
            return Corruption(str(mf.path), mf.from_offset + mf.size, lost, reason, mf.size, "missing-bytes")
        if zero_tail and self.pending is None:
            reason = (
                "data ends here in zeros without a BLANK record, yet a later file holds records: the end "
                "of this file was lost (recovery would truncate the CommitLog here)"
            )
            self.pending = Corruption(
                str(mf.path), mf.from_offset + data_end, mf.size - data_end, reason, data_end, "missing-blank"
            )
        return None

    def take(self) -> Corruption | None:
        """The problem to report before the record just read (once)."""
        problem, self.pending = self.pending, None
        return problem

    @staticmethod
    def error(problem: Corruption, mf: MappedFile) -> CorruptDataError:
        """The error of a scan that stops at ``problem`` on reaching the records of ``mf``."""
        return problem.error(f"the records after it (from {mf.name}) were not read")

    def end_error(self, problem: Corruption, mf: MappedFile) -> CorruptDataError:
        """The error of a scan that stops at the end of ``mf`` (a file shorter than the others)."""
        if self.last is None or mf.from_offset >= self.last.from_offset:
            return CorruptDataError(problem.reason, problem.file, problem.file_position)
        return problem.error("the files after it were not read")
