"""Write the timer store of RocketMQ 5.1.1 (``formats.timer``) as its ``TimerMessageStore`` does, for
``rmq serve``'s timer service: units appended to ``timerlog/`` and chained into their wheel slot
(``doEnqueue``, ``TimerLog.append``: a blank ends a file, the next is created full size),
``config/timercheck`` (``prepareTimerCheckPoint`` + ``TimerCheckpoint.flush``) and
``config/timermetrics`` (``TimerMetrics.persist``, its ``.bak`` kept).

On open the timerlog is recovered as 5.1.1 recovers it (``rmqcli.store.timer``: read to its first bad
unit, every unit read making its slot point at it), so new units follow the last good one. The wheel
is mapped read-only, its changed slots held in memory and written on ``flush``; files are
fsynced before the checkpoint that names them.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import astuple
from pathlib import Path

from formats import fastjson
from formats import timer as tfmt
from formats.javahash import java_string_hash
from rmqcli.durable import fsync_dir, replace_file
from rmqcli.store.timer import (
    LogScan,
    TimerCheckpoint,
    TimerLog,
    TimerWheel,
    read_timer_checkpoint,
)

topic_hash = functools.lru_cache(maxsize=4096)(java_string_hash)  # a unit's hash of its REAL_TOPIC


def roll_slot(out_ms: int, write_ms: int, window: int, precision_ms: int) -> int | None:
    """``doEnqueue``'s roll: the slot a timer of ``out_ms`` written at ``write_ms`` goes into when
    it is ``window`` slots or more ahead (``write_ms`` + the window, or + half of it when less than
    a third of a window would be left after it), None when it goes into its own slot."""
    span = window * precision_ms
    if out_ms - write_ms < span:
        return None
    if out_ms - write_ms - span < window // 3 * precision_ms:
        return write_ms + window // 2 * precision_ms
    return write_ms + span


def write_checkpoint(root: Path, checkpoint: TimerCheckpoint) -> None:
    """``config/timercheck`` (``TimerCheckpoint.flush``): the fields at the start of its page."""
    (root / tfmt.CHECKPOINT_FILE).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / tfmt.CHECKPOINT_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < tfmt.CHECKPOINT_PAGE:
            os.ftruncate(fd, tfmt.CHECKPOINT_PAGE)
        os.pwrite(fd, tfmt.CHECKPOINT_STRUCT.pack(*astuple(checkpoint)), 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_metrics(root: Path, document: dict) -> None:
    """``config/timermetrics`` (``TimerMetrics.persist``, its ``.bak`` kept): ``document`` is the
    ``TimerMetricsSerializeWrapper`` (``dataVersion``, ``timingCount``)."""
    replace_file(root / tfmt.METRICS_FILE, fastjson.dumps(document).encode(), backup=True)


class TimerFileWriter:
    """The timer files of one store, open for writing."""

    def __init__(self, root: Path, precision_ms: int, file_size: int | None = None):
        self.root = Path(root)
        self.precision_ms = precision_ms
        self.existed = any(
            p.exists()
            for p in (root / tfmt.WHEEL_FILE, root / tfmt.TIMERLOG_DIR, root / tfmt.CHECKPOINT_FILE)
        )
        self.log_dir = self.root / tfmt.TIMERLOG_DIR
        self.log_dir.mkdir(parents=True, exist_ok=True)
        (self.root / "config").mkdir(parents=True, exist_ok=True)
        wheel_path = self.root / tfmt.WHEEL_FILE
        self._wheel_fd = os.open(wheel_path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self._wheel_fd).st_size == 0:
            os.ftruncate(self._wheel_fd, tfmt.WHEEL_LENGTH)
        self.wheel = TimerWheel(wheel_path, precision_ms)  # CorruptDataError for a wrong length
        log = TimerLog(self.log_dir, file_size)
        self.file_size = log.file_size
        ckpt = read_timer_checkpoint(self.root / tfmt.CHECKPOINT_FILE)
        self.checkpoint = ckpt or TimerCheckpoint()
        begin = self.checkpoint.last_timer_log_flush_pos - (self.file_size if log.queue.files else 0)
        scan: LogScan = log.scan(max(begin, 0))
        log.close()
        for unit in scan.units:  # recoverAndRevise
            self.wheel.revise(unit)
        self.end = scan.end
        self._log_fd: int | None = None
        self._log_from = -1
        self._counter = self.checkpoint.counter
        self._metrics_written: dict[str, int] | None = None

    # --- the timerlog -----------------------------------------------------------------------------
    def _file(self, pos: int) -> int:
        """The descriptor of the timerlog file holding ``pos`` (created full size when new)."""
        start = pos - pos % self.file_size
        if self._log_fd is not None and self._log_from == start:
            return self._log_fd
        if self._log_fd is not None:
            os.fsync(self._log_fd)
            os.close(self._log_fd)
        path = self.log_dir / f"{start:020d}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size < self.file_size:
            os.ftruncate(fd, self.file_size)
            fsync_dir(self.log_dir)
        self._log_fd, self._log_from = fd, start
        return fd

    def _append(self, unit: bytes) -> int:
        """``TimerLog.append``: where the unit went (a blank first when it does not fit)."""
        at = self.end % self.file_size
        if len(unit) + tfmt.MIN_BLANK_LEN > self.file_size - at:
            blank = tfmt.BLANK_STRUCT.pack(self.file_size - at, 0, tfmt.BLANK_MAGIC_CODE)
            os.pwrite(self._file(self.end), blank, at)
            self.end += self.file_size - at
            at = 0
        pos = self.end
        os.pwrite(self._file(pos), unit, at)
        self.end += len(unit)
        return pos

    # --- doEnqueue --------------------------------------------------------------------------------
    def enqueue(
        self,
        out_ms: int,
        write_ms: int,
        offset_py: int,
        size_py: int,
        real_topic: str,
        delete: bool,
        window: int = tfmt.DEFAULT_ROLL_WINDOW_SLOTS,
    ) -> tuple[int, int]:
        """One timer into the wheel, as ``doEnqueue`` with ``currWriteTimeMs`` ``write_ms``: a time
        ``window`` slots (``timerRollWindowSlots``) or more ahead goes into the window's slot with
        ``MAGIC_ROLL``. Returns (timerlog position, slot time)."""
        prec = self.precision_ms
        slot_ms = roll_slot(out_ms, write_ms, window, prec)
        magic = tfmt.MAGIC_DEFAULT if slot_ms is None else tfmt.MAGIC_DEFAULT | tfmt.MAGIC_ROLL
        slot_ms = out_ms if slot_ms is None else slot_ms
        if delete:
            magic |= tfmt.MAGIC_DELETE
        index = tfmt.slot_index(slot_ms, prec)
        time_slot, first, last, num, slot_magic = self.wheel.slot(index)
        if time_slot != slot_ms // prec:  # getSlot: another time's slot reads as empty
            first, last, num, slot_magic = -1, -1, 0, 0
        unit = tfmt.UNIT_STRUCT.pack(
            tfmt.UNIT_SIZE,
            last,
            magic,
            write_ms,
            slot_ms - write_ms,
            offset_py,
            size_py,
            topic_hash(real_topic) if real_topic else 0,
            0,
        )
        pos = self._append(unit)
        first = pos if first == -1 else first
        self.wheel.put(index, (slot_ms // prec, first, pos, num - 1 if delete else num + 1, slot_magic))
        return pos, slot_ms

    # --- flush ------------------------------------------------------------------------------------
    def flush(self, read_time_ms: int, queue_offset: int, metrics: dict[str, int]) -> None:
        """The timerlog and the wheel to disk, then the checkpoint (``prepareTimerCheckPoint`` of a
        master: read time, flushed timerlog end, the queue offset as both queue offsets), then the
        metrics when they changed."""
        if self._log_fd is not None:
            os.fsync(self._log_fd)
        for index, value in sorted(self.wheel.changed.items()):
            os.pwrite(self._wheel_fd, tfmt.SLOT_STRUCT.pack(*value), index * tfmt.SLOT_SIZE)
        os.fsync(self._wheel_fd)
        self.wheel.saved()
        now = int(time.time() * 1000)
        self._counter += 1
        self.checkpoint = TimerCheckpoint(
            read_time_ms, self.end, queue_offset, queue_offset, 0, now, self._counter
        )
        write_checkpoint(self.root, self.checkpoint)
        if metrics != self._metrics_written:
            document = {
                "dataVersion": {"counter": self._counter, "stateVersion": 0, "timestamp": now},
                "timingCount": {t: {"count": n, "timeStamp": now} for t, n in sorted(metrics.items())},
            }
            write_metrics(self.root, document)
            self._metrics_written = dict(metrics)

    def close(self) -> None:
        for fd in (self._log_fd, self._wheel_fd):
            if fd is not None:
                os.close(fd)
        self._log_fd = None
        self.wheel.close()
