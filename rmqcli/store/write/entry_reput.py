"""The reput of a DLedger broker: consume queues and index from committed entries only.

4.9.8's ``ReputMessageService`` over a ``DLedgerCommitLog`` reads up to ``getMaxOffset()``, the
committed position (``committedPos``, the end of the committed entry), so the consume queues and
index files of a leader and of its followers hold committed messages only. Each entry is its
48-byte header and one CommitLog record (``formats.dledger``); a blank (magic -1) ends a file
(``checkMessageAndReturnSize`` gives size 0: ``rollNextFile``). ``next`` is where the next entry
starts (``reputFromOffset``); an entry that fails its checks stops the walk with one log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from formats import dledger as dfmt
from formats.records import Record, RecordError, decode_record
from rmqcli.store.write.files import WritableFileQueue

log = logging.getLogger(__name__)

_HEADER = dfmt.ENTRY_HEADER_STRUCT
_BODY = dfmt.BODY_OFFSET


class EntryReput:
    """Dispatches the records of the entries of ``queue`` (a DLedger log's data) from ``start`` on."""

    def __init__(self, queue: WritableFileQueue, dispatch: Callable[[Record], object], start: int):
        self.queue = queue
        self.dispatch = dispatch
        self.next = start
        self.broken: str | None = None

    def dispatch_to(self, end: int) -> int:
        """Dispatch every entry that ends at or before ``end``; how many were dispatched."""
        count = 0
        while self.broken is None and self.next < end:
            f = self.queue.holding(self.next)
            if f is None:
                self.next = self.queue.first_start(end)
                continue
            pos = self.next - f.from_offset
            if pos + dfmt.MIN_BLANK_LEN > f.size:
                self.next = f.from_offset + f.size
                continue
            magic = dfmt.magic_of(f.read(pos, dfmt.MAGIC_STRUCT.size))
            if magic == dfmt.BLANK_MAGIC:
                self.next = f.from_offset + f.size
                continue
            if pos + _HEADER.size > f.size:
                self._break(f.path.name, "an entry header cut by the end of the file")
                break
            magic, size, _index, _term, entry_pos, _ch, _chain, _crc, body_size = _HEADER.unpack(
                f.read(pos, _HEADER.size)
            )
            if not dfmt.is_entry_magic(magic) or entry_pos != self.next or size != body_size + _BODY:
                self._break(f.path.name, f"no entry there (magic {magic}, pos {entry_pos}, size {size})")
                break
            if self.next + size > end:
                break
            body = f.read(pos + _BODY, body_size)
            try:
                rec = decode_record(body, 0, body_size, f.path.name, self.next + _BODY)
            except RecordError as exc:  # as the broker's reput: the message is skipped
                log.warning(
                    "DLedger reput: the record at %d does not read (%s); skipped", self.next + _BODY, exc
                )
            else:
                self.dispatch(rec)
                count += 1
            self.next += size
        return count

    def _break(self, name: str, reason: str) -> None:
        self.broken = f"reput stopped at offset {self.next} ({name}): {reason}"
        log.error("DLedger: %s", self.broken)
