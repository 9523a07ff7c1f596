"""Read consume queues: fixed 20-byte units in files named by logical byte offset.

formats.md §2 (``ConsumeQueue.java``): unit index = queue offset; the valid region of a file
ends at the first unit that is not ``offset >= 0 && size > 0``; filler units pad the head of a
queue whose first file starts past offset 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from formats.consumequeue import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, CQ_UNIT_STRUCT, is_filler_unit
from rmqcli.errors import NotFoundError
from rmqcli.store.mapped import MappedFile, MappedFileQueue

RECOVER_FROM_LAST = 3  # ConsumeQueue.recover starts at the third-last file


@dataclass(frozen=True, slots=True)
class CqUnit:
    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int

    @property
    def is_filler(self) -> bool:
        return is_filler_unit(self.commitlog_offset, self.size, self.tags_code)


_VALID_CHUNK = 1 << 14  # units checked at a time: a queue's valid run usually ends early in its file
_SMALL_FILE = 64 * CQ_UNIT_SIZE  # bytes: up to this, units are checked one by one


def valid_units_in(buf, limit: int | None = None) -> int:
    """Number of leading valid units in a file's bytes (``ConsumeQueue.recover``).

    Checked a chunk at a time, so the zeros after a queue's last unit are read no further than
    the chunk that holds its end.
    """
    limit = len(buf) if limit is None else limit
    if limit <= _SMALL_FILE:  # a few units: plain unpacking costs less than numpy's set-up
        count = 0
        for offset, size, _ in CQ_UNIT_STRUCT.iter_unpack(buf[: limit - limit % CQ_UNIT_SIZE]):
            if offset < 0 or size <= 0:
                break
            count += 1
        return count
    import numpy as np

    units = np.frombuffer(buf, dtype=CQ_UNIT_DTYPE, count=limit // CQ_UNIT_SIZE)
    for first in range(0, len(units), _VALID_CHUNK):
        chunk = units[first : first + _VALID_CHUNK]
        invalid = (chunk["commitlog_offset"] < 0) | (chunk["size"] <= 0)  # not ``is_valid_unit``
        if invalid.any():
            return first + int(np.argmax(invalid))
    return len(units)


class ConsumeQueue:
    """One ``consumequeue/<topic>/<queueId>/`` directory."""

    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int | None = None):
        self.topic = topic
        self.queue_id = queue_id
        self.directory = directory
        self.queue = MappedFileQueue.open(directory, file_size)
        self._valid: dict[int, int] = {}  # a file's first offset -> its leading valid units

    @property
    def files(self) -> list[MappedFile]:
        return self.queue.files

    def valid_units(self, mf: MappedFile) -> int:
        units = self._valid.get(mf.from_offset)
        if units is None:
            units = self._valid[mf.from_offset] = valid_units_in(mf.map())
        return units

    @property
    def min_logic_offset(self) -> int:
        """Queue offset of the first unit on disk (units may be fillers)."""
        return self.queue.min_offset // CQ_UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """``maxOffsetInQueue``: the next queue offset, counted like the broker's recovery."""
        if not self.files:
            return 0
        # ``ConsumeQueue.recover`` walks from the third-last file; a full file continues.
        first = max(0, len(self.files) - RECOVER_FROM_LAST)
        end = self.files[first].from_offset
        for mf in self.files[first:]:
            units = self.valid_units(mf)
            end = mf.from_offset + units * CQ_UNIT_SIZE
            if units * CQ_UNIT_SIZE < self.queue.file_size:
                break
        return end // CQ_UNIT_SIZE

    def min_offset(self, commitlog_min_offset: int = 0) -> int:
        """``minOffsetInQueue`` after ``correctMinOffset(commitlog_min_offset)`` (4.9.x).

        The first unit of the first file that points at or past the CommitLog's minimum; fillers
        and expired units are skipped.
        """
        if not self.files:
            return 0
        mf = self.files[0]
        base = mf.from_offset // CQ_UNIT_SIZE
        for i, (offset, size, tags) in enumerate(self._iter_file(mf)):
            if offset >= commitlog_min_offset and not is_filler_unit(offset, size, tags):
                return base + i
        return base

    def _iter_file(self, mf: MappedFile, start: int = 0, count: int | None = None):
        units = self.valid_units(mf)
        stop = units if count is None else min(units, start + count)
        if start >= stop:
            return iter(())
        buf = mf.map()
        return CQ_UNIT_STRUCT.iter_unpack(buf[start * CQ_UNIT_SIZE : stop * CQ_UNIT_SIZE])

    def unit(self, queue_offset: int) -> CqUnit:
        for unit in self.units(queue_offset, 1):
            return unit
        raise NotFoundError(f"{self.topic}:{self.queue_id}: no unit at queue offset {queue_offset}")

    def units(self, from_offset: int = 0, count: int | None = None) -> Iterator[CqUnit]:
        """Units from queue offset ``from_offset`` on, read in bulk per file."""
        remaining = count
        for mf in self.files:
            first = mf.from_offset // CQ_UNIT_SIZE
            units = self.valid_units(mf)
            if from_offset >= first + units:
                if units * CQ_UNIT_SIZE < self.queue.file_size:
                    return
                continue
            start = max(from_offset - first, 0)
            for i, (offset, size, tags) in enumerate(self._iter_file(mf, start, remaining)):
                yield CqUnit(first + start + i, offset, size, tags)
                if remaining is not None:
                    remaining -= 1
            if remaining is not None and remaining <= 0:
                return
            if units * CQ_UNIT_SIZE < self.queue.file_size:
                return

    def close(self) -> None:
        self.queue.close()


def read_cq_file(path: Path) -> Iterator[CqUnit]:
    """Units of a single consume-queue file, its name giving the first queue offset."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise NotFoundError(f"{path}: {exc.strerror}") from exc
    first = int(path.name) // CQ_UNIT_SIZE if path.name.isdigit() else 0
    for i, (offset, size, tags) in enumerate(
        CQ_UNIT_STRUCT.iter_unpack(data[: valid_units_in(data) * CQ_UNIT_SIZE])
    ):
        yield CqUnit(first + i, offset, size, tags)
