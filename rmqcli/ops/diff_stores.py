"""Compare the CommitLogs of two stores, as an operator does before promoting a slave by hand.

Replicas of one broker group hold the same CommitLog bytes at the same physical offsets
(``HAConnection`` pushes the master's bytes unchanged; formats.md §1). So two stores agree when
their bytes are equal wherever both hold data: over ``[max(minA, minB), min(maxA, maxB))``, the
ends being each store's maxPhyOffset as a broker's recovery finds it. Past that range, one store
holds records the other lacks: the replication gap. Where the bytes differ, the stores have
diverged; the records from the one holding the first differing byte onward are each side's own.

A 4.9.8 slave that starts empty is served from the start of its master's last CommitLog file,
so a slave may lack the master's older files: that is not a divergence either.

Two replicas of a DLedger group (``formats.dledger``) are compared both ways: their data files
byte by byte as above (entries sit at the same pos on every replica), and entry by entry
(``rmqcli.ops.diff_entries``: index, term, bytes, and each side's committedIndex).

Two replicas of a RocketMQ 5 controller-mode group (``rmqcli.store.confirm``) are compared over
their confirmed records: each side's log ends, for the comparison, where its first record past the
checkpoint's confirmPhyOffset starts (5.1.1's ``CommitLog.recoverNormally``/``recoverAbnormally``
and ``ReputMessageService`` dispatch nothing past ``getConfirmOffset``, and a replica rejoining a master
that lacks those records truncates them: ``AutoSwitchHAClient`` -> ``truncateDirtyFiles``). What a
side holds past it is its unconfirmed tail, reported as the records only it holds, each counted as
past its confirmPhyOffset, as the uncommitted suffix of a DLedger replica is counted past its
committedIndex: it is no divergence, and stores whose confirmed records agree are identical.
When both hold an ``epochFileCheckpoint``, the comparison also says which epoch each side's bytes
at the divergence belong to, and, for each side, what it would cut to rejoin the other as its
slave (5.1.1's consistent point, docs/controller.md §6.8): the offset, the bytes and the records,
or that there is no such point (5.1.1's slave then fails its handshake forever).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from rmqcli.errors import CorruptDataError, UsageError
from rmqcli.ops.diff_entries import EntryDiff, diff_entries
from rmqcli.store import Store
from rmqcli.store.epochs import consistent_point, epoch_at, epoch_spans, read_epochs
from rmqcli.store.mapped import MappedFile
from rmqcli.store.read.commitlog import Header
from rmqcli.store.read.dledger import DLedgerCommitLog

CHUNK = 4 * 1024 * 1024  # bytes compared at a time
SAMPLE = 10  # records listed per side by default

IDENTICAL = "identical"
PREFIX = "prefix"  # equal where both hold data, one holds more
DIVERGED = "diverged"
DISJOINT = "disjoint"  # both hold data, at offsets that do not meet


@dataclass
class StoreSide:
    store: str
    min_offset: int
    max_offset: int  # a controller-mode store: where its confirmed records end
    file_size: int
    files: int
    confirm_phy_offset: int | None = None  # the checkpoint's, controller-mode stores only
    unconfirmed_to: int | None = None  # where the records past it end, when it holds any


@dataclass
class RecordRef:
    """One record only one store holds (its offset message id is the broker's own msgId)."""

    offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    store_timestamp: int


@dataclass
class OnlyOn:
    """The records one store holds over a range the other does not: count, bytes and the first few."""

    side: str  # "a" or "b"
    from_offset: int
    to_offset: int
    records: int = 0
    first: list[RecordRef] = field(default_factory=list)
    unreadable_from: int | None = None  # the walk met bytes that are no record here, before to_offset
    unconfirmed: int = 0  # how many are past that store's confirmPhyOffset (controller mode)


@dataclass
class Divergence:
    offset: int  # the first physical offset whose bytes differ
    file: str  # the CommitLog file (in store A) that holds it
    position: int  # within that file
    byte_a: int
    byte_b: int
    record_a: int | None  # where the record holding that byte starts, per side
    record_b: int | None


@dataclass
class EpochSpan:
    epoch: int
    start_offset: int
    end_offset: int


@dataclass
class Rejoin:
    """What ``side`` cuts to rejoin the other as its slave: from ``point`` (-1: no consistent point)."""

    side: str
    point: int
    cut_bytes: int = 0
    cut_records: int = 0


@dataclass
class EpochView:
    a: list[EpochSpan]
    b: list[EpochSpan]
    divergence_epoch_a: int | None = None  # the epoch of each side's bytes at the first difference
    divergence_epoch_b: int | None = None
    rejoin: list[Rejoin] = field(default_factory=list)


@dataclass
class StoreDiff:
    a: StoreSide
    b: StoreSide
    verdict: str
    common_from: int
    common_to: int
    compared_bytes: int
    gap: int  # a.max_offset - b.max_offset: bytes A holds past B (negative: B is ahead)
    divergence: Divergence | None = None
    only: list[OnlyOn] = field(default_factory=list)
    entries: EntryDiff | None = None  # DLedger replicas: entry by entry
    epochs: EpochView | None = None  # controller-mode replicas with epoch files

    @property
    def consistent(self) -> bool:
        return self.verdict in (IDENTICAL, PREFIX) and (self.entries is None or self.entries.consistent)


def diff_stores(store_a: Store, store_b: Store, sample: int = SAMPLE) -> StoreDiff:
    """Compare the CommitLogs of two open stores; ``sample`` records are listed per one-sided range.
    Two DLedger replicas are also compared entry by entry; a DLedger store and a plain one are not
    compared (their logs are framed differently: ``UsageError``)."""
    da, db = store_a.dledger, store_b.dledger
    if (da is None) != (db is None):
        dl = store_a if da is not None else store_b
        raise UsageError(
            f"{dl.root} is a DLedger CommitLog store and the other is not: their logs are framed differently"
        )
    result = _diff(store_a, store_b, sample)
    result.epochs = _epochs(store_a, store_b, result)
    if da is not None and db is not None:
        log_a, log_b = store_a.commitlog, store_b.commitlog
        assert isinstance(log_a, DLedgerCommitLog) and isinstance(log_b, DLedgerCommitLog)
        result.entries = diff_entries(log_a, log_b, da.self_id, db.self_id)
    return result


def _epochs(store_a: Store, store_b: Store, result: StoreDiff) -> EpochView | None:
    """The epoch view, when both stores have epochs (controller mode)."""
    ea, eb = read_epochs(store_a.root).entries, read_epochs(store_b.root).entries
    if not ea or not eb:
        return None
    end_a, end_b = store_a.commitlog.max_offset(), store_b.commitlog.max_offset()
    view = EpochView(
        [EpochSpan(*span) for span in epoch_spans(ea, end_a)],
        [EpochSpan(*span) for span in epoch_spans(eb, end_b)],
    )
    if result.divergence is not None:
        view.divergence_epoch_a = epoch_at(ea, result.divergence.offset, end_a)
        view.divergence_epoch_b = epoch_at(eb, result.divergence.offset, end_b)
    for store, side, mine, end, theirs, their_end in (
        (store_a, "a", ea, end_a, eb, end_b),
        (store_b, "b", eb, end_b, ea, end_a),
    ):
        point = consistent_point(mine, end, theirs, their_end)
        rejoin = Rejoin(side, point)
        if 0 <= point < end:
            rejoin.cut_bytes = end - point
            rejoin.cut_records = _only(store, side, point, end, 0).records
        view.rejoin.append(rejoin)
    return view


def _side(store: Store) -> StoreSide:
    """A store's offsets; a controller-mode store's log ends at its confirm boundary."""
    log = store.commitlog
    side = StoreSide(str(store.root), log.min_offset, log.max_offset(), log.file_size, len(log.files))
    bound = store.confirm_bound()
    if bound is not None:
        side.confirm_phy_offset = bound.checkpoint
        if bound.boundary < bound.end:
            side.max_offset, side.unconfirmed_to = bound.boundary, bound.end
    return side


def _diff(store_a: Store, store_b: Store, sample: int) -> StoreDiff:
    a, b = _side(store_a), _side(store_b)
    result = _diff_confirmed(store_a, store_b, a, b, sample)
    for store, name, side in ((store_a, "a", a), (store_b, "b", b)):
        if side.unconfirmed_to is not None:  # its unconfirmed tail: no divergence, the verdict stands
            tail = _only(store, name, side.max_offset, side.unconfirmed_to, sample)
            tail.unconfirmed = tail.records
            result.only.append(tail)
    return result


def _diff_confirmed(store_a: Store, store_b: Store, a: StoreSide, b: StoreSide, sample: int) -> StoreDiff:
    """The comparison over ``[min_offset, max_offset)`` of each side."""
    start, end = max(a.min_offset, b.min_offset), min(a.max_offset, b.max_offset)
    empty_a, empty_b = a.max_offset <= a.min_offset, b.max_offset <= b.min_offset
    result = StoreDiff(a, b, IDENTICAL, start, max(start, end), 0, a.max_offset - b.max_offset)
    if not (empty_a or empty_b) and start > end:
        result.verdict = DISJOINT
        result.common_to = start
        result.only = [
            _only(store_a, "a", a.min_offset, a.max_offset, sample),
            _only(store_b, "b", b.min_offset, b.max_offset, sample),
        ]
        return result
    first_bad = None if (empty_a or empty_b) else _first_difference(store_a, store_b, start, end)
    result.compared_bytes = (first_bad if first_bad is not None else end) - start if end > start else 0
    if first_bad is not None:
        result.verdict = DIVERGED
        result.divergence = _divergence(store_a, store_b, first_bad)
        for store, name, side, record in (
            (store_a, "a", a, result.divergence.record_a),
            (store_b, "b", b, result.divergence.record_b),
        ):
            if side.max_offset > (record if record is not None else first_bad):
                begin = record if record is not None else first_bad
                result.only.append(_only(store, name, begin, side.max_offset, sample))
        return result
    for store, name, side, other in ((store_a, "a", a, b), (store_b, "b", b, a)):
        if side.min_offset < other.min_offset and not (empty_a or empty_b):
            result.only.append(_only(store, name, side.min_offset, other.min_offset, sample))
        tail_from = other.max_offset if not (empty_a or empty_b) else side.min_offset
        if side.max_offset > tail_from:
            result.only.append(_only(store, name, tail_from, side.max_offset, sample))
    if result.only:
        result.verdict = PREFIX
    return result


# --- bytes ----------------------------------------------------------------------------------------
def _spans(files: list[MappedFile], start: int, end: int) -> Iterator[tuple[int, int, MappedFile]]:
    """(global from, global to, file) pieces covering ``[start, end)`` in file order."""
    for mf in files:
        lo, hi = max(start, mf.from_offset), min(end, mf.from_offset + mf.size)
        if lo < hi:
            yield lo, hi, mf


def _views(store: Store, start: int, end: int) -> Iterator[tuple[int, memoryview]]:
    """The bytes of ``[start, end)`` in pieces of at most ``CHUNK``, each with its global offset."""
    for lo, hi, mf in _spans(store.commitlog.files, start, end):
        view = memoryview(mf.map())
        base = mf.from_offset
        for pos in range(lo, hi, CHUNK):
            stop = min(pos + CHUNK, hi)
            yield pos, view[pos - base : stop - base]


def _first_difference(store_a: Store, store_b: Store, start: int, end: int) -> int | None:
    """The first offset in ``[start, end)`` where the two CommitLogs differ, or None."""
    if end <= start:
        return None
    pieces_b = _views(store_b, start, end)
    pending: tuple[int, memoryview] | None = None
    for pos_a, view_a in _views(store_a, start, end):
        done = 0
        while done < len(view_a):
            if pending is None or len(pending[1]) == 0:
                pending = next(pieces_b)
            pos_b, view_b = pending
            size = min(len(view_a) - done, len(view_b))
            left, right = view_a[done : done + size], view_b[:size]
            if left != right:
                return pos_a + done + _first_unequal(left, right)
            done += size
            pending = (pos_b + size, view_b[size:])
    return None


def _first_unequal(left: memoryview, right: memoryview) -> int:
    import numpy as np

    diff = np.frombuffer(left, dtype=np.uint8) != np.frombuffer(right, dtype=np.uint8)
    return int(diff.argmax())


def _byte_at(store: Store, offset: int) -> tuple[int, MappedFile]:
    mf = store.commitlog.queue.find(offset)
    return mf.map()[offset - mf.from_offset], mf


def _divergence(store_a: Store, store_b: Store, offset: int) -> Divergence:
    byte_a, mf_a = _byte_at(store_a, offset)
    byte_b, _ = _byte_at(store_b, offset)
    return Divergence(
        offset,
        mf_a.name,
        offset - mf_a.from_offset,
        byte_a,
        byte_b,
        _record_holding(store_a, offset),
        _record_holding(store_b, offset),
    )


def _record_holding(store: Store, offset: int) -> int | None:
    """Where the record that holds byte ``offset`` starts (walked from its file's start), or None
    when no valid record reaches it."""
    mf = store.commitlog.queue.find(offset)
    for header in _Walk(store, mf.from_offset, offset + 1):
        if header.position + header.total_size > offset:
            return header.position
    return None


class _Walk:
    """The valid records of ``[start, end)``; where the walk met bytes that are no record before
    ``end`` (a flipped header, a partial record) it stops and keeps the offset in ``stopped_at``."""

    def __init__(self, store: Store, start: int, end: int):
        self.store, self.start, self.end = store, start, end
        self.stopped_at: int | None = None

    def __iter__(self) -> Iterator[Header]:
        reached = self.start
        try:
            for header in self.store.commitlog.headers(self.start):
                if header.position >= self.end:
                    return
                reached = header.position + header.total_size
                yield header
                if reached >= self.end:
                    return
        except CorruptDataError:
            pass
        if reached < self.end:
            self.stopped_at = reached


# --- records --------------------------------------------------------------------------------------
def _only(store: Store, side: str, start: int, end: int, sample: int) -> OnlyOn:
    """The records of ``store`` that start in ``[start, end)``."""
    only = OnlyOn(side, start, end)
    walk = _Walk(store, start, end)
    for header in walk:
        if header.position < start:
            continue
        only.records += 1
        if len(only.first) < sample:
            only.first.append(
                RecordRef(
                    header.position,
                    header.total_size,
                    header.topic,
                    header.queue_id,
                    header.queue_offset,
                    header.store_timestamp,
                )
            )
    only.unreadable_from = walk.stopped_at
    return only
