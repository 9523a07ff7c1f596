"""Write consume queues as ``ConsumeQueue.putMessagePositionInfo`` (4.9.x) does (formats.md §2.4)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from formats.consumequeue import (
    CQ_UNIT_DTYPE,
    CQ_UNIT_SIZE,
    CQ_UNIT_STRUCT,
    FILLER_UNIT,
    is_filler_unit,
)
from rmqcli.store.read.consumequeue import RECOVER_FROM_LAST, valid_units_in
from rmqcli.store.write.files import WritableFileQueue

log = logging.getLogger(__name__)


def cq_file_size(configured: int) -> int:
    """``MessageStoreConfig.getMappedFileSizeConsumeQueue``: rounded up to whole units."""
    return math.ceil(configured / CQ_UNIT_SIZE) * CQ_UNIT_SIZE


class ConsumeQueueWriter:
    """One ``consumequeue/<topic>/<queueId>/`` directory."""

    def __init__(self, directory: Path, file_size: int):
        self.files = WritableFileQueue(directory, cq_file_size(file_size))
        self.max_physic_offset = -1
        self.min_logic_offset = 0

    def recover(self) -> list[Path]:
        """``ConsumeQueue.recover`` (formats.md §6.5): from the third-last file on, units are read
        until the first invalid one; a completely valid file continues into the next. Files after
        the recovered end are deleted, as ``truncateDirtyFiles`` does; their paths are returned.
        """
        self.files.open_existing()
        files = self.files.files
        size = self.files.file_size
        start = max(0, len(files) - RECOVER_FROM_LAST)
        kept = files[:start]
        for f in files[start:]:
            kept.append(f)
            units = valid_units_in(f.read(0, size))
            f.wrote = units * CQ_UNIT_SIZE
            if units:
                offset, length, _ = CQ_UNIT_STRUCT.unpack_from(
                    f.read((units - 1) * CQ_UNIT_SIZE, CQ_UNIT_SIZE)
                )
                self.max_physic_offset = offset + length
            if f.wrote < size:
                break
        removed = []
        for f in files[len(kept) :]:
            f.close()
            f.path.unlink()
            removed.append(f.path)
        self.files.files = kept
        if self.files.files:
            self.min_logic_offset = self.files.files[0].from_offset
        return removed

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """``ConsumeQueue.correctMinOffset`` (4.9.x, run at start-up by ``recoverTopicQueueTable``):
        the queue starts at the first unit of its first file that points at or past the CommitLog's
        minimum offset (fillers skipped, as ``rmqcli.store.read.consumequeue`` reads it)."""
        if not self.files.files:
            return
        first = self.files.files[0]
        data = first.read(0, first.wrote)
        for i, (offset, size, tags) in enumerate(CQ_UNIT_STRUCT.iter_unpack(data)):
            if offset >= phy_min_offset and not is_filler_unit(offset, size, tags):
                self.min_logic_offset = first.from_offset + i * CQ_UNIT_SIZE
                return

    def truncate_dirty(self, phy_offset: int) -> list[Path]:
        """``ConsumeQueue.truncateDirtyLogicFiles`` (4.9.x, formats.md §6.6): drop units at or past
        ``phy_offset``. Whole files whose first unit is dirty are closed and returned for the caller
        to delete; the tail of the last kept file is zeroed (the broker leaves stale bytes there).
        """
        import numpy as np

        self.max_physic_offset = phy_offset
        removed: list[Path] = []
        size = self.files.file_size
        while self.files.files:
            mf = self.files.files[-1]
            data = mf.read(0, size)
            units = np.frombuffer(data, dtype=np.dtype(CQ_UNIT_DTYPE), count=len(data) // CQ_UNIT_SIZE)
            offset = units["commitlog_offset"].astype(np.int64)
            length = units["size"].astype(np.int64)
            kept = (offset >= 0) & (length > 0) & (offset < phy_offset)  # is_valid_unit, before the cut
            if len(units):
                kept[0] = offset[0] < phy_offset  # the first unit is read as it is
            count = len(units) if kept.all() else int(np.argmin(kept))
            if count == 0:
                mf.close()
                removed.append(mf.path)
                self.files.files.pop()
                continue
            self.max_physic_offset = int(offset[count - 1] + length[count - 1])
            pos = count * CQ_UNIT_SIZE
            if pos < size and np.frombuffer(data, dtype=np.uint8)[pos:].any():  # stale units: zeroed
                mf.write_at(pos, bytes(size - pos))
            mf.wrote = pos
            break
        if not self.files.files:
            self.max_physic_offset = phy_offset
        return removed

    @property
    def max_offset(self) -> int:
        """``maxOffsetInQueue``: the next queue offset."""
        return self.files.max_offset // CQ_UNIT_SIZE

    def put(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """``putMessagePositionInfo``; returns False when the unit was not written (a duplicate)."""
        if offset + size <= self.max_physic_offset:
            return False
        expect = cq_offset * CQ_UNIT_SIZE
        mf = self.files.last_for(expect)
        if mf.first_in_queue and cq_offset != 0 and mf.wrote == 0:
            self.min_logic_offset = expect
            self._fill_pre_blank(mf, expect)
        if cq_offset != 0:
            current = mf.from_offset + mf.wrote
            if expect < current:
                return False
            if expect != current:
                log.warning("[BUG]logic queue order maybe wrong, expect %d current %d", expect, current)
        self.max_physic_offset = offset + size
        mf.append(CQ_UNIT_STRUCT.pack(offset, size, tags_code))
        return True

    @staticmethod
    def _fill_pre_blank(mf, until: int) -> None:
        """``ConsumeQueue.fillPreBlank``: filler units up to ``until`` within the first file."""
        count = (until % mf.size) // CQ_UNIT_SIZE
        if count:
            mf.append(FILLER_UNIT * count)

    def flush(self) -> None:
        self.files.flush()

    def close(self) -> None:
        self.files.close()
