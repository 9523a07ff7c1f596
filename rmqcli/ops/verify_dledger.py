"""Verification of a CommitLog written in DLedger mode (``formats.dledger``).

``DLedgerVerifier`` is the ``CommitLogVerifier`` of such a store: it walks the entries of each data
file as ``DLedgerMmapFileStore.recover`` does (magic, size, pos, body size; index + 1 and a term
never lower than the previous entry's; a blank ends a file, zeros end the data) and hands every
entry's message record to the same per-record checks as a CommitLog's (``_keep``: PHYSICALOFFSET,
body CRC, topic, properties, tags codes and index keys), so the consume-queue and index checks
that follow join on the same table. The files are scanned in this process, in order, since the
chain runs across them. Then ``check_entry_index`` compares the ``index/`` units with the entries
(``recover``'s compare of data to index; ``get(index)`` serves from them), and
``check_dledger_checkpoint`` the text files ``checkpoint`` (committedIndex, endIndex) and
``currterm`` with the log.

In a store switched to DLedger mode the files below ``divided`` (``dividedCommitlogOffset``) are
the old CommitLog's: they are checked as a CommitLog's (``CommitLogVerifier``), the blank that
``DLedgerCommitLog.recover`` writes at the old data's end included, and the entries follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from formats import dledger as dfmt
from rmqcli.errors import NotFoundError
from rmqcli.ops.verify_commitlog import CommitLogVerifier
from rmqcli.ops.verify_common import Collector
from rmqcli.ops.verify_table import FileInfo
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.read.dledger import Entry, EntryError, file_stop, read_entry, resync
from rmqcli.store.scan import headerscan
from rmqcli.store.settings import read_properties

_BODY = dfmt.BODY_OFFSET


@dataclass
class EntryColumns:
    """The sound entries read, in order (what the index file must hold)."""

    index: list[int] = field(default_factory=list)
    term: list[int] = field(default_factory=list)
    pos: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)

    def add(self, e: Entry) -> None:
        self.index.append(e.index)
        self.term.append(e.term)
        self.pos.append(e.pos)
        self.size.append(e.size)


class DLedgerVerifier(CommitLogVerifier):
    """Scans the entries of a DLedger log once; ``entries`` holds what was read."""

    def __init__(self, *args, divided: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.entries = EntryColumns()
        self._last: Entry | None = None
        self.divided = divided  # below it, the old CommitLog of a switched store

    def _workers(self) -> int:
        return 1  # the index/term chain runs from file to file

    def _scan_file(self, info: FileInfo) -> None:
        mf = info.mapped
        if mf.from_offset < self.divided:
            super()._scan_file(info)  # a file of the old CommitLog
            return
        buf = mf.map(whole=True)
        limit = len(buf)
        at = 0
        while True:
            at, stop = self._entries_from(info, buf, at, limit)
            info.data_end = at
            if stop == "zeros":
                nxt = resync(buf, at, limit, mf)
                if nxt is not None:
                    self.p.error(
                        "zero-hole",
                        mf.path,
                        at,
                        f"zeros from here to {nxt}, then entries: recovery stops at the zeros",
                    )
                    info.tail = "garbage"
                    self._last = None
                    at = nxt
                    continue
            elif stop == "blank":
                blank = dfmt.BLANK_STRUCT.unpack_from(buf, at)[1]
                if blank != limit - at:
                    self.p.warning(
                        "bad-blank", mf.path, at, f"blank length {blank} != the {limit - at} bytes left"
                    )
            if info.tail != "garbage":
                info.tail = stop
            return

    def _entries_from(self, info: FileInfo, buf, at: int, limit: int) -> tuple[int, str]:
        """Check the entries from ``at`` on and keep their records; returns where they stop and why."""
        mf = info.mapped
        view = memoryview(buf)
        while (stop := file_stop(buf, at, limit)) is None:
            try:
                e = read_entry(buf, at, limit, mf)
            except EntryError as exc:
                at = self._bad_entry(info, buf, at, limit, str(exc))
                continue
            broken = self._chain_problem(e)
            if broken is not None:
                self.p.error(
                    "entry-chain", mf.path, at, f"{broken}; recovery stops here and truncates the log"
                )
            self._last = e
            self.entries.add(e)
            end = at + e.size
            batch = headerscan.scan_records(view[:end], at + _BODY, mf.from_offset, None, properties=True)
            if len(batch) == 1 and batch.end == end:
                self._keep(info, buf, batch)
            else:
                self.p.error(
                    "bad-record",
                    mf.path,
                    at + _BODY,
                    f"message record of entry {e.index} fails the checks of checkMessageAndReturnSize "
                    "(or is not the whole body): the broker cannot dispatch or serve it",
                )
            at = end
        return at, stop

    def _chain_problem(self, e: Entry) -> str | None:
        last = self._last
        if last is None:
            return None
        if e.index != last.index + 1:
            return f"entry index {e.index} does not follow {last.index}"
        if e.term < last.term:
            return f"entry term {e.term} is lower than the previous entry's {last.term}"
        return None

    def _bad_entry(self, info: FileInfo, buf, at: int, limit: int, reason: str) -> int:
        """Report the entry at ``at`` that ``recover`` rejects; return where the scan resumes."""
        mf = info.mapped
        nxt = resync(buf, at + 1, limit, mf)
        rest = bytes(buf[at:limit] if nxt is None else b"x")
        torn = nxt is None and not any(rest[-dfmt.MIN_BLANK_LEN :])
        kind = "torn-entry" if torn else "bad-entry"
        what = f"partially written entry ({reason}): its end is zeros" if torn else reason
        self.p.error(kind, mf.path, at, f"{what}; recovery stops here and truncates the log")
        info.tail = "garbage"
        if nxt is None:
            return limit
        self.p.warning("resync", mf.path, nxt, f"entries resume here after {nxt - at} unreadable bytes")
        self._last = None
        return nxt


def check_entry_index(queue: MappedFileQueue, index_dir: Path, entries: EntryColumns, p: Collector) -> int:
    """Every entry's unit in ``index/`` (magic, pos, size, index, term) must be the entry's; returns
    the units compared. Units after the last entry are stale (``recover`` truncates them)."""
    unit = dfmt.INDEX_UNIT_STRUCT
    names = ("magic", "pos", "size", "index", "term")
    columns = zip(entries.index, entries.term, entries.pos, entries.size, strict=True)
    for i, (index, term, pos, size) in enumerate(columns):
        where = index * dfmt.INDEX_UNIT_SIZE
        try:
            mf = queue.find(where)
        except NotFoundError:
            p.error("index-missing", index_dir, where, f"no index file holds the unit of entry {index}")
            return i
        at = where - mf.from_offset
        buf = mf.map()
        if at + unit.size > len(buf):
            p.error("index-missing", mf.path, at, f"the unit of entry {index} is cut short")
            return i
        got = unit.unpack_from(buf, at)
        want = (dfmt.MAGIC_1, pos, size, index, term)
        if got != want:
            diff = ", ".join(f"{n} {g} != {w}" for n, g, w in zip(names, got, want, strict=True) if g != w)
            p.error("index-mismatch", mf.path, at, f"unit of entry {index} disagrees with the data ({diff})")
    return len(entries.index)


def check_dledger_checkpoint(home: Path, entries: EntryColumns, p: Collector) -> None:
    """``checkpoint`` (committedIndex, endIndex) and ``currterm`` (currTerm) against the log's last entry."""
    last_index = entries.index[-1] if entries.index else -1
    last_term = entries.term[-1] if entries.term else -1
    ckpt = _text_file(home / dfmt.CHECKPOINT_FILE, p)
    if ckpt is not None:
        committed = _number(ckpt, dfmt.COMMITTED_INDEX_KEY, home / dfmt.CHECKPOINT_FILE, p)
        end = _number(ckpt, dfmt.END_INDEX_KEY, home / dfmt.CHECKPOINT_FILE, p)
        if committed is not None and committed > last_index:
            p.error(
                "committed-lost",
                home / dfmt.CHECKPOINT_FILE,
                None,
                f"committedIndex {committed} is past the last entry ({last_index}): committed entries lost",
            )
        if end is not None and end != last_index:
            p.warning(
                "end-index",
                home / dfmt.CHECKPOINT_FILE,
                None,
                f"endIndex {end} != the last entry's index {last_index} (the checkpoint is written "
                "periodically; recovery takes the data's)",
            )
    term_file = _text_file(home / dfmt.CURRTERM_FILE, p)
    if term_file is not None:
        term = _number(term_file, dfmt.CURR_TERM_KEY, home / dfmt.CURRTERM_FILE, p)
        if term is not None and term < last_term:
            p.error(
                "term-behind",
                home / dfmt.CURRTERM_FILE,
                None,
                f"currTerm {term} is lower than the last entry's term {last_term}",
            )


def _text_file(path: Path, p: Collector) -> dict[str, str] | None:
    """The properties of ``path``, else of its ``.bak`` (``IOUtils.file2String`` then the backup)."""
    for candidate in (path, path.with_name(path.name + dfmt.BAK_SUFFIX)):
        if candidate.is_file():
            return read_properties(candidate)
    p.warning("dledger-file-missing", path, None, f"no {path.name} (nor its .bak)")
    return None


def _number(props: dict[str, str], key: str, path: Path, p: Collector) -> int | None:
    try:
        return int(props[key])
    except (KeyError, ValueError):
        p.error("dledger-file", path, None, f"{key} is missing or not a number")
        return None
