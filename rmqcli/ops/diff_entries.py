"""Compare two replicas of a DLedger group entry by entry (``formats.dledger``).

In a DLedger group the leader's ``EntryHandler`` pushes each entry to the followers, which append it
at the same index and pos (``DLedgerMmapFileStore.appendAsFollower`` checks both): replicas agree
entry by entry, index, term and bytes. Where they part, the entries from there on are each side's
own: a follower that kept a suffix its old leader never committed (``truncate`` drops it when the
new leader's ``EntryDispatcher`` compares), or a damaged entry. Each side's ``committedIndex``
(``dledger-<selfId>/checkpoint``, ``DLedgerMmapFileStore.persistCheckPoint``) says whether its own
entries were committed: an entry past it is the uncommitted suffix a new leader may truncate.

The walk reads entry headers as ``DLedgerMmapFileStore.recover`` does (``read_entry``): it stops at
zeros, or at a header recovery rejects, which is reported with the file and byte offset.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from formats import dledger as dfmt
from rmqcli.conf.parse import read_properties
from rmqcli.errors import CorruptDataError
from rmqcli.store.read.dledger import DLedgerCommitLog, Entry, EntryError, file_stop, read_entry

IDENTICAL = "identical"
PREFIX = "prefix"
DIVERGED = "diverged"


@dataclass
class EntrySide:
    """One replica's entries as read."""

    self_id: str
    entries: int = 0
    first_index: int | None = None
    last_index: int | None = None
    last_term: int | None = None
    committed_index: int | None = None  # dledger-<selfId>/checkpoint (None: no checkpoint file)
    terms: dict[int, int] = field(default_factory=dict)  # term -> entries
    stopped: str | None = None  # why the walk stopped short of the data (file, offset, reason)


@dataclass
class EntryMismatch:
    """The first entry index where the replicas differ."""

    index: int
    what: str  # "term", "pos", "size" or "bytes"
    term_a: int
    term_b: int
    pos_a: int
    pos_b: int
    byte: int | None  # the first differing byte within the entry ("bytes")
    record_a: str | None  # None: the message record reads; else why not
    record_b: str | None


@dataclass
class OnlyEntries:
    """Entries one replica holds past the agreeing prefix."""

    side: str  # "a" or "b"
    from_index: int
    to_index: int  # inclusive
    entries: int
    terms: dict[int, int]
    uncommitted: int  # how many are past that replica's committedIndex


@dataclass
class EntryDiff:
    a: EntrySide
    b: EntrySide
    verdict: str
    equal: int  # entries equal in index, term and bytes
    mismatch: EntryMismatch | None = None
    only: list[OnlyEntries] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return self.verdict in (IDENTICAL, PREFIX)


def walk(log: DLedgerCommitLog, side: EntrySide) -> Iterator[Entry]:
    """The entries of ``log`` in order, as ``recover`` reads their headers; a header it rejects
    ends the walk and is kept in ``side.stopped``."""
    for mf in log.data_files:  # a store switched to DLedger mode: its old commitlog/ files aside
        buf = mf.map()
        at, limit = 0, len(buf)
        while (stop := file_stop(buf, at, limit)) is None:
            try:
                entry = read_entry(buf, at, limit, mf)
            except EntryError as exc:
                side.stopped = f"{mf.path} at byte {at}: {exc}"
                return
            yield entry
            at += entry.size
        if stop == "zeros":
            return


def _bytes(log: DLedgerCommitLog, e: Entry) -> memoryview:
    mf = log.queue.find(e.pos)
    return memoryview(mf.map())[e.file_position : e.file_position + e.size]


def _record_problem(log: DLedgerCommitLog, e: Entry) -> str | None:
    try:
        log.read(e.body_position)
    except CorruptDataError as exc:
        return str(exc)
    return None


def committed_index(home: Path) -> int | None:
    """``committedIndex`` of ``home/checkpoint`` (else of its ``.bak``), as ``DLedgerMmapFileStore``
    reads it at start; None when neither file gives a number."""
    for path in (home / dfmt.CHECKPOINT_FILE, home / (dfmt.CHECKPOINT_FILE + dfmt.BAK_SUFFIX)):
        if path.is_file():
            try:
                return int(read_properties(path)[dfmt.COMMITTED_INDEX_KEY])
            except (KeyError, ValueError):
                return None
    return None


class _Side:
    """One replica's walk, counting what it reads."""

    def __init__(self, log: DLedgerCommitLog, self_id: str):
        self.log = log
        self.info = EntrySide(self_id, committed_index=committed_index(log.home))
        self._it = walk(log, self.info)

    def next(self) -> Entry | None:
        e = next(self._it, None)
        if e is not None:
            info = self.info
            info.entries += 1
            if info.first_index is None:
                info.first_index = e.index
            info.last_index, info.last_term = e.index, e.term
            info.terms[e.term] = info.terms.get(e.term, 0) + 1
        return e

    def rest(self, first: Entry, name: str) -> OnlyEntries:
        """``first`` and every entry after it, as entries only this side holds."""
        terms: Counter = Counter()
        count = uncommitted = 0
        last = first.index
        e: Entry | None = first
        committed = self.info.committed_index
        while e is not None:
            count += 1
            terms[e.term] += 1
            last = e.index
            if committed is None or e.index > committed:
                uncommitted += 1
            e = self.next()
        return OnlyEntries(name, first.index, last, count, dict(sorted(terms.items())), uncommitted)


def _mismatch(a: _Side, b: _Side, ea: Entry, eb: Entry) -> EntryMismatch | None:
    """How entries ``ea`` and ``eb`` (of one index) differ: term, pos, size, else bytes; None: equal."""
    fields = (("term", ea.term, eb.term), ("pos", ea.pos, eb.pos), ("size", ea.size, eb.size))
    what = next((name for name, x, y in fields if x != y), None)
    byte = None
    if what is None:
        left, right = _bytes(a.log, ea), _bytes(b.log, eb)
        if left == right:
            return None
        what, byte = "bytes", next(i for i, (x, y) in enumerate(zip(left, right, strict=True)) if x != y)
    problems = (_record_problem(a.log, ea), _record_problem(b.log, eb))
    return EntryMismatch(ea.index, what, ea.term, eb.term, ea.pos, eb.pos, byte, *problems)


def diff_entries(log_a: DLedgerCommitLog, log_b: DLedgerCommitLog, id_a: str, id_b: str) -> EntryDiff:
    """Compare the entries of two DLedger logs index by index."""
    a, b = _Side(log_a, id_a), _Side(log_b, id_b)
    result = EntryDiff(a.info, b.info, IDENTICAL, 0)
    ea, eb = a.next(), b.next()
    while ea is not None and eb is not None and ea.index != eb.index:  # one holds older entries
        if ea.index < eb.index:
            ea = a.next()
        else:
            eb = b.next()
    while ea is not None and eb is not None:
        mismatch = _mismatch(a, b, ea, eb)
        if mismatch is not None:
            result.verdict, result.mismatch = DIVERGED, mismatch
            break
        result.equal += 1
        ea, eb = a.next(), b.next()
    for side, e, name in ((a, ea, "a"), (b, eb, "b")):
        if e is not None:
            result.only.append(side.rest(e, name))
    if result.verdict == IDENTICAL and result.only:
        result.verdict = PREFIX
    if result.verdict != DIVERGED and (a.info.stopped or b.info.stopped):
        result.verdict = DIVERGED  # a side's data goes on past a header recovery rejects
    return result
