"""Recovery's walk and dispatch in bulk, for ``rmq recover`` and ``rmq serve``'s start-up.

``rmqcli.ops.recover`` walks and dispatches record by record; this module gives the same result
(tests compare both, byte for byte) from windows of records read at once:

- each CommitLog window is read and checked by the bulk scan (``headerscan.scan_records``: the
  fields ``checkMessageAndReturnSize`` checks), the body CRCs in one tight loop, as ``rmq
  verify`` does; the record-by-record check (``recover._check``) then confirms the first record
  the bulk checks reject, and gives the reason the log ends there;
- index entries go through ``FastDispatcher`` (index only), which goes on from the index files
  the recovery keeps (``resume_index``);
- consume-queue units are written record by record, but only for the records a queue does not
  already reach (``putMessagePositionInfo`` skips the others: ``offset + size <=
  maxPhysicOffset``).

Anything the bulk path cannot vouch for (the single-record check accepting what the bulk scan
rejected, a reput over records the walk did not check) raises ``Irregular``; the caller then takes
the record-by-record path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats import commitlog as fmt
from rmqcli.store import Store
from rmqcli.store.mapped import MappedFile
from rmqcli.store.naming import topic_dir_problem
from rmqcli.store.read.commitlog import classify_tail, decode_record
from rmqcli.store.scan import headerscan, propscan
from rmqcli.store.scan.bodycrc import check_body_crcs
from rmqcli.store.scan.fastdispatch import FastDispatcher
from rmqcli.store.scan.headerscan import HeaderBatch
from rmqcli.store.write.dispatch import Dispatcher
from rmqcli.store.write.messages import QUEUED_TRANSACTION_TYPES

WINDOW = 32 * 1024 * 1024  # bytes of a CommitLog file scanned at once
_QUEUED = sorted(QUEUED_TRANSACTION_TYPES)


class Irregular(Exception):
    """The bulk path cannot vouch for the record-by-record result here."""


@dataclass
class BulkEnd:
    """Where the walk stops: the global offset and why (``recover.WalkEnd``'s fields)."""

    end: int
    reason: str


@dataclass
class BulkDispatch:
    """The dispatch of whole batches: consume queues through ``queues`` (a loaded ``Dispatcher``
    without index), the index through ``index`` (a ``FastDispatcher`` without queues); either may
    be None (not built here)."""

    queues: Dispatcher | None
    index: FastDispatcher | None
    count: int = 0  # records dispatched

    def rows(self, mf: MappedFile, buf, batch: HeaderBatch, n: int) -> None:
        """Dispatch the first ``n`` records of ``batch`` in order (``ReputMessageService.doDispatch``)."""
        if n <= 0:
            return
        self.count += n
        if self.queues is not None:
            file_pos = batch.position[:n] - mf.from_offset
            for i in self._lacking(batch, n).tolist():
                rec = decode_record(buf, int(file_pos[i]), len(buf), str(mf.path), mf.from_offset)
                self.queues.dispatch_record(rec)
            queued = self._queued(batch, n)
            if len(queued):  # the Dispatcher's checkpoint time follows every queued record, written or not
                self.queues.logics_msg_timestamp = int(batch.store_timestamp[queued[-1]])
        if self.index is not None and self.index.build_index:
            names = propscan.dispatch_names(batch.topics)
            assert batch.tails is not None and batch.physical_offset is not None
            scan = propscan.Scan(
                batch, batch.physical_offset, batch.tails.data, propscan.locate(batch, names)
            )
            self.index.dispatch(scan, np.arange(n, dtype=np.int64))

    def _queued(self, batch: HeaderBatch, n: int) -> np.ndarray:
        """The records among the first ``n`` that go to a queue whose directory their topic can name."""
        rows = queued_rows(batch, n)
        unsafe = unsafe_topics(batch)
        return rows[~np.isin(batch.topic_index[rows], unsafe)] if unsafe and len(rows) else rows

    def _lacking(self, batch: HeaderBatch, n: int) -> np.ndarray:
        """The queued records whose queue does not reach them yet (or whose topic names no queue:
        the ``Dispatcher`` counts those), in order."""
        queues = self.queues
        assert queues is not None
        rows = queued_rows(batch, n)
        if not len(rows):
            return rows
        pairs = np.stack([batch.topic_index[rows], batch.queue_id[rows]], axis=1).astype(np.int64)
        uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)  # (topic index, queue id) rows
        reach = np.empty(len(uniq), dtype=np.int64)
        for i, (topic_index, queue_id) in enumerate(uniq.tolist()):
            cq = queues.cqs.get((batch.topics[topic_index], queue_id))
            reach[i] = cq.max_physic_offset if cq is not None else -1
        ends = batch.position[rows] + batch.total_size[rows]
        return rows[ends > reach[inverse.ravel()]]


def queued_rows(batch: HeaderBatch, n: int) -> np.ndarray:
    """The records among the first ``n`` whose transaction type puts them in a consume queue."""
    return np.flatnonzero(np.isin(batch.sys_flag[:n] & fmt.TRANSACTION_MASK, _QUEUED))


def unsafe_topics(batch: HeaderBatch) -> list[int]:
    """The entries of ``batch.topics`` that cannot name a consume-queue directory."""
    return [i for i, t in enumerate(batch.topics) if topic_dir_problem(t) is not None]


def unsafe_rows(batch: HeaderBatch, n: int) -> np.ndarray:
    """The queued records among the first ``n`` whose topic cannot name a queue directory."""
    unsafe = unsafe_topics(batch)
    if not unsafe:
        return np.empty(0, dtype=np.int64)
    rows = queued_rows(batch, n)
    return rows[np.isin(batch.topic_index[rows], unsafe)]


def _cut(buf, batch: HeaderBatch, check_crc: bool) -> int:
    """How many of ``batch``'s records the walk accepts: up to the first non-UTF-8 topic (which
    ``decode_record`` rejects) or the first bad CRC."""
    n = len(batch)
    if batch.bad_topics:
        bad = np.flatnonzero(np.isin(batch.topic_index, batch.bad_topics))
        n = int(bad[0]) if len(bad) else n
    return check_body_crcs(buf, batch, n).first_bad(n) if check_crc else n


def walk(
    store: Store,
    start_index: int,
    check_crc: bool,
    check_record,
    sink: BulkDispatch | None,
    on_unsafe=None,
    hints: np.ndarray | None = None,
) -> BulkEnd:
    """``recover.walk`` in bulk: records are dispatched into ``sink`` as they are accepted (None:
    not dispatched; ``on_unsafe(batch, n)`` then notes the unsafe topics among them).

    ``check_record(mf, buf, pos, limit, check_crc)`` is ``recover._check``: it confirms the record
    where the bulk checks stop and gives the reason; a record it accepts raises ``Irregular``.
    """
    files = store.commitlog.files
    if not files:
        return BulkEnd(0, "no CommitLog files")
    for mf in files[start_index:]:
        buf = mf.map(whole=True)
        limit = len(buf)
        view = memoryview(buf)  # not released: the batch's arrays may still look into it
        pos = released = 0
        try:
            while True:
                whole = pos + WINDOW >= limit
                batch = headerscan.scan_records(
                    buf if whole else view[: pos + WINDOW], pos, mf.from_offset, hints, properties=True
                )
                if not whole and batch.end == pos:  # no whole record in the window: the rest at once
                    whole = True
                    batch = headerscan.scan_records(buf, pos, mf.from_offset, hints, properties=True)
                n = _cut(buf, batch, check_crc)
                if sink is not None:
                    sink.rows(mf, buf, batch, n)
                elif on_unsafe is not None:
                    on_unsafe(batch, n)
                if n < len(batch):
                    pos = int(batch.position[n]) - mf.from_offset
                    return BulkEnd(
                        mf.from_offset + pos, _confirmed_stop(check_record, mf, buf, pos, check_crc)
                    )
                pos = batch.end
                if not whole:
                    released = mf.release(released, pos)
                    continue
                tail, _ = classify_tail(buf, pos, limit)
                if tail == "blank" and mf is files[-1]:
                    return BulkEnd(mf.from_offset + pos, f"BLANK record ending the last file {mf.name}")
                if tail == "blank":
                    break  # the next file
                if tail in ("zeros", "end"):
                    return BulkEnd(mf.from_offset + pos, f"end of data in {mf.name} at {pos}")
                return BulkEnd(mf.from_offset + pos, _confirmed_stop(check_record, mf, buf, pos, check_crc))
        finally:
            mf.release(released)
    last = files[-1]
    return BulkEnd(last.from_offset + last.size, "the last file is full")


def _confirmed_stop(check_record, mf: MappedFile, buf, pos: int, check_crc: bool) -> str:
    """The reason the record at ``pos`` ends the log, from the record-by-record check."""
    _, problem = check_record(mf, buf, pos, len(buf), check_crc)
    if problem is None:
        raise Irregular(f"{mf.name} at {pos}: the bulk checks reject a record the single check accepts")
    return f"{mf.name} at {pos}: {problem}"


def reput(store: Store, start: int, end: int, sink: BulkDispatch, hints: np.ndarray | None = None) -> None:
    """``recover``'s reput in bulk: dispatch the records from ``start`` (a record start) up to
    ``end``, which the walk checked (a record it did not check raises ``Irregular``)."""
    for mf in store.commitlog.files:
        if mf.from_offset + mf.size <= start or mf.from_offset >= end:
            continue
        buf = mf.map(whole=True)
        limit = len(buf)
        view = memoryview(buf)  # not released: the batch's arrays may still look into it
        pos = released = max(start - mf.from_offset, 0)
        stop = min(end - mf.from_offset, limit)
        try:
            while pos < stop:
                whole = pos + WINDOW >= limit
                batch = headerscan.scan_records(
                    buf if whole else view[: pos + WINDOW], pos, mf.from_offset, hints, properties=True
                )
                if not whole and batch.end == pos:
                    whole = True
                    batch = headerscan.scan_records(buf, pos, mf.from_offset, hints, properties=True)
                n = int(np.searchsorted(batch.position, mf.from_offset + stop))
                if batch.bad_topics and np.isin(batch.topic_index[:n], batch.bad_topics).any():
                    raise Irregular(f"{mf.name}: the reput meets a topic that is not UTF-8")
                sink.rows(mf, buf, batch, n)
                pos = batch.end
                if whole:
                    break
                released = mf.release(released, pos)
            if pos < stop and classify_tail(buf, pos, limit)[0] != "blank":
                raise Irregular(f"{mf.name} at {pos}: the reput meets a record the walk did not check")
        finally:
            mf.release(released)


def index_backlog(store: Store, start: int, end: int, fast: FastDispatcher) -> None:
    """Index the records from ``start`` (a record start) up to ``end`` into ``fast`` (resumed on
    the store's index files), behind a recovery that checked them (``rmq serve`` after a crash)."""
    reput(store, start, end, BulkDispatch(None, fast))
