"""Read the timer store of RocketMQ 5.1.1 (``formats.timer``): the wheel, the timerlog, the timer
checkpoint and ``config/timermetrics``, and what of it 5.1.1 would still deliver.

``pending`` follows what 5.1.1's ``TimerMessageStore`` does on load and after:

* ``recover``: the timerlog is read from the start of the file holding ``lastTimerLogFlushPos``
  less one file (0 at least) up to the first unit whose size or magic is wrong (``recoverAndRevise``:
  that is the log's end, the rest is cut off), and every unit read makes its slot point at it
  (``TimerWheel.reviseSlot`` with ``force``);
* the timer queue is read again from ``min(queue offset of the last unit's message + 1 (else the
  checkpoint's lastTimerQueueOffset), masterTimerQueueOffset)`` (``reviseQueueOffset``), not below
  the queue's first unit;
* the wheel is read from ``max(lastReadTimeMs, now - 7 days + 60 slots)``: every slot of that time or
  later whose stored time is its own, each chain from ``lastPos`` back along ``prev_pos``
  (``dequeue``).

Of the timers so found, a cancel marker (``MAGIC_DELETE``, or a queued message with
``TIMER_DEL_UNIQKEY``) cancels the messages of its slot whose ``UNIQ_KEY`` it names (5.1.1 matches
on the key alone) and is never delivered; a queued one already due is delivered at once, uncancelled
(a marker then is dropped: ``doPut`` refuses it); a rolled unit (``MAGIC_ROLL``) comes back through
the timer queue and is delivered at its ``TIMER_OUT_MS``. What remains is delivered to
``REAL_TOPIC``/``REAL_QID`` when its slot (``TIMER_OUT_MS``) has passed. A chain reaching past the
timerlog's end, or a unit whose CommitLog record is gone, is reported, not followed.
"""

from __future__ import annotations

import mmap
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from formats import commitlog as fmt
from formats import fastjson
from formats import timer as tfmt
from formats.names import TIMER_TOPIC
from rmqcli.errors import CorruptDataError, NotFoundError
from rmqcli.remoting.javanames import camel
from rmqcli.store.configfiles import config_texts
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.read.commitlog import Record

if TYPE_CHECKING:
    from rmqcli.store.store import Store

TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
SLOT_DTYPE = np.dtype([(name, ">" + code.lower()) for name, code in (
    ("time_slot", "i8"), ("first_pos", "i8"), ("last_pos", "i8"), ("num", "i4"), ("magic", "i4"),
)])  # fmt: skip
assert SLOT_DTYPE.itemsize == tfmt.SLOT_SIZE and list(SLOT_DTYPE.names or ()) == [
    s.name for s in tfmt.TimerSlot.subcons
]


@dataclass(frozen=True)
class TimerCheckpoint:
    """``config/timercheck`` (``TimerCheckpoint``): zeros when the file is absent, as 5.1.1 reads it."""

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def as_json(self) -> dict[str, int]:
        return {camel(k): v for k, v in asdict(self).items()}


def read_timer_checkpoint(path: Path) -> TimerCheckpoint | None:
    """The checkpoint at ``path``; None when there is none (a short file reads as zeros after its
    end: 5.1.1 maps a whole page)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    data = data[: tfmt.CHECKPOINT_STRUCT.size].ljust(tfmt.CHECKPOINT_STRUCT.size, b"\0")
    return TimerCheckpoint(*tfmt.CHECKPOINT_STRUCT.unpack(data))


def read_timer_metrics(path: Path) -> dict[str, int] | None:
    """``config/timermetrics`` (``TimerMetrics``, fastjson): ``{topic: count}``; None when absent.
    Falls back to its ``.bak`` as ``ConfigManager.load`` does. Raises ``CorruptDataError``."""
    for candidate, text, error in config_texts(path):
        if text is None:
            raise CorruptDataError(str(error), str(candidate))
        try:
            data = fastjson.loads(text) if text.strip() else {}
            counts = data.get("timingCount", {}) if isinstance(data, dict) else None
            return {str(t): int(m["count"]) for t, m in counts.items()}
        except (ValueError, TypeError, KeyError, AttributeError):
            raise CorruptDataError("not a timer metrics document", str(candidate)) from None
    return None


@dataclass(frozen=True, slots=True)
class Unit:
    """One timerlog unit and where it is."""

    pos: int
    size: int
    prev_pos: int
    magic: int
    write_time_ms: int
    delay_ms: int
    offset_py: int
    size_py: int
    topic_hash: int
    reserved: int

    @property
    def slot_ms(self) -> int:
        return self.write_time_ms + self.delay_ms

    @property
    def rolled(self) -> bool:
        return bool(self.magic & tfmt.MAGIC_ROLL)

    @property
    def marker(self) -> bool:
        """A cancel marker as ``dequeue`` takes it (delete, not rolled)."""
        return bool(self.magic & tfmt.MAGIC_DELETE) and not self.rolled


@dataclass
class LogScan:
    """The timerlog as ``recoverAndRevise`` reads it: its units from ``start`` up to ``end``; ``bad``
    the unit that stopped it (position, reason) when it was not zeros or a blank."""

    start: int
    end: int
    units: list[Unit] = field(default_factory=list)
    bad: tuple[int, str] | None = None


class TimerLog:
    """``timerlog/``: mapped files named by their first offset."""

    def __init__(self, directory: Path, file_size: int | None = None):
        self.directory = directory
        self.queue = MappedFileQueue.open(directory, file_size)
        self.file_size = self.queue.file_size or file_size or tfmt.DEFAULT_TIMERLOG_FILE_SIZE

    def unit_at(self, pos: int) -> Unit | None:
        """The unit at ``pos``; None when no file holds it."""
        try:
            mf = self.queue.find(pos)
        except NotFoundError:
            return None
        at = pos - mf.from_offset
        raw = mf.read(at, tfmt.UNIT_SIZE)
        if len(raw) < tfmt.UNIT_SIZE:
            return None
        return Unit(pos, *tfmt.UNIT_STRUCT.unpack(raw))

    def scan(self, begin: int = 0) -> LogScan:
        """Read units from the file holding ``begin`` (its start) on, as ``recoverAndRevise`` with
        ``checkTimerLog``: a blank ends a file, anything else not a unit ends the log."""
        files = self.queue.files
        index = max((i for i, f in enumerate(files) if begin >= f.from_offset), default=0)
        start = files[index].from_offset if files else 0
        result = LogScan(start, start)
        for mf in files[index:]:
            buf = mf.map()
            position = 0
            stop = False
            size = len(buf)
            while position + tfmt.MIN_BLANK_LEN <= size:
                head = bytes(buf[position : position + tfmt.MIN_BLANK_LEN])
                unit_size, _prev, magic = tfmt.BLANK_STRUCT.unpack(head)
                if magic == tfmt.BLANK_MAGIC_CODE:
                    break
                if (
                    unit_size != tfmt.UNIT_SIZE
                    or not tfmt.magic_ok(magic)
                    or position + tfmt.UNIT_SIZE > size
                ):
                    stop = True
                    if any(buf[position : position + tfmt.UNIT_SIZE]):
                        result.bad = (mf.from_offset + position, f"size {unit_size}, magic {magic:#x}")
                    break
                raw = bytes(buf[position : position + tfmt.UNIT_SIZE])
                result.units.append(Unit(mf.from_offset + position, *tfmt.UNIT_STRUCT.unpack(raw)))
                position += tfmt.UNIT_SIZE
            result.end = mf.from_offset + position
            if stop:
                break
        return result

    def close(self) -> None:
        for mf in self.queue.files:
            mf.close()


class TimerWheel:
    """``timerwheel``: ``2 * SLOTS_TOTAL`` slots (``TimerWheel``), mapped read-only; slots changed
    here (``revise``, ``put``) are held in ``changed`` until the caller writes them (``saved``).
    A missing or empty file reads as zeros."""

    def __init__(self, path: Path, precision_ms: int):
        self.path = path
        self.precision_ms = precision_ms
        self.changed: dict[int, tuple[int, int, int, int, int]] = {}
        self._map: mmap.mmap | None = None
        self.base: np.ndarray | None = None
        size = path.stat().st_size if path.exists() else 0
        if size not in (0, tfmt.WHEEL_LENGTH):  # TimerWheel's constructor refuses it too
            raise CorruptDataError(f"timer wheel length {size} != expected {tfmt.WHEEL_LENGTH}", str(path))
        if size:
            with open(path, "rb") as handle:
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            self.base = np.frombuffer(self._map, SLOT_DTYPE)

    def slot(self, index: int) -> tuple[int, int, int, int, int]:
        """``(time_slot, first_pos, last_pos, num, magic)`` of slot ``index``."""
        found = self.changed.get(index)
        if found is not None:
            return found
        if self.base is None:
            return (0, 0, 0, 0, 0)
        return tuple(int(v) for v in self.base[index].tolist())  # type: ignore[return-value]

    def put(self, index: int, value: tuple[int, int, int, int, int]) -> None:
        self.changed[index] = value

    def saved(self) -> None:
        """The changed slots are on disk now (and seen through the mapping)."""
        self.changed.clear()

    def live(self, read_time_ms: int) -> Iterator[tuple[int, int, int, int, int]]:
        """``(index, slot time ms, first_pos, last_pos, num)`` of the slots ``dequeue`` reads from
        ``read_time_ms`` on: those of the wheel's window whose stored time is their own."""
        total = 2 * tfmt.SLOTS_TOTAL
        first = read_time_ms // self.precision_ms
        found: set[int] = set()
        if self.base is not None:
            times = self.base["time_slot"]
            ok = (times % total == np.arange(total)) & (times >= first) & (times < first + total)
            found = {int(i) for i in np.nonzero(ok)[0]}
        found |= set(self.changed)
        for index in sorted(found):
            time_slot, first_pos, last_pos, num, _magic = self.slot(index)
            if time_slot % total == index and first <= time_slot < first + total:
                yield index, time_slot * self.precision_ms, first_pos, last_pos, num

    def revise(self, unit: Unit) -> None:
        """``reviseSlot(slot time, IGNORE, unit, force=true)`` (recovery)."""
        index = tfmt.slot_index(unit.slot_ms, self.precision_ms)
        time_slot, first, _last, num, magic = self.slot(index)
        if time_slot == unit.slot_ms // self.precision_ms:
            self.put(index, (time_slot, first, unit.pos, num, magic))
        else:
            self.put(index, (unit.slot_ms // self.precision_ms, unit.pos, unit.pos, num, magic))

    def close(self) -> None:
        self.base = None
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view still held: the mapping goes with it
                pass
            self._map = None


@dataclass
class TimerFiles:
    """The timer files of a store: which exist, their paths."""

    root: Path
    precision_ms: int = tfmt.DEFAULT_PRECISION_MS
    timerlog_file_size: int | None = None

    @property
    def wheel_path(self) -> Path:
        return self.root / tfmt.WHEEL_FILE

    @property
    def log_dir(self) -> Path:
        return self.root / tfmt.TIMERLOG_DIR

    @property
    def checkpoint_path(self) -> Path:
        return self.root / tfmt.CHECKPOINT_FILE

    @property
    def metrics_path(self) -> Path:
        return self.root / tfmt.METRICS_FILE

    def present(self) -> bool:
        return self.wheel_path.exists() or self.log_dir.is_dir() or self.checkpoint_path.exists()


@dataclass
class Timer:
    """A timer 5.1.1 would still deliver (or a cancelled one / a marker)."""

    source: str  # "wheel" (a timerlog unit) or "queue" (a timer-queue message not in the wheel yet)
    slot_ms: int  # the wheel slot it is in (for a queued one: its TIMER_OUT_MS)
    out_ms: int  # TIMER_OUT_MS: the slot it is delivered from
    topic: str  # REAL_TOPIC
    queue_id: int | None  # REAL_QID
    msg_id: str | None  # UNIQ_KEY
    commitlog_offset: int
    timerlog_pos: int | None = None
    queue_offset: int | None = None
    rolled: bool = False
    marker: bool = False  # a cancel marker (TIMER_DEL_UNIQKEY)
    cancels: str | None = None
    state: str = "pending"  # pending | cancelled | marker | dropped
    write_ms: int | None = None  # a unit's write time (TIMER_ENQUEUE_MS of its delivery)

    def as_json(self) -> dict[str, Any]:
        return {camel(k): v for k, v in asdict(self).items()}


@dataclass
class Problem:
    kind: str
    file: str
    offset: int | None
    message: str


@dataclass
class TimerState:
    """What ``pending`` found: the progress 5.1.1 starts from, every timer, and what it could not read."""

    checkpoint: TimerCheckpoint | None
    metrics: dict[str, int] | None
    timerlog_start: int
    timerlog_end: int
    read_time_ms: int
    queue_offset: int
    queue_max: int
    timers: list[Timer] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def pending(self) -> list[Timer]:
        return [t for t in self.timers if t.state == "pending"]


def first_read_time(ckpt: TimerCheckpoint, precision_ms: int, now_ms: int) -> int:
    """``recover``'s ``currReadTimeMs``: the checkpoint's read time, not older than the wheel's reach."""
    reach = now_ms // precision_ms * precision_ms - (tfmt.SLOTS_TOTAL - tfmt.TIMER_BLANK_SLOTS) * precision_ms
    return max(ckpt.last_read_time_ms, reach)


def _recover(log: TimerLog, wheel: TimerWheel, ckpt: TimerCheckpoint) -> LogScan:
    """``recover``'s first pass: the log's end and the wheel revised."""
    begin = ckpt.last_timer_log_flush_pos - (log.file_size if log.queue.files else 0)
    scan = log.scan(max(begin, 0))
    for unit in scan.units:
        wheel.revise(unit)
    return scan


@dataclass
class TimerQueue:
    """The timer queue (``rmq_sys_wheel_timer`` queue 0) as ``pending`` reads it: its first and next
    offsets, its units ``(queue offset, CommitLog offset, size)`` from an offset on, and the
    CommitLog record at an offset (None when there is none)."""

    low: int
    high: int
    units: Callable[[int], Iterable[tuple[int, int, int]]]
    read: Callable[[int], Record | None]

    def at(self, queue_offset: int) -> tuple[int, int] | None:
        for _q, cl, size in self.units(queue_offset):
            return cl, size
        return None


REVISE_STEPS = 20000  # reviseQueueOffset's maxCount


def revise_queue_offset(queue: TimerQueue, offset_py: int, size_py: int) -> int | None:
    """``reviseQueueOffset``: the timer-queue offset of the message at ``offset_py``: its own queue
    offset, or the unit at or below it (20000 tried) that points at it; None when no record is there."""
    rec = queue.read(offset_py)
    if rec is None:
        return None
    tmp = rec.queue_offset
    for _ in range(REVISE_STEPS):
        if tmp < 0:
            break
        unit = queue.at(tmp) if queue.low <= tmp < queue.high else None
        if unit == (offset_py, size_py):
            return tmp
        tmp -= 1
    return rec.queue_offset


def pending(files: TimerFiles, queue: TimerQueue, now_ms: int | None = None) -> TimerState:
    """What 5.1.1 would deliver if started now on these files and ``queue`` (see the module's
    docstring). Raises ``CorruptDataError`` for a wheel of the wrong length."""
    read = queue.read
    now = int(time.time() * 1000) if now_ms is None else now_ms
    prec = files.precision_ms
    ckpt = read_timer_checkpoint(files.checkpoint_path)
    metrics = read_timer_metrics(files.metrics_path)
    use = ckpt or TimerCheckpoint()
    log = TimerLog(files.log_dir, files.timerlog_file_size)
    wheel = TimerWheel(files.wheel_path, prec)
    problems: list[Problem] = []
    try:
        scan = _recover(log, wheel, use)
        end = scan.end
        if scan.bad is not None:
            pos, why = scan.bad
            mf = log.queue.find(pos)
            problems.append(
                Problem("timerlog-bad-unit", str(mf.path), pos - mf.from_offset, f"bad timerlog unit ({why})")
            )
        last_queue = None
        last = log.unit_at(end - tfmt.UNIT_SIZE) if end >= tfmt.UNIT_SIZE else None
        if last is not None:
            last_queue = revise_queue_offset(queue, last.offset_py, last.size_py)
        queue_start = use.last_timer_queue_offset if last_queue is None else last_queue + 1
        queue_start = max(min(queue_start, use.master_timer_queue_offset), queue.low)
        read_time = first_read_time(use, prec, now)
        timers: list[Timer] = []
        for _index, slot_ms, _first, last_pos, _num in wheel.live(read_time):
            pos = last_pos
            seen = 0
            while pos != -1:
                if pos >= end or pos < 0:
                    problems.append(_past_end(files, log, slot_ms, pos, end))
                    break
                unit = log.unit_at(pos)
                if unit is None:
                    problems.append(_past_end(files, log, slot_ms, pos, end))
                    break
                timer = _from_unit(unit, slot_ms, read, log, problems)
                if timer is not None:
                    timers.append(timer)
                seen += 1
                if unit.prev_pos >= pos or seen > end // tfmt.UNIT_SIZE:
                    mf = log.queue.find(pos)
                    problems.append(
                        Problem(
                            "timerlog-chain",
                            str(mf.path),
                            pos - mf.from_offset,
                            f"unit's prev_pos {unit.prev_pos} does not lead back",
                        )
                    )
                    break
                pos = unit.prev_pos
        queue_max = queue.high
        for q, cl, _size in queue.units(queue_start) if queue_start < queue.high else ():
            rec = read(cl)
            if rec is None:
                continue
            timers.append(_from_queue(rec, q, cl, now))
        _settle(timers, now)
        timers.sort(key=lambda t: (t.out_ms, t.topic, t.msg_id or ""))
        return TimerState(ckpt, metrics, scan.start, end, read_time, queue_start, queue_max, timers, problems)
    finally:
        log.close()
        wheel.close()


def _past_end(files: TimerFiles, log: TimerLog, slot_ms: int, pos: int, end: int) -> Problem:
    index = tfmt.slot_index(slot_ms, files.precision_ms)
    return Problem(
        "timer-slot-past-end",
        str(files.wheel_path),
        index * tfmt.SLOT_SIZE,
        f"slot {index} (time {slot_ms}) points at timerlog position {pos}, past the timerlog's end {end}",
    )


def _from_unit(unit: Unit, slot_ms: int, read: Any, log: TimerLog, problems: list[Problem]) -> Timer | None:
    rec: Record | None = read(unit.offset_py)
    if rec is None or rec.total_size != unit.size_py:
        mf = log.queue.find(unit.pos)
        problems.append(
            Problem(
                "timerlog-no-message",
                str(mf.path),
                unit.pos - mf.from_offset,
                f"unit's message at CommitLog offset {unit.offset_py} (size {unit.size_py}) not in the log",
            )
        )
        return None
    props = rec.properties
    return Timer(
        "wheel",
        slot_ms,
        _int(props.get(TIMER_OUT_MS), slot_ms),
        props.get(fmt.PROPERTY_REAL_TOPIC, ""),
        _int(props.get(fmt.PROPERTY_REAL_QID), None),
        props.get(fmt.PROPERTY_UNIQ_KEY),
        unit.offset_py,
        timerlog_pos=unit.pos,
        queue_offset=rec.queue_offset,
        rolled=unit.rolled,
        marker=bool(unit.magic & tfmt.MAGIC_DELETE),
        cancels=props.get(TIMER_DEL_UNIQKEY),
        write_ms=unit.write_time_ms,
    )


def _from_queue(rec: Record, queue_offset: int, offset: int, now: int) -> Timer:
    props = rec.properties
    out = _int(props.get(TIMER_OUT_MS), 0) or 0
    return Timer(
        "queue",
        out,
        out,
        props.get(fmt.PROPERTY_REAL_TOPIC, ""),
        _int(props.get(fmt.PROPERTY_REAL_QID), None),
        props.get(fmt.PROPERTY_UNIQ_KEY),
        offset,
        queue_offset=queue_offset,
        marker=TIMER_DEL_UNIQKEY in props,
        cancels=props.get(TIMER_DEL_UNIQKEY),
    )


def _int(text: str | None, default: int | None) -> int | None:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _settle(timers: list[Timer], now: int) -> None:
    """Markers, cancels and drops per slot (``dequeue``: a slot's markers first, by key)."""
    keys: dict[int, set[str]] = {}
    for t in timers:
        if t.marker:
            t.state = "marker"
            if t.source == "queue" and t.out_ms < now:
                t.state = "dropped"  # put at once: doPut refuses a marker
            elif t.cancels:
                keys.setdefault(t.out_ms, set()).add(t.cancels)
    for t in timers:
        if t.marker:
            continue
        if t.source == "queue" and t.out_ms < now:
            continue  # delivered at once, past the wheel
        if t.msg_id and t.msg_id in keys.get(t.out_ms, ()):
            t.state = "cancelled"


def store_timers(store: Store, precision_ms: int | None = None, now_ms: int | None = None) -> TimerState:
    """``pending`` over a store: its timer files, its timer queue (``rmq_sys_wheel_timer`` queue 0)
    and its CommitLog. Raises ``NotFoundError`` when the store has no timer files."""
    files = TimerFiles(store.root, precision_ms or tfmt.DEFAULT_PRECISION_MS)
    if not files.present():
        raise NotFoundError(f"{store.root}: no timer files (timerwheel, timerlog/, config/timercheck)")
    cq = store.consume_queue(TIMER_TOPIC, 0)
    commitlog = store.commitlog
    low = cq.min_offset(commitlog.min_offset) if cq.files else 0
    high = cq.max_offset if cq.files else 0

    def units(start: int) -> Iterator[tuple[int, int, int]]:
        return ((u.queue_offset, u.commitlog_offset, u.size) for u in cq.units(start) if not u.is_filler)

    def read(offset: int) -> Record | None:
        try:
            return commitlog.read(offset)
        except (NotFoundError, CorruptDataError):
            return None

    return pending(files, TimerQueue(low, high, units, read), now_ms)
