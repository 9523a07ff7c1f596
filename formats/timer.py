"""The timer store of RocketMQ 5.1.1: ``timerwheel``, ``timerlog/``, ``config/timercheck``.

Specified by 5.1.1's ``store/timer``: ``Slot`` and ``TimerWheel`` (the wheel: ``2 * slotsTotal``
slots of 32 bytes, ``slotsTotal`` = 7 days of seconds whatever the precision; a slot is found at
``timeMs / precisionMs % (2 * slotsTotal)`` and holds ``timeMs / precisionMs``, the first and last
timerlog position of its chain, a count and an unused magic), ``TimerLog`` (mapped files named by
offset, 100 MiB by default, of 52-byte units chained backwards by ``prev_pos`` and ended by a
16-byte blank), ``TimerCheckpoint`` (a 4 KiB page: four longs, then a ``DataVersion``) and
``TimerMessageStore`` (the magic bits, the blank slots, ``isMagicOK``). All big-endian.
"""

from __future__ import annotations

import construct as cs

from formats.derive import compile_struct, field_offsets
from formats.javahash import java_string_hash  # noqa: F401 - the timerlog's topic hash

# TimerMessageStore
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 24 * 3600
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS  # slotsTotal; the wheel holds twice as many slots
TIMER_BLANK_SLOTS = 60
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2
DEFAULT_PRECISION_MS = 1000  # MessageStoreConfig.timerPrecisionMs
DEFAULT_TIMERLOG_FILE_SIZE = 100 * 1024 * 1024  # mappedFileSizeTimerLog
DEFAULT_ROLL_WINDOW_SLOTS = 2 * DAY_SECS  # timerRollWindowSlot

WHEEL_FILE = "timerwheel"
TIMERLOG_DIR = "timerlog"
CHECKPOINT_FILE = "config/timercheck"
METRICS_FILE = "config/timermetrics"

# Slot (TimerWheel.putSlot / getRawSlot)
TimerSlot = cs.Struct(
    "time_slot" / cs.Int64sb,  # timeMs / precisionMs (getRawSlot multiplies it back)
    "first_pos" / cs.Int64sb,
    "last_pos" / cs.Int64sb,
    "num" / cs.Int32sb,
    "magic" / cs.Int32sb,  # "no use now"
)
SLOT_STRUCT = compile_struct(TimerSlot)
SLOT_SIZE = SLOT_STRUCT.size
assert SLOT_SIZE == 32  # Slot.SIZE
WHEEL_LENGTH = 2 * SLOTS_TOTAL * SLOT_SIZE  # TimerWheel.wheelLength

# TimerLog unit (TimerMessageStore.doEnqueue)
TimerLogUnit = cs.Struct(
    "size" / cs.Int32sb,  # UNIT_SIZE
    "prev_pos" / cs.Int64sb,  # the slot's previous last unit, -1 for the first
    "magic" / cs.Int32sb,  # MAGIC_DEFAULT | MAGIC_ROLL | MAGIC_DELETE
    "write_time_ms" / cs.Int64sb,  # currWriteTimeMs when enqueued
    "delay_ms" / cs.Int32sb,  # the slot time less write_time_ms
    "offset_py" / cs.Int64sb,  # the timer-queue message in the CommitLog
    "size_py" / cs.Int32sb,
    "topic_hash" / cs.Int32sb,  # String.hashCode of REAL_TOPIC
    "reserved" / cs.Int64sb,
)
UNIT_STRUCT = compile_struct(TimerLogUnit)
UNIT_SIZE = UNIT_STRUCT.size
UNIT_OFFSETS = field_offsets(TimerLogUnit)
assert UNIT_SIZE == 52  # TimerLog.UNIT_SIZE
assert UNIT_OFFSETS["offset_py"] == 28  # TimerLog.UNIT_PRE_SIZE_FOR_MSG

# the blank that ends a timerlog file (TimerLog.append)
TimerLogBlank = cs.Struct("size" / cs.Int32sb, "zero" / cs.Int64sb, "magic" / cs.Int32sb)
BLANK_STRUCT = compile_struct(TimerLogBlank)
MIN_BLANK_LEN = BLANK_STRUCT.size
BLANK_MAGIC_CODE = cs.Int32sb.parse(((0xBBCCDDEE ^ (1880681586 + 8)) & 0xFFFFFFFF).to_bytes(4, "big"))

# TimerCheckpoint (flush / the constructor): a page, OS_PAGE_SIZE long
TimerCheckpointFields = cs.Struct(
    "last_read_time_ms" / cs.Int64sb,  # the next slot time to read (commitReadTimeMs)
    "last_timer_log_flush_pos" / cs.Int64sb,
    "last_timer_queue_offset" / cs.Int64sb,  # min(commitQueueOffset, master_timer_queue_offset)
    "master_timer_queue_offset" / cs.Int64sb,  # commitQueueOffset on a master
    "state_version" / cs.Int64sb,  # DataVersion
    "timestamp" / cs.Int64sb,
    "counter" / cs.Int64sb,
)
CHECKPOINT_STRUCT = compile_struct(TimerCheckpointFields)
# a checkpoint without the data version (the four offsets only), as TimerCheckpoint.decode accepts
CHECKPOINT_UNVERSIONED_SIZE = field_offsets(TimerCheckpointFields)["state_version"]
CHECKPOINT_PAGE = 4096


def magic_ok(magic: int) -> bool:
    """``TimerMessageStore.isMagicOK``: no bit above the low four."""
    return (magic | 0xF) == 0xF


def slot_index(time_ms: int, precision_ms: int) -> int:
    """``TimerWheel.getSlotIndex``."""
    return time_ms // precision_ms % (2 * SLOTS_TOTAL)


def last_unit_offset(file_size: int) -> int:
    """``TimerLog.getOffsetForLastUnit``: where the last unit of a file of ``file_size`` starts."""
    return file_size - (file_size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE
