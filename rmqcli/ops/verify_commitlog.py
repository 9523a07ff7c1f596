"""CommitLog verification: every record checked as ``CommitLog.checkMessageAndReturnSize`` does.

Per file, the records are read by the shared bulk scan (``headerscan.scan_records``, with the
consume queues' offsets as hints): every fixed field and every topic and properties block is
read and checked at once with numpy (magic, size bounds, field lengths, recomputed length);
PHYSICALOFFSET is compared in bulk, body CRCs are computed (``bodycrc``) over memoryview slices in one tight
loop (only for ``bodyLen > 0``, as recovery does with ``checkCRCOnRecover``) with ISA-L's
``crc32`` (the CRC-32 of ``java.util.zip.CRC32`` and ``zlib.crc32``, about 4x faster on 1 KiB bodies),
and the tags codes and index keys come from ``propscan``'s vectorised property lookup and Java
hashes. Only where the bulk checks find a bad record is it decoded alone (``decode_record``) for
an exact message; the scan then resyncs and goes on. Files must end in a BLANK record or a zero
tail (formats.md §1.10).

The files are independent until their ends are compared, so a store of several files is scanned
by forked worker processes, a file each at a time (``_scan_alone``); the parent takes their
results in file order (``_absorb``) and ends with what one process scanning them in turn would
have built and reported, problem for problem.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from formats import commitlog as fmt
from rmqcli.memory import give_back_free_memory
from rmqcli.ops.verify_common import Collector
from rmqcli.ops.verify_table import SYS_FLAG_BITS, FileInfo, KeyColumns, Parts, RecordTable
from rmqcli.store.mapped import MappedFile
from rmqcli.store.naming import offset_to_name, topic_dir_problem
from rmqcli.store.read.commitlog import RecordError, classify_tail, decode_record, first_nonzero, resync
from rmqcli.store.scan import headerscan, propscan
from rmqcli.store.scan.bodycrc import check_body_crcs
from rmqcli.store.scan.headerscan import HeaderBatch

_MIN_RECORD = fmt.calc_msg_length(0, 0, 0, 0)
_BLANK_BYTES = fmt.END_FILE_MIN_BLANK_LENGTH
_WANTED = (fmt.PROPERTY_TAGS, fmt.PROPERTY_KEYS, fmt.PROPERTY_UNIQ_KEY)
_WINDOW = 8 * 1024 * 1024  # bytes of a CommitLog file scanned at once (a larger record: the rest at once)

# the files are scanned by worker processes when there are at least this many with data, holding at
# least this many bytes, and more than one worker (WORKERS: None for the CPUs this process may use;
# 1 scans in this process alone)
PARALLEL_MIN_FILES = 2
PARALLEL_MIN_BYTES = 64 * 1024 * 1024
WORKERS: int | None = None


class CommitLogVerifier:
    """Scans the CommitLog of a store once and builds the ``RecordTable`` the other checks join on."""

    def __init__(
        self,
        files: list[MappedFile],
        file_size: int,
        problems: Collector,
        *,
        crc: bool = True,
        delay_millis: list[int] | None = None,
        hints: np.ndarray | None = None,
        progress: Callable[[int], None] | None = None,
        recheck_from: int | None = 0,
        salvage: bool = True,
    ):
        self.files = files
        self.file_size = file_size
        self.p = problems
        self.crc = crc
        self.delay_millis = delay_millis or fmt.DEFAULT_DELAY_MILLIS
        self.hints = hints
        self.progress = progress
        self.recheck_from = recheck_from  # where recovery starts re-checking CRCs (None: never)
        self.salvage = salvage  # `rmq recover --salvage` takes this store (not a DLedger one)
        self.parts = Parts()
        self.keys = KeyColumns()
        self.crc_checked = 0
        self.max_store_timestamp: int | None = None

    # --- files ------------------------------------------------------------------------------
    def check_files(self) -> None:
        """Sizes equal to the configured size, names continuous (``MappedFileQueue.load``/``checkSelf``)."""
        prev: MappedFile | None = None
        for mf in self.files:
            if mf.size != self.file_size:
                self.p.error(
                    "commitlog-file-size",
                    mf.path,
                    None,
                    f"file is {mf.size} bytes, expected {self.file_size}: the broker refuses to load it",
                )
            if self.file_size and mf.from_offset % self.file_size:
                self.p.error(
                    "commitlog-file-name",
                    mf.path,
                    None,
                    f"start offset {mf.from_offset} is not a multiple of the file size {self.file_size}",
                )
            if prev is not None and mf.from_offset != prev.from_offset + self.file_size:
                expected = prev.from_offset + self.file_size
                kind = "gap" if mf.from_offset > expected else "overlap"
                self.p.error(
                    "commitlog-file-gap",
                    mf.path,
                    None,
                    f"{kind}: previous file {prev.name} ends at {expected}, this one starts at "
                    f"{mf.from_offset} (expected {offset_to_name(expected)})",
                )
            prev = mf

    # --- records ----------------------------------------------------------------------------
    def scan(self) -> RecordTable:
        self.check_files()
        infos = [FileInfo(mf) for mf in self.files]
        workers = self._workers()
        if workers > 1:
            self._scan_parallel(infos, workers)
        else:
            for info in infos:
                if info.mapped.size:
                    self._scan_file(info)
                    give_back_free_memory()
                self._advance(info)
        self._check_file_ends(infos)
        return self._table(infos)

    def _advance(self, info: FileInfo) -> None:
        if self.progress is not None:
            self.progress(info.mapped.from_offset + info.mapped.size)

    def _workers(self) -> int:
        """How many worker processes scan the files (1: this process alone)."""
        sizes = [mf.size for mf in self.files if mf.size]
        if len(sizes) < max(PARALLEL_MIN_FILES, 2) or sum(sizes) < PARALLEL_MIN_BYTES:
            return 1
        if WORKERS is not None:
            cpus = WORKERS
        elif hasattr(os, "sched_getaffinity"):
            cpus = len(os.sched_getaffinity(0))
        else:
            cpus = os.cpu_count() or 1
        if cpus < 2 or "fork" not in multiprocessing.get_all_start_methods():
            return 1
        return min(cpus, len(sizes))

    def _scan_parallel(self, infos: list[FileInfo], workers: int) -> None:
        """Scan the files with data in ``workers`` forked processes and take their results in file
        order (the progress advancing as each is taken)."""
        global _ACTIVE
        _ACTIVE = self  # the forked workers find the verifier here (nothing is pickled to them)
        pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("fork"), initializer=_worker_init
        )
        try:
            with_data = [i for i, info in enumerate(infos) if info.mapped.size]
            results = pool.map(_scan_in_worker, with_data)
            for info in infos:
                if info.mapped.size:
                    self._absorb(info, next(results))
                self._advance(info)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            _ACTIVE = None

    def _scan_alone(self, index: int) -> _FileResult:
        """In a worker: scan file ``index`` with fresh state of its own (problems, columns, keys)."""
        alone = copy.copy(self)
        alone.p = Collector(self.p.root, self.p.limit)
        alone.parts = Parts()
        alone.keys = _KeyList()
        alone.crc_checked = 0
        alone.max_store_timestamp = None
        alone.progress = None
        info = FileInfo(self.files[index])
        alone._scan_file(info)
        key_rec, key_hash = alone.keys.joined()
        result = _FileResult(
            data_end=info.data_end,
            tail=info.tail,
            records=info.records,
            first_store_timestamp=info.first_store_timestamp,
            problems=alone.p,
            cols=alone.parts.cols,
            topics=list(alone.parts.topic_ids),
            count=alone.parts.count,
            key_rec=key_rec,
            key_hash=key_hash,
            crc_checked=alone.crc_checked,
            max_store_timestamp=alone.max_store_timestamp,
        )
        info.mapped.close()
        give_back_free_memory()
        return result

    def _absorb(self, info: FileInfo, result: _FileResult) -> None:
        """Take a worker's result for ``info`` as if this process had scanned the file next: its
        problems after the earlier files', its topics numbered on, its rows and keys appended."""
        info.data_end = result.data_end
        info.tail = result.tail
        info.records = result.records
        info.first_store_timestamp = result.first_store_timestamp
        self.p.absorb(result.problems)
        parts = self.parts
        ids = np.array([parts.topic_id(t) for t in result.topics], dtype=np.int64)
        for name, pieces in result.cols.items():
            for piece in pieces:
                parts.add(**{name: ids[piece] if name == "topic_id" else piece})
        result.key_rec += parts.count  # the worker's rows, counted on from the earlier files'
        self.keys.append(result.key_rec, result.key_hash)
        parts.count += result.count
        self.crc_checked += result.crc_checked
        latest = result.max_store_timestamp
        if latest is not None and (self.max_store_timestamp is None or latest > self.max_store_timestamp):
            self.max_store_timestamp = latest

    def _scan_file(self, info: FileInfo) -> None:
        """Scan one file window by window (``_WINDOW`` bytes): the records wholly inside a window
        are kept and the window's pages are released before the next one, so a file of any size
        costs one window of batch columns and of mapped pages. Where a window holds no whole
        record (the end of the data, a bad record, a record larger than a window) the scan goes
        on over the rest of the file at once, as it always judges the end of the data."""
        mf = info.mapped
        buf = mf.map(whole=True)
        limit = len(buf)
        arr = np.frombuffer(buf, dtype=np.uint8)
        view = memoryview(buf)
        pos = released = 0
        while pos < limit:
            end = pos + _WINDOW
            if end < limit:
                batch = headerscan.scan_records(view[:end], pos, mf.from_offset, self.hints, properties=True)
                if batch.end > pos:  # what follows the window's last whole record is judged later
                    self._keep(info, buf, batch)
                    pos = batch.end
                    released = mf.release(released, pos)
                    continue
            batch = headerscan.scan_records(buf, pos, mf.from_offset, self.hints, properties=True)
            if len(batch):
                self._keep(info, buf, batch)
            if batch.bad is not None:
                pos = self._report_bad(info, buf, batch.bad, limit)
            else:
                pos = self._file_tail(info, arr, buf, batch.end, limit)
            released = mf.release(released, pos)
        mf.release(released)

    def _keep(self, info: FileInfo, buf, batch: HeaderBatch) -> None:
        """Per-record checks on valid records (CRC, PHYSICALOFFSET, topic and properties) and their
        columns."""
        mf = info.mapped
        n = len(batch)
        file_pos = batch.position - mf.from_offset
        wrong = np.flatnonzero(batch.physical_offset != batch.position)
        for i in wrong.tolist():
            self.p.warning(
                "physical-offset-mismatch",
                mf.path,
                int(file_pos[i]),
                f"PHYSICALOFFSET field is {int(batch.physical_offset[i])}, the record is at "
                f"{int(batch.position[i])}",
            )
        if self.crc:
            self._crc(mf, buf, batch, file_pos)
        for i in np.flatnonzero(np.isin(batch.topic_index, batch.bad_topics or [])).tolist():
            self.p.warning(
                "bad-topic",
                mf.path,
                int(file_pos[i]),
                "topic is not valid UTF-8 (the broker decodes it with replacement characters)",
            )
        self._unsafe_topics(mf, batch, file_pos)
        local_ids = np.array([self.parts.topic_id(t) for t in batch.topics], dtype=np.int64)
        tags, key_rec, key_hash = self._properties(mf, batch, file_pos)
        offset = self.parts.count
        self.parts.add(
            position=batch.position,
            total_size=batch.total_size,
            queue_id=batch.queue_id,
            queue_offset=batch.queue_offset,
            sys_flag=batch.sys_flag & SYS_FLAG_BITS,
            topic_id=local_ids[batch.topic_index],
            tags_code=tags,
        )
        self.keys.append(key_rec + offset, key_hash)
        self.parts.count += n
        info.records += n
        if info.first_store_timestamp is None:
            info.first_store_timestamp = int(batch.store_timestamp[0])
        latest = int(batch.store_timestamp.max())
        if self.max_store_timestamp is None or latest > self.max_store_timestamp:
            self.max_store_timestamp = latest

    def _unsafe_topics(self, mf: MappedFile, batch: HeaderBatch, file_pos: np.ndarray) -> None:
        """Records a broker would dispatch to a queue whose directory its topic cannot name
        (``naming.topic_dir_problem``): ``..``, a ``/``, a NUL... lead outside the store or fail."""
        reasons = {i: topic_dir_problem(t) for i, t in enumerate(batch.topics)}
        bad = [i for i, r in reasons.items() if r is not None]
        if not bad:
            return
        tran = batch.sys_flag & fmt.TRANSACTION_MASK
        queued = (tran == fmt.TransactionType.NOT_TYPE) | (tran == fmt.TransactionType.COMMIT)
        for i in np.flatnonzero(queued & np.isin(batch.topic_index, bad)).tolist():
            t = int(batch.topic_index[i])
            self.p.error(
                "unsafe-topic",
                mf.path,
                int(file_pos[i]),
                f"topic {batch.topics[t]!r} cannot name a consume-queue directory: {reasons[t]}; the "
                "record is in no consume queue (a broker would put its queue outside consumequeue/ or fail)",
            )

    def _crc(self, mf: MappedFile, buf, batch: HeaderBatch, file_pos: np.ndarray) -> None:
        """``UtilAll.crc32`` of every non-empty body against BODYCRC (``checkCRCOnRecover``)."""
        crcs = check_body_crcs(buf, batch)
        self.crc_checked += len(crcs.rows)
        for i in crcs.bad.tolist():
            at = int(file_pos[crcs.rows[i]])
            if self.recheck_from is not None and mf.from_offset + at >= self.recheck_from:
                fate = "recovery (checkCRCOnRecover) stops here and truncates the CommitLog"
            else:
                why = "does not re-check this file" if self.recheck_from is not None else "checks no CRC"
                fate = f"the broker's recovery {why}: it serves this record with its bad body" + (
                    "; `rmq recover --salvage --yes` tombstones it" if self.salvage else ""
                )
            self.p.error(
                "crc-mismatch",
                mf.path,
                at,
                f"body CRC {int(crcs.computed[i])} != stored BODYCRC {int(crcs.stored[i])}: {fate}",
            )

    def _properties(
        self, mf: MappedFile, batch: HeaderBatch, file_pos: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tags codes and index keys (record, hash) of the records, from the bulk property lookup."""
        names = _WANTED + ((fmt.PROPERTY_DELAY,) if fmt.SCHEDULE_TOPIC in batch.topics else ())
        assert batch.physical_offset is not None and batch.tails is not None
        scan = propscan.Scan(batch, batch.physical_offset, batch.tails.data, propscan.locate(batch, names))
        for i, reason, at in propscan.bad_utf8(batch):
            self.p.warning(
                "bad-properties",
                mf.path,
                int(file_pos[i]),
                f"properties are not valid UTF-8 ({reason} at byte {at}); the broker "
                "decodes them with replacement characters",
            )
        rows = np.arange(len(batch), dtype=np.int64)
        tags = propscan.tags_codes(scan, rows, self.delay_millis)  # formats.md §2.2
        key_rec, key_hash = propscan.index_keys(scan, rows)  # formats.md §3.2
        return tags, key_rec, key_hash

    def _report_bad(self, info: FileInfo, buf, pos: int, limit: int) -> int:
        """Report the record at ``pos`` that failed the bulk checks; return where scanning resumes."""
        mf = info.mapped
        try:
            decode_record(buf, pos, limit)
            reason = "record rejected"  # the bulk checks and decode_record disagree; still bad
        except RecordError as exc:
            reason = str(exc)
        size_magic = fmt.SIZE_MAGIC_STRUCT
        total, magic = size_magic.unpack_from(buf, pos) if pos + size_magic.size <= limit else (0, 0)
        if pos + size_magic.size > limit and pos + fmt.TOTAL_SIZE_STRUCT.size <= limit:
            total = fmt.TOTAL_SIZE_STRUCT.unpack_from(buf, pos)[0]
        nxt = resync(buf, pos + 1, limit, mf.from_offset)
        if magic in fmt.MESSAGE_MAGICS and total > limit - pos:
            kind = "truncated-record"
            reason = f"TOTALSIZE {total} runs past the end of the file ({limit - pos} bytes left)"
        elif magic in fmt.MESSAGE_MAGICS and nxt >= limit and _zero_tail_within(buf, pos, total, limit):
            kind = "torn-record"
            reason = f"partially written record ({reason}): its end is zeros"
        elif magic not in fmt.MESSAGE_MAGICS:
            kind = "bad-magic"
        elif "total size" in reason:
            kind = "bad-size"
        else:
            kind = "bad-length"
        self.p.error(kind, mf.path, pos, f"{reason}; recovery stops here and truncates the CommitLog")
        if nxt < limit:
            self.p.warning(
                "resync",
                mf.path,
                nxt,
                f"valid records resume here after {nxt - pos} unreadable bytes (the broker would not "
                "read them)",
            )
        info.tail = "garbage"
        return nxt

    def _file_tail(self, info: FileInfo, arr: np.ndarray, buf, end: int, limit: int) -> int:
        """What follows the last record: a BLANK reaching the file end, zeros, or the file end.

        Returns where scanning goes on (``limit`` when the file is done).
        """
        mf = info.mapped
        tail, blank_size = classify_tail(buf, end, limit)
        info.data_end = end
        info.tail = tail
        if tail == "blank":
            if blank_size != limit - end:
                self.p.warning(
                    "bad-blank",
                    mf.path,
                    end,
                    f"BLANK record size {blank_size} != the {limit - end} bytes left in the file",
                )
            return limit
        if tail == "end":
            return limit
        if tail == "garbage":
            return self._report_bad(info, buf, end, limit)
        q = first_nonzero(buf, end, limit, mf.path)  # the search the other scans make (holes skipped)
        if q is None:
            return limit
        nxt = resync(buf, max(q - _MIN_RECORD, end), limit, mf.from_offset)
        if nxt < limit:
            self.p.error(
                "zero-hole",
                mf.path,
                end,
                f"zeros from here to {nxt}, then valid records: recovery stops at the zeros "
                "and abandons everything after",
            )
            info.tail = "garbage"
            return nxt
        self.p.warning(
            "stale-data",
            mf.path,
            q,
            f"non-zero bytes after the data end ({end}): stale data left by a truncation",
        )
        return limit

    def _check_file_ends(self, infos: list[FileInfo]) -> None:
        """A file that is not the last with data must end in a BLANK (formats.md §1.10)."""
        with_data = [i for i, info in enumerate(infos) if info.records]
        last = with_data[-1] if with_data else -1
        for i, info in enumerate(infos):
            mf = info.mapped
            if i < last and info.tail in ("zeros",):
                self.p.error(
                    "missing-blank",
                    mf.path,
                    info.data_end,
                    "data ends here without a BLANK record although later files hold records: "
                    "recovery would truncate the CommitLog here and delete the later files",
                )
            elif i > last and not info.records and info.tail == "zeros" and info.data_end == 0:
                self.p.warning(
                    "preallocated-file",
                    mf.path,
                    0,
                    "empty file after the last record (pre-allocated; a recovering broker deletes it)",
                )

    def _table(self, infos: list[FileInfo]) -> RecordTable:
        self.hints = None  # the scan is done: its hints need not be held beside the table
        self.keys.finish()
        parts = self.parts
        position = parts.column("position")
        total = parts.column("total_size")
        valid_end = (
            int(position[-1] + total[-1])
            if len(position)
            else (self.files[0].from_offset if self.files else 0)
        )
        topics = [""] * len(parts.topic_ids)
        for t, i in parts.topic_ids.items():
            topics[i] = t
        return RecordTable(
            position=position,
            total_size=total,
            queue_id=parts.column("queue_id"),
            queue_offset=parts.column("queue_offset"),
            sys_flag=parts.column("sys_flag"),
            topic_id=parts.column("topic_id"),
            tags_code=parts.column("tags_code"),
            topics=topics,
            keys=self.keys,
            files=infos,
            valid_end=valid_end,
            bytes=int(total.sum()) if len(total) else 0,
            crc_checked=self.crc_checked,
            max_store_timestamp=self.max_store_timestamp,
        )


@dataclass
class _FileResult:
    """What a worker's scan of one file found (``CommitLogVerifier._scan_alone``): the file's
    ``FileInfo`` fields, its problems in order, its column pieces with topic ids numbered in
    ``topics``, its index keys with rows counted from the file's first record."""

    data_end: int
    tail: str
    records: int
    first_store_timestamp: int | None
    problems: Collector
    cols: dict[str, list[np.ndarray]]
    topics: list[str]
    count: int
    key_rec: np.ndarray
    key_hash: np.ndarray
    crc_checked: int
    max_store_timestamp: int | None


class _KeyList:
    """A worker's index keys (``KeyColumns.append``), kept in memory until sent back."""

    def __init__(self) -> None:
        self.records: list[np.ndarray] = []
        self.hashes: list[np.ndarray] = []

    def append(self, records: np.ndarray, hashes: np.ndarray) -> None:
        self.records.append(records.astype(np.int64, copy=False))
        self.hashes.append(hashes.astype(np.int32, copy=False))

    def joined(self) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.concatenate(self.records) if self.records else np.empty(0, dtype=np.int64),
            np.concatenate(self.hashes) if self.hashes else np.empty(0, dtype=np.int32),
        )


_ACTIVE: CommitLogVerifier | None = None  # the verifier whose files the workers scan


def _worker_init() -> None:
    """A worker leaves Ctrl-C to the parent (which stops the pool)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _scan_in_worker(index: int) -> _FileResult:
    assert _ACTIVE is not None
    return _ACTIVE._scan_alone(index)


def _zero_tail_within(buf, pos: int, total: int, limit: int) -> bool:
    """Whether the bytes from somewhere inside the record at ``pos`` to its end are all zero."""
    end = min(pos + max(total, _MIN_RECORD), limit)
    last = bytes(buf[max(end - _BLANK_BYTES, pos) : end])
    return not any(last)
