"""The timer service's pending timers kept in RocketMQ 5.1.1's files (``timerwheel``, ``timerlog/``,
``config/timercheck``, ``config/timermetrics``; ``rmqcli.store.timer_write``), so that a 5.1.1
broker started on the store delivers what ``rmq serve`` had pending, and ``rmq serve`` started on a
store 5.1.1 wrote delivers what that broker had pending (and not what it delivered already).

* At start (``load``), when the files exist, they are read as 5.1.1 reads them
  (``rmqcli.store.timer.pending``): the wheel's pending timers are held by the service at once, and
  the timer queue is read from the checkpoint's queue offset (5.1.1's ``reviseQueueOffset``).
  Without them the queue is read from where the service's old progress says, and they are created
  with the first timer (as 5.1.1 creates them at start; a store never given a timer has none).
* Each timer the service reads from the timer queue is written as 5.1.1's ``TimerEnqueuePutService``
  writes it (``written``): a unit in its slot. One due already is delivered at once, and (rmq's own,
  5.1.1 writes none) gets a unit in its past slot too: 5.1.1 and rmq, started again, go on reading
  the timer queue after the message of the timerlog's last unit, and would otherwise deliver again
  every due timer read after it.
* ``flush`` (every ``FLUSH_MS``, and at stop), as ``TimerFlushService`` with
  ``prepareTimerCheckPoint`` on a master: the read time is the earliest slot holding a timer not
  delivered yet (never after now), the queue offsets the first timer-queue offset not in the files
  nor delivered, the metrics the count per real topic (+1 a timer, -1 a marker, -1 a delivery).
  A timer delivered after the last flush may be delivered again by whoever starts next (at least
  once, as 5.1.1 after a crash).
"""

from __future__ import annotations

import heapq
import logging
from pathlib import Path

from formats import timer as tfmt
from rmqcli.store.timer import TimerFiles, TimerQueue, pending, read_timer_metrics
from rmqcli.store.timer_write import TimerFileWriter

log = logging.getLogger(__name__)

FLUSH_MS = 1000  # timerFlushIntervalMs
NORMAL, ROLL = 1, 2  # the service's entry kinds of a message and of a rolled timer (service.*)
# a due timer's unit is written when its slot is at most this far back (at precision 1000 ms: a
# week), so that it can never land in the slot of a timer still to come (the wheel holds two weeks)
PAST_UNITS_MS = (tfmt.SLOTS_TOTAL - tfmt.TIMER_BLANK_SLOTS) * 1000


class WheelFiles:
    """The service's side of the timer files: what is in them and not delivered yet."""

    def __init__(self, root: Path, precision_ms: int, window: int = tfmt.DEFAULT_ROLL_WINDOW_SLOTS):
        self.root = root
        self.precision_ms = precision_ms
        self.window = window  # timerRollWindowSlots
        # made when a store has the files, else with the first timer (a store never given one has none)
        self.writer: TimerFileWriter | None = (
            TimerFileWriter(root, precision_ms) if TimerFiles(root).present() else None
        )
        self.metrics: dict[str, int] = read_timer_metrics(root / tfmt.METRICS_FILE) or {}
        self._pending: dict[int, tuple[int, str | None]] = {}  # key -> (slot ms, topic counted)
        self._slots: list[tuple[int, int]] = []  # (slot ms, key), lazily cleaned
        self._direct: set[int] = set()  # queue offsets read when due already, not delivered yet
        self._last_flush = 0
        self._next_key = -1  # keys of wheel timers whose message is not in the timer queue

    def load(self, queue: TimerQueue, now: int) -> tuple[int | None, list[tuple[int, int, int, int, int]]]:
        """When the files existed: the timer-queue offset to read from and the wheel's pending
        timers as service entries ``(due, NORMAL or ROLL, key, CommitLog offset, enqueue ms)`` (a
        rolled unit is due when its window slot is read); else ``(None, [])``."""
        if self.writer is None or not self.writer.existed:
            return None, []
        state = pending(TimerFiles(self.root, self.precision_ms), queue, now)
        for problem in state.problems:
            log.error("timer files: %s at byte %s: %s", problem.file, problem.offset, problem.message)
        entries = []
        for t in state.timers:
            if t.source != "wheel" or (t.state != "pending" and not (t.rolled and t.state == "marker")):
                continue
            key = t.queue_offset
            if key is None or key < 0:
                key, self._next_key = self._next_key, self._next_key - 1
            self._track(key, t.slot_ms, t.topic)
            enqueue = t.write_ms if t.write_ms is not None else now
            if t.rolled:
                entries.append((t.slot_ms + self.precision_ms, ROLL, key, t.commitlog_offset, enqueue))
            else:
                entries.append((t.out_ms + self.precision_ms, NORMAL, key, t.commitlog_offset, enqueue))
        return state.queue_offset, entries

    def _track(self, key: int, slot_ms: int, topic: str | None) -> None:
        self._pending[key] = (slot_ms, topic)
        heapq.heappush(self._slots, (slot_ms, key))

    def written(
        self, queue_offset: int, physical: int, size: int, out_ms: int, delete: bool, topic: str, now: int
    ) -> None:
        """A timer the service read from the timer queue (``TimerEnqueuePutService``)."""
        if self.writer is None:
            self.writer = TimerFileWriter(self.root, self.precision_ms)
        write = now // self.precision_ms * self.precision_ms
        if out_ms < write:  # due already: put at once (the service holds it due now)
            self._direct.add(queue_offset)
            if out_ms >= write - PAST_UNITS_MS * self.precision_ms // 1000:
                # rmq's own: a unit in its past slot (never read again), so that the queue offset
                # after the timerlog's last unit (``reviseQueueOffset``) is where reading goes on
                self.writer.enqueue(out_ms, write, physical, size, topic, delete, self.window)
            return
        _pos, slot = self.writer.enqueue(out_ms, write, physical, size, topic, delete, self.window)
        if topic:
            self.metrics[topic] = self.metrics.get(topic, 0) + (-1 if delete else 1)
        self._track(queue_offset, slot, None if delete else topic)

    def done(self, key: int) -> None:
        """A timer delivered (or skipped) by the service."""
        self._direct.discard(key)
        found = self._pending.pop(key, None)
        if found is not None and found[1]:
            topic = found[1]
            self.metrics[topic] = self.metrics.get(topic, 0) - 1

    def read_time(self, now: int) -> int:
        """The earliest slot with a timer not delivered yet, never after now."""
        while self._slots and self._pending.get(self._slots[0][1], (None,))[0] != self._slots[0][0]:
            heapq.heappop(self._slots)
        floor = now // self.precision_ms * self.precision_ms
        return min(self._slots[0][0], floor) if self._slots else floor

    def flush(self, scanned: int, now: int, force: bool = False) -> None:
        """The checkpoint and what it names to disk, at most every ``FLUSH_MS`` unless ``force``."""
        if self.writer is None or (not force and now - self._last_flush < FLUSH_MS):
            return
        self._last_flush = now
        offset = min([scanned, *self._direct])
        try:
            self.writer.flush(self.read_time(now), offset, self.metrics)
        except OSError:
            log.exception("flushing the timer files failed")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
