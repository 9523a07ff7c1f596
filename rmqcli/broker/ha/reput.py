"""A slave's reput: consume queues and index from replicated CommitLog bytes (``ReputMessageService``).

On a slave nothing is put; bytes arrive from the master and the reput walks them record by record
from where it stopped (``reputFromOffset``), handing each whole record to ``dispatch``: the
store's own ``Dispatcher.dispatch_record`` (``rmqcli.store.write.dispatch``:
``CommitLogDispatcherBuildConsumeQueue`` then ``CommitLogDispatcherBuildIndex``), or in a running
broker the ``StoreWriter``'s, which also keeps its queue offsets and checkpoint times; so a slave's
units equal its master's. A BLANK record moves it
to the next file (``rollNextFile``); a record cut by the end of what has arrived waits for the
next push. A record that fails the checks where the whole of it has arrived stops the walk with
one log line: the bytes are the master's, so the master's CommitLog holds it too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from formats import commitlog as fmt
from formats.records import Record, RecordError, decode_record
from rmqcli.store.write.files import WritableFileQueue

log = logging.getLogger(__name__)

_SIZE_MAGIC = fmt.SIZE_MAGIC_STRUCT
WINDOW = 1024 * 1024  # CommitLog bytes read at once


class ReplicaReput:
    """Dispatches the records of ``queue`` (a slave's CommitLog) from ``start`` on."""

    def __init__(self, queue: WritableFileQueue, dispatch: Callable[[Record], object], start: int):
        self.queue = queue
        self.dispatch = dispatch
        self.next = start  # reputFromOffset
        self.dispatched = 0
        self.broken: str | None = None  # set when a record fails its checks (the walk stops)

    def dispatch_to(self, end: int, until: float | None = None) -> int:
        """Dispatch every whole record below ``end`` (or up to the first one dispatched at or after
        the ``time.monotonic()`` deadline ``until``); returns how many were dispatched now. The
        CommitLog is read ``WINDOW`` bytes at a time (more for a longer record)."""
        count = 0
        while self.broken is None and self.next < end:
            f = self.queue.holding(self.next)
            if f is None:
                self.next = self.queue.first_start(end)
                continue
            pos = self.next - f.from_offset
            limit = min(f.wrote, end - f.from_offset)
            if pos >= f.size:  # the file is done: on to the next
                self.next = f.from_offset + f.size
                continue
            if limit - pos < _SIZE_MAGIC.size:
                break
            window = min(limit, pos + WINDOW)
            if window < limit:  # a record longer than the window is read whole
                total, _ = _SIZE_MAGIC.unpack(f.read(pos, _SIZE_MAGIC.size))
                window = min(limit, max(window, pos + total))
            data = f.read(pos, window - pos)
            used, stop = self._walk(data, f.from_offset + pos, f.path.name, f.size - pos, until)
            count += used
            if stop == "next-file":
                self.next = f.from_offset + f.size
            elif stop == "wait" and (window == limit or used == 0):
                break
            elif stop == "time":
                break
        self.dispatched += count
        return count

    def _walk(
        self, data: bytes, offset: int, name: str, room: int, until: float | None = None
    ) -> tuple[int, str]:
        """Dispatch the records of ``data`` (CommitLog bytes from ``offset``; ``room`` bytes are left
        in the file there): ``(records, "wait" | "next-file" | "broken" | "time")``."""
        count = 0
        pos = 0
        limit = len(data)
        dispatch = self.dispatch
        clock = time.monotonic
        while limit - pos >= _SIZE_MAGIC.size:
            total, magic = _SIZE_MAGIC.unpack_from(data, pos)
            if magic == fmt.BLANK_MAGIC:
                self.next = offset + pos
                return count, "next-file"
            if total <= 0 or total > room - pos or magic not in fmt.MESSAGE_MAGICS:
                return count, self._break(
                    offset + pos, name, f"no record there (size {total}, magic {magic})"
                )
            if pos + total > limit:
                break  # the rest of it has not arrived yet
            try:
                rec = decode_record(data, pos, pos + total, name, offset)
            except RecordError as exc:
                return count, self._break(offset + pos, name, str(exc))
            dispatch(rec)
            count += 1
            pos += total
            if until is not None and clock() >= until:
                self.next = offset + pos
                return count, "time"
        self.next = offset + pos
        return count, "wait"

    def _break(self, offset: int, name: str, reason: str) -> str:
        self.broken = f"reput stopped at CommitLog offset {offset} ({name}): {reason}"
        self.next = offset
        log.error("HA: %s", self.broken)
        return "broken"
