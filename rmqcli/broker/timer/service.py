"""The timer's delivery: messages of ``rmq_sys_wheel_timer`` queue 0 put into their real topic at
their time (RocketMQ 5.1.1 ``TimerMessageStore``'s enqueue and dequeue services, simplified).

Progress is kept in 5.1.1's timer files (``files``): each timer read from the timer queue gets its
timerlog unit, and every second (and at stop) the checkpoint says from which slot time and which
timer-queue offset a broker started next goes on. At start, a store with those files has its pending
timers held at once and the queue read from the checkpoint's offset; one without is read from the
consume offset of group ``TIMER_GROUP`` on the timer topic (still kept, in consumerOffset.json). The
queue is read into a heap of ``(due, kind, queue offset, CommitLog offset, enqueue time)``; a message
put while the reader is caught up goes straight into the heap. One ``loop.call_later`` handle waits
for the earliest due time; it delivers what is due (at most ``ROUND`` a callback). After a SIGKILL
what was delivered after the last flush is delivered again (at least once, never lost).

Bounded memory: at most ``cap`` (broker.conf ``timerMaxPending``, rmq's own key, default 100000)
messages are held. Past it the later half of what is held goes back to disk (``horizon``): timers due
from the horizon on are only noted (lowest offset, earliest time) and read again from the timer
queue, in a pass, ``LEAD_MS`` before the earliest of them is due; so a flood of far-future timers
never keeps a due one out (only more than ``cap`` timers due at once wait for room). The delivered
prefix stays at the lowest timer left on disk (after a SIGKILL the timers delivered above it are
delivered again).

It runs on a master only (the controller starts it unless the broker is a slave; a slave acting
as master does not deliver timers).

Roll (``timerRollWindowSlot``): a timer read ``timerRollWindowSlots`` precision units or more
before its time is held until the window's slot (``timer_write.roll_slot``, as ``doEnqueue``), then
put back into the timer queue with ``TIMER_ROLL_TIMES`` one more (``message.rolled``) and read again
from there, as 5.1.1 does; the delivered message keeps ``TIMER_ROLL_TIMES``.

Cancel (``TIMER_DEL_UNIQKEY``): a marker takes the same slot as the message it cancels; markers
sort before messages of the same due time, so the message of the marker's own topic whose
``UNIQ_KEY`` it names (``message.cancelled``) is skipped and the marker itself is never delivered.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from formats import commitlog as fmt
from rmqcli.broker.timer import horizon as hz
from rmqcli.broker.timer import message as tm
from rmqcli.broker.timer.config import TimerConfig
from rmqcli.broker.timer.files import FLUSH_MS, WheelFiles
from rmqcli.errors import CorruptDataError
from rmqcli.store.naming import is_safe_topic_dir
from rmqcli.store.read.commitlog import Record
from rmqcli.store.timer import TimerQueue
from rmqcli.store.timer_write import roll_slot

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

log = logging.getLogger(__name__)

TIMER_GROUP = "CID_RMQ_SYS_TIMER_GROUP"  # rmq's own: the timer queue's delivered prefix
SCAN_CHUNK = 1024  # timer-queue units read per loop callback
ROUND = 2048  # deliveries per loop callback
MAX_WAIT_SECONDS = 3600.0  # the longest single wait (a far time is waited for in steps)
RETRY_MS = 1000  # a delivery the store refused is tried again this much later
LEAD_MS = 30_000  # a pass starts this long before the earliest timer left on disk is due
MAX_QUEUE_ID = 1 << 16  # a REAL_QID beyond is skipped (read from the store: bounded)
DELETE, NORMAL, ROLL = 0, 1, 2  # a marker, a message, a rolled timer (files.NORMAL, files.ROLL)

Entry = tuple[int, int, int, int, int]  # due, kind, queue offset, CommitLog offset, enqueue time


def now_ms() -> int:
    return int(time.time() * 1000)


class TimerService:
    """The pending timer messages of one broker and their delivery."""

    def __init__(self, ctl: BrokerContext):
        self.ctl = ctl
        self.config: TimerConfig = ctl.config.timer
        self.cap = self.config.max_pending  # timers held in memory (about 200 bytes each)
        self.heap: list[Entry] = []
        self.scanned: int | None = None  # next timer-queue offset to read; None until started
        self.delivered = 0
        self.due_enqueued: tuple[int, int] | None = None  # (when, store time) of the last timer due when read
        self._open: list[int] = []  # queue offsets read and not yet done (a heap)
        self._done: set[int] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for: int | None = None
        self._soon: asyncio.Handle | None = None
        self._deleted_due = -1
        self._deleted: set[tuple[str, str]] = set()  # (real topic, key) of the markers of a due time
        self.horizon: int | None = None  # timers due from then on are left on disk (``horizon``)
        self.deferred = hz.Deferred()
        self._pass: hz.Pass | None = None
        self.evictions = 0
        self._stopped = asyncio.Event()
        self._running = False  # ``run`` arms the loop's timers; ``deliver_due`` drives it by hand
        self.files: WheelFiles | None = None  # 5.1.1's timer files (``files``), opened at start
        self._fixed_now: int | None = None  # ``deliver_due``'s time while it runs

    # --- progress -----------------------------------------------------------------------------
    @property
    def committed(self) -> int:
        """The offset below which the timer queue is delivered."""
        marks = [self.scanned if self.scanned is not None else 0]
        if self._open:
            marks.append(self._open[0])
        for deferred in (self.deferred, self._pass.found if self._pass is not None else None):
            if deferred is not None and deferred.first is not None:
                marks.append(deferred.first)
        return min(marks)

    def _commit(self, force: bool = False) -> None:
        if self.files is not None and self.scanned is not None:
            self.files.flush(self.scanned, now_ms(), force)
        offsets = self.ctl.offsets
        if offsets.query(TIMER_GROUP, tm.TIMER_TOPIC, 0) != self.committed:
            offsets.commit(TIMER_GROUP, tm.TIMER_TOPIC, 0, self.committed)

    def _finish(self, queue_offset: int) -> None:
        if self.files is not None:
            self.files.done(queue_offset)
        if queue_offset < 0:  # a wheel timer whose message is not in the timer queue
            return
        self._done.add(queue_offset)
        while self._open and self._open[0] in self._done:
            self._done.discard(heapq.heappop(self._open))

    # --- reading the timer queue --------------------------------------------------------------
    def arrived(
        self, queue_offset: int, physical: int, out_ms: int, delete: bool, size: int = 0, topic: str = ""
    ) -> None:
        """A message just put into the timer queue (``size`` bytes, for ``topic``): placed at once
        when the reader is caught up."""
        if self._stopped.is_set():
            return
        if (
            self.scanned != queue_offset
            or self._pass is not None
            or not self._place(queue_offset, physical, out_ms, delete)
        ):
            self._schedule_scan()
            return
        if self.files is not None:
            self.files.written(queue_offset, physical, size, out_ms, delete, topic, self._now())
        self.ctl.metrics.timer_enqueued(topic)
        self.scanned = queue_offset + 1
        self._arm()

    def _now(self) -> int:
        """The time: ``deliver_due``'s while it runs, else the clock's."""
        return now_ms() if self._fixed_now is None else self._fixed_now

    def _due(self, out_ms: int, written: int) -> tuple[int, int | None]:
        """When a timer of ``out_ms`` put into the timer queue at ``written`` is taken out of the
        wheel, and its window slot when it is rolled (``roll_slot`` at that time rounded down: the
        same for a unit read again in a pass)."""
        precision = self.config.precision_ms
        slot = roll_slot(out_ms, written // precision * precision, self.config.roll_window, precision)
        return tm.due_ms(out_ms if slot is None else slot, self.config), slot

    def _hold(self, queue_offset: int, physical: int, out_ms: int, delete: bool, written: int) -> None:
        now = self._now()
        precision = self.config.precision_ms
        # TimerEnqueuePutService: a message already due is put at once with the exact time,
        # others go into the wheel at the write time (rounded down to the precision)
        enqueue = now if out_ms < now // precision * precision else now // precision * precision
        if enqueue == now:
            self.due_enqueued = (now, written)  # rocketmq_timer_enqueue_latency
        due, slot = self._due(out_ms, written)
        kind = ROLL if slot is not None else DELETE if delete else NORMAL
        if slot is not None:
            enqueue = written // precision * precision
        heapq.heappush(self.heap, (due, kind, queue_offset, physical, enqueue))
        heapq.heappush(self._open, queue_offset)

    def _place(
        self,
        offset: int,
        physical: int,
        out_ms: int,
        delete: bool,
        low: bool = False,
        written: int | None = None,
    ) -> bool:
        """A unit read at ``offset``: held when due before the horizon (the pass's target for a
        pass, ``low``: one due before the horizon is held already), else left on disk and noted.
        False when the memory is full of timers that cannot go back (nothing read)."""
        written = self._now() if written is None else written  # the unit's store time
        due = self._due(out_ms, written)[0]
        if low and hz.before(due, self.horizon):
            return True
        target = self._pass.target if low and self._pass is not None else self.horizon
        for _ in range(2):
            if not hz.before(due, target):
                (self._pass.found if low and self._pass is not None else self.deferred).note(offset, due)
                return True
            if len(self.heap) < self.cap:
                self._hold(offset, physical, out_ms, delete, written)
                return True
            if not self._evict():
                return False
            target = self._pass.target if low and self._pass is not None else self.horizon
        return False

    def _evict(self) -> bool:
        """The later half of the held timers back to disk (``horizon.cut``); False when none can."""
        at = hz.cut(sorted(e[0] for e in self.heap), self._now(), LEAD_MS)
        if at is None:
            return False
        kept = []
        for entry in self.heap:
            if entry[0] < at:
                kept.append(entry)
                continue
            self.deferred.note(entry[2], entry[0])
            if self._pass is not None:
                self._pass.found.note(entry[2], entry[0])
        heapq.heapify(kept)
        self.heap = kept
        self._open = [e[2] for e in kept]
        heapq.heapify(self._open)
        self._done.clear()
        self.horizon = hz.lower(self.horizon, at)
        if self._pass is not None:
            self._pass.target = hz.lower(self._pass.target, at)
        self.evictions += 1
        return True

    def _read(self, offset: int, physical: int) -> tuple[int, bool, int, str, int] | None:
        """``(TIMER_OUT_MS, is a cancel marker, record size, REAL_TOPIC, store time)`` of the unit at
        ``offset``; None (logged) if bad."""
        rec = self.ctl.store.look_message(physical)
        try:
            out_ms = int(rec.properties[tm.TIMER_OUT_MS]) if rec is not None else None
        except (KeyError, ValueError):
            out_ms = None
        if rec is None or out_ms is None:
            log.error("timer queue offset %d: no record or no TIMER_OUT_MS; skipped", offset)
            return None
        props = rec.properties
        topic = props.get(fmt.PROPERTY_REAL_TOPIC, "")
        return out_ms, tm.TIMER_DEL_UNIQKEY in props, rec.total_size, topic, tm.written_ms(rec)

    def _schedule_scan(self) -> None:
        if self._soon is None and self.scanned is not None and self._running and not self._stopped.is_set():
            self._soon = asyncio.get_running_loop().call_soon(self._scan)

    def _pass_due(self, now: int) -> bool:
        due = self.deferred.due
        return (
            self._pass is None
            and due is not None
            and due - LEAD_MS <= now
            and len(self.heap) < max(1, self.cap // 2)
        )

    def _units(self, start: int, count: int) -> tuple[int, list]:
        """Up to ``count`` units from ``start`` (moved past what the clean-up removed)."""
        store = self.ctl.store
        units = list(store.unit_tuples(tm.TIMER_TOPIC, 0, start, count))
        if not units:
            low = store.min_offset(tm.TIMER_TOPIC, 0)
            if start < low:
                return low, list(store.unit_tuples(tm.TIMER_TOPIC, 0, low, count))
        return start, units

    def _step_pass(self, budget: int) -> tuple[int, bool]:
        """Read on in the pass: (units read, blocked); the pass ends at the read position."""
        p = self._pass
        assert p is not None and self.scanned is not None
        count = 0
        while count < budget and p.pos < self.scanned:
            p.pos, units = self._units(p.pos, min(256, budget - count, self.scanned - p.pos))
            if not units:
                p.pos = self.scanned
                break
            for physical, _size, _tags in units:
                read = self._read(p.pos, physical)
                if read is not None and not self._place(
                    p.pos, physical, read[0], read[1], low=True, written=read[4]
                ):
                    return count, True
                p.pos += 1
                count += 1
        if p.pos >= self.scanned:
            self.horizon, self.deferred, self._pass = p.target, p.found, None
        return count, False

    def _step_forward(self, budget: int) -> tuple[int, bool]:
        """Read new units of the timer queue: (units read, blocked)."""
        assert self.scanned is not None
        count = 0
        while count < budget:
            self.scanned, units = self._units(self.scanned, min(256, budget - count))
            if not units:
                break
            for physical, _size, _tags in units:
                offset = self.scanned
                read = self._read(offset, physical)
                if read is None:
                    heapq.heappush(self._open, offset)
                    self._finish(offset)
                elif not self._place(offset, physical, read[0], read[1], written=read[4]):
                    return count, True
                else:
                    if self.files is not None:
                        self.files.written(offset, physical, read[2], read[0], read[1], read[3], self._now())
                    self.ctl.metrics.timer_enqueued(read[3])
                self.scanned = offset + 1
                count += 1
        return count, False

    def _scan(self, arm: bool = True, now: int | None = None) -> None:
        """Read up to ``SCAN_CHUNK`` units (a pass first when one is due or under way, else new
        units); then, with ``arm``, go on reading soon and arm the delivery (on the running loop)."""
        self._soon = None
        if self._pass_due(self._now() if now is None else now):
            assert self.deferred.first is not None
            self._pass = hz.Pass(self.deferred.first)
        if self._pass is not None:
            count, blocked = self._step_pass(SCAN_CHUNK)
        else:
            count, blocked = self._step_forward(SCAN_CHUNK)
        self._commit()
        if not arm:
            return
        if count >= SCAN_CHUNK or (self._pass is not None and not blocked):
            self._schedule_scan()
        self._arm()

    # --- delivering ---------------------------------------------------------------------------
    def _arm(self) -> None:
        if self.scanned is None or not self._running or self._stopped.is_set():
            return
        wake = self.heap[0][0] if self.heap else None
        room = len(self.heap) < max(1, self.cap // 2)
        if self.deferred.due is not None and self._pass is None and room:  # a pass, in time
            start = self.deferred.due - LEAD_MS
            wake = start if wake is None else min(wake, start)
        if wake is None:
            return
        if self._handle is not None:
            if self._armed_for == wake:
                return
            self._handle.cancel()
        delay = min(max(0.0, (wake - now_ms()) / 1000), MAX_WAIT_SECONDS)  # re-armed when not due
        self._handle = asyncio.get_running_loop().call_later(delay, self._fire)
        self._armed_for = wake

    def _fire(self) -> None:
        self._handle = None
        self._armed_for = None
        now = now_ms()
        count = 0
        delivered_any = False
        while self.heap and self.heap[0][0] <= now and count < ROUND:
            entry = heapq.heappop(self.heap)
            count += 1
            if not self._deliver(entry, now):
                due, kind, offset, physical, enqueue = entry
                heapq.heappush(self.heap, (now + RETRY_MS, kind, offset, physical, enqueue))
                break
            delivered_any = True
            self._finish(entry[2])
        if delivered_any and self.ctl.store.sync_flush:
            self.ctl.store.flushed()  # GroupCommitService.wakeup for the unwaited puts
        self._commit()
        if self.scanned is not None and (
            self._pass is not None
            or self._pass_due(now)
            or self.scanned < self.ctl.store.max_offset(tm.TIMER_TOPIC, 0)
        ):
            self._schedule_scan()
        if count >= ROUND and self.heap and self.heap[0][0] <= now:
            self._handle = asyncio.get_running_loop().call_soon(self._fire)  # type: ignore[assignment]
            self._armed_for = self.heap[0][0]
            return
        self._arm()

    def _deliver(self, entry: Entry, now: int) -> bool:
        """One due entry: a marker noted, a cancelled message skipped, the rest put into its real
        topic. False when the store refused it (tried again later)."""
        due, kind, offset, physical, enqueue = entry
        store = self.ctl.store
        if due != self._deleted_due:
            self._deleted_due, self._deleted = due, set()
        rec = store.look_message(physical)
        if rec is None:
            log.error("timer queue offset %d: no record at %d; skipped", offset, physical)
            return True
        real_topic = rec.properties.get(fmt.PROPERTY_REAL_TOPIC, "")
        if kind == ROLL:  # a rolled message its slot's markers cancel is dropped (the delete list)
            if self._deleted and tm.TIMER_DEL_UNIQKEY not in rec.properties:
                if tm.cancelled(self._deleted, real_topic, rec.properties.get(fmt.PROPERTY_UNIQ_KEY)):
                    return True
            return self._roll(rec, enqueue, now)
        if kind == DELETE:
            self._deleted.add((real_topic, rec.properties.get(tm.TIMER_DEL_UNIQKEY, "")))
            return True
        if self._deleted and tm.cancelled(
            self._deleted, real_topic, rec.properties.get(fmt.PROPERTY_UNIQ_KEY)
        ):
            return True
        try:
            inner = tm.delivered(rec, enqueue, now)
        except ValueError:
            log.error("timer queue offset %d: bad REAL_QID; skipped", offset)
            return True
        if not inner.topic or not is_safe_topic_dir(inner.topic) or not 0 <= inner.queue_id < MAX_QUEUE_ID:
            log.error(
                "timer queue offset %d: real topic %r queue %d; skipped", offset, inner.topic, inner.queue_id
            )
            return True
        if store.disk_full:
            return False
        try:
            store.put_inner(inner)
        except Exception:
            log.exception("delivering timer queue offset %d failed", offset)
            return False
        self.delivered += 1
        self.ctl.metrics.timer_dequeued(inner.topic)
        return True

    def _roll(self, rec: Record, enqueue: int, now: int) -> bool:
        """A rolled timer's window slot has come: back into the timer queue (``doPut`` with roll),
        read again from there. False when the store refused it (tried again later)."""
        store = self.ctl.store
        if store.disk_full:
            return False
        try:
            result = store.put_inner(tm.rolled(rec, enqueue, now))
        except Exception:
            log.exception("rolling timer queue offset %d failed", rec.queue_offset)
            return False
        props = rec.properties
        self.arrived(
            result.queue_offset,
            result.physical_offset,
            int(props[tm.TIMER_OUT_MS]),
            tm.TIMER_DEL_UNIQKEY in props,
            result.size,
            props.get(fmt.PROPERTY_REAL_TOPIC, ""),
        )
        return True

    def deliver_due(self, now: int) -> int:
        """Read what the timer queue holds and deliver every timer due by ``now`` (ms) here and
        now, as the running service would have by then (for a broker driven without its event
        loop's timers, e.g. in process): how many timers were done (a roll is not counted)."""
        self._fixed_now = now
        try:
            return self._deliver_due(now)
        finally:
            self._fixed_now = None

    def _deliver_due(self, now: int) -> int:
        if self.scanned is None:
            self._start_reading()
        done = rolls = 0
        while True:
            before = (self.scanned, self._pass.pos if self._pass is not None else None, done, rolls)
            self._scan(arm=False, now=now)
            while self.heap and self.heap[0][0] <= now:
                entry = heapq.heappop(self.heap)
                if not self._deliver(entry, now):
                    heapq.heappush(self.heap, entry)
                    self._commit()
                    return done
                if entry[1] == ROLL:
                    rolls += 1
                else:
                    done += 1
                self._finish(entry[2])
            after = (self.scanned, self._pass.pos if self._pass is not None else None, done, rolls)
            busy = self._pass is not None or self._pass_due(now)
            if after == before or (self.heap and not busy):  # nothing more, or nothing due held
                self._commit()
                return done

    # --- life ---------------------------------------------------------------------------------
    def _start_reading(self) -> None:
        """Go on from the persisted progress (within the timer queue's units): the timer files'
        (their pending timers held at once), else the offset of ``TIMER_GROUP``."""
        store = self.ctl.store
        start = self.ctl.offsets.query(TIMER_GROUP, tm.TIMER_TOPIC, 0)
        low, high = store.min_offset(tm.TIMER_TOPIC, 0), store.max_offset(tm.TIMER_TOPIC, 0)
        if self.files is None:
            try:
                self.files = WheelFiles(store.writer.root, self.config.precision_ms, self.config.roll_window)
            except (OSError, CorruptDataError) as exc:
                log.error("timer files not kept: %s", exc)
            else:
                queue = TimerQueue(low, high, self._units_from, store.look_message)
                from_files, entries = self.files.load(queue, now_ms())
                if from_files is not None:
                    start = from_files
                for entry in entries:
                    heapq.heappush(self.heap, entry)
        self.scanned = min(max(start, low), high)

    def _units_from(self, start: int) -> Iterator[tuple[int, int, int]]:
        """``(queue offset, CommitLog offset, size)`` of the timer queue's units from ``start``."""
        store = self.ctl.store
        pos, high = start, store.max_offset(tm.TIMER_TOPIC, 0)
        while pos < high:
            chunk = list(store.unit_tuples(tm.TIMER_TOPIC, 0, pos, min(256, high - pos)))
            if not chunk:
                return
            for physical, size, _tags in chunk:
                yield pos, physical, size
                pos += 1

    async def run(self) -> None:
        """Read the timer queue from the persisted offset and deliver until cancelled."""
        self._stopped.clear()
        self._running = True
        self._start_reading()
        self._scan()
        flusher = asyncio.get_running_loop().create_task(self._flush_files())
        try:
            await self._stopped.wait()
        finally:
            flusher.cancel()
            self.stop()

    async def _flush_files(self) -> None:
        """The timer files to disk every ``FLUSH_MS`` (5.1.1's ``TimerFlushService``)."""
        while True:
            await asyncio.sleep(FLUSH_MS / 1000)
            if self.files is not None and self.scanned is not None:
                self.files.flush(self.scanned, now_ms())

    def stop(self) -> None:
        self._stopped.set()
        self._running = False
        for handle in (self._handle, self._soon):
            if handle is not None:
                handle.cancel()
        self._handle = self._soon = None
        self._armed_for = None
        if self.scanned is not None:
            self._commit(force=True)


def timer_service(ctl: BrokerContext) -> TimerService:
    """The broker's timer service (made on first use; ``BrokerContext.parts``)."""
    return ctl.parts.get(TimerService, lambda: TimerService(ctl))
