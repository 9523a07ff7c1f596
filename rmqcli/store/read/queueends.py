"""The two ends of a consume queue, read lean: for reports over thousands of queues (``rmq lag``).

The same answers as ``ConsumeQueue.min_offset`` and ``ConsumeQueue.max_offset`` (formats.md §2;
4.9.8 ``ConsumeQueue.recover`` and ``correctMinOffset``), and single units by queue offset, but
without mapping files or building a ``MappedFileQueue``: one directory listing per queue and
positioned reads of the few units wanted. A queue costs a few system calls, not a few objects per
file, which is what makes ``rmq lag`` on 10,000 queues take well under a second.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass

from formats.consumequeue import CQ_UNIT_SIZE, CQ_UNIT_STRUCT, is_filler_unit
from rmqcli.store.naming import is_offset_name
from rmqcli.store.read.consumequeue import RECOVER_FROM_LAST, valid_units_in

CHUNK_UNITS = 1 << 14  # units read at a time while counting a file's valid units
HEAD_BYTES = 4096  # of the first file, read once and kept: small queues need no other read


@dataclass(slots=True)
class QueueEnds:
    """``min_offset`` and ``max_offset`` of the queue in ``directory``, and its files' starts."""

    directory: str
    starts: list[int]  # first byte offset of each file, ascending
    min_offset: int
    max_offset: int
    head: bytes = b""  # the first file's first ``HEAD_BYTES``

    def commitlog_offset(self, queue_offset: int) -> int | None:
        """The CommitLog offset unit ``queue_offset`` points at; None outside the queue's valid
        units, for a filler, or when the file cannot be read."""
        if not self.min_offset <= queue_offset < self.max_offset:
            return None
        position = queue_offset * CQ_UNIT_SIZE
        i = bisect.bisect_right(self.starts, position) - 1
        if i < 0:
            return None
        within = position - self.starts[i]
        if i == 0 and within + CQ_UNIT_SIZE <= len(self.head):
            raw = self.head[within : within + CQ_UNIT_SIZE]
        else:
            raw = _pread(self.directory, self.starts[i], within, CQ_UNIT_SIZE)
        if len(raw) < CQ_UNIT_SIZE:
            return None
        offset, size, tags = CQ_UNIT_STRUCT.unpack(raw)
        if offset < 0 or size <= 0 or is_filler_unit(offset, size, tags):
            return None
        return offset


def queue_ends(directory: str, file_size: int | None, commitlog_min: int) -> QueueEnds:
    """The ends of the queue in ``directory`` (no files: both 0). ``file_size``: the configured
    file size, else the largest file's (as ``MappedFileQueue``)."""
    sizes: dict[int, int] = {}
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if is_offset_name(entry.name) and entry.is_file():
                    sizes[int(entry.name)] = entry.stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        pass
    starts = sorted(sizes)
    if not starts:
        return QueueEnds(directory, starts, 0, 0)
    full = file_size or max(sizes.values())
    head = _pread(directory, starts[0], 0, HEAD_BYTES)
    return QueueEnds(
        directory,
        starts,
        _min_offset(directory, starts[0], sizes[starts[0]], commitlog_min, head),
        _max_offset(directory, starts, sizes, full, head),
        head,
    )


def _min_offset(directory: str, start: int, size: int, commitlog_min: int, head: bytes) -> int:
    """``ConsumeQueue.min_offset``: the first valid unit of the first file that is no filler and
    points at or past ``commitlog_min``; the file's first unit when none does."""
    base = start // CQ_UNIT_SIZE
    for first in range(0, size // CQ_UNIT_SIZE, CHUNK_UNITS):
        if first == 0 and len(head) >= size:
            raw = head
        else:
            raw = _pread(directory, start, first * CQ_UNIT_SIZE, CHUNK_UNITS * CQ_UNIT_SIZE)
        for i, (offset, unit_size, tags) in enumerate(CQ_UNIT_STRUCT.iter_unpack(_whole_units(raw))):
            if offset < 0 or unit_size <= 0:
                return base
            if offset >= commitlog_min and not is_filler_unit(offset, unit_size, tags):
                return base + first + i
        if len(raw) < CHUNK_UNITS * CQ_UNIT_SIZE:
            break
    return base


def _max_offset(directory: str, starts: list[int], sizes: dict[int, int], full: int, head: bytes) -> int:
    """``ConsumeQueue.max_offset``: from the third-last file on, the end of the valid units; a
    full file continues into the next."""
    first = max(0, len(starts) - RECOVER_FROM_LAST)
    end = starts[first]
    for start in starts[first:]:
        if start == starts[0] and len(head) >= sizes[start]:
            units = valid_units_in(_whole_units(head))
        else:
            units = _valid_units(directory, start, sizes[start])
        end = start + units * CQ_UNIT_SIZE
        if units * CQ_UNIT_SIZE < full:
            break
    return end // CQ_UNIT_SIZE


def _valid_units(directory: str, start: int, size: int) -> int:
    """Leading valid units of one file, read a chunk at a time (``valid_units_in``)."""
    count = 0
    while count * CQ_UNIT_SIZE < size:
        raw = _whole_units(_pread(directory, start, count * CQ_UNIT_SIZE, CHUNK_UNITS * CQ_UNIT_SIZE))
        valid = valid_units_in(raw)
        count += valid
        if valid < CHUNK_UNITS:
            break
    return count


def _whole_units(raw: bytes) -> bytes:
    return raw[: len(raw) - len(raw) % CQ_UNIT_SIZE]


def _pread(directory: str, start: int, position: int, length: int) -> bytes:
    """``length`` bytes at ``position`` of the file starting at ``start`` (fewer at its end)."""
    try:
        fd = os.open(f"{directory}/{start:020d}", os.O_RDONLY)
    except OSError:
        return b""
    try:
        return os.pread(fd, length, position)
    finally:
        os.close(fd)
