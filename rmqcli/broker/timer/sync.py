"""The timer's part of a slave's copy of its master (RocketMQ 5.1.1 ``SlaveSynchronize``), and the
master's answers it asks for (``AdminBrokerProcessor.getTimerCheckPoint``/``getTimerMetrics``).

* GET_TIMER_CHECK_POINT (60), every 3 s from 10 s after start (``BrokerController``'s slave task:
  "latency-sensitive"): the master's ``TimerCheckpoint.encode`` (56 bytes, 32 from brokers before the
  data version was added). The slave takes its ``lastReadTimeMs`` and ``masterTimerQueueOffset``;
  its ``config/timercheck`` then holds them with ``lastTimerQueueOffset`` = min(its own, the
  master's), its own timerlog position and data version (``prepareTimerCheckPoint`` of a slave).
* GET_TIMER_METRICS (61), with the rest of the config sync (``syncAll``): the master's
  ``TimerMetrics.encode`` (fastjson: ``dataVersion``, ``timingCount``); when its data version
  differs from the slave's, the slave's ``config/timermetrics`` becomes the master's.

Both only with ``timerWheelEnable`` (a broker without it answers SYSTEM_ERROR). An rmq slave keeps no
timerlog of its own (its timer service runs on a master only): promoted, it reads the timer queue
again from its ``lastTimerQueueOffset`` (timers already due are delivered at once: at least once).
"""

from __future__ import annotations

import time
from dataclasses import astuple, replace
from pathlib import Path

from formats import fastjson
from formats import timer as tfmt
from rmqcli.errors import CorruptDataError
from rmqcli.store.timer import TimerCheckpoint, read_timer_checkpoint
from rmqcli.store.timer_write import write_checkpoint, write_metrics

CHECKPOINT_DELAY = 10.0  # seconds: the slave task's initial delay
CHECKPOINT_PERIOD = 3.0


def now_ms() -> int:
    return int(time.time() * 1000)


# --- the master's side ----------------------------------------------------------------------------
def encode_checkpoint(checkpoint: TimerCheckpoint) -> bytes:
    """``TimerCheckpoint.encode``: the seven longs, big-endian."""
    return tfmt.CHECKPOINT_STRUCT.pack(*astuple(checkpoint))


def decode_checkpoint(body: bytes) -> TimerCheckpoint:
    """``TimerCheckpoint.decode``: 56 bytes, or 32 (no data version). Raises ValueError."""
    if len(body) == tfmt.CHECKPOINT_UNVERSIONED_SIZE:
        body = body + bytes(tfmt.CHECKPOINT_STRUCT.size - tfmt.CHECKPOINT_UNVERSIONED_SIZE)
    if len(body) < tfmt.CHECKPOINT_STRUCT.size:
        raise ValueError(f"a timer checkpoint of {len(body)} bytes")
    return TimerCheckpoint(*tfmt.CHECKPOINT_STRUCT.unpack(body[: tfmt.CHECKPOINT_STRUCT.size]))


def _new_version() -> dict:
    return {"counter": 0, "stateVersion": 0, "timestamp": now_ms()}


def metrics_document(root: Path) -> dict:
    """The persisted ``TimerMetrics`` of the store at ``root`` (its ``.bak`` when the file is
    unreadable), or an empty one with a new data version. Raises ``CorruptDataError``."""
    for path in (root / tfmt.METRICS_FILE, root / (tfmt.METRICS_FILE + ".bak")):
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise CorruptDataError(str(exc), str(path)) from None
        try:
            doc = fastjson.loads(text) if text.strip() else {}
        except ValueError:
            raise CorruptDataError("not a timer metrics document", str(path)) from None
        if isinstance(doc, dict):
            doc.setdefault("timingCount", {})
            doc.setdefault("dataVersion", _new_version())
            return doc
    return {"dataVersion": _new_version(), "timingCount": {}}


# --- the slave's side -----------------------------------------------------------------------------
def _version(doc: dict) -> tuple:
    v = doc.get("dataVersion") or {}
    return (v.get("stateVersion", 0), v.get("timestamp"), v.get("counter"))


class TimerSync:
    """The slave's timer checkpoint and metrics, kept in its store at ``root``."""

    def __init__(self, root: Path):
        self.root = root

    def take_checkpoint(self, body: bytes) -> bool:
        """The master's checkpoint answer: True when the slave's file changed. Raises ValueError."""
        theirs = decode_checkpoint(body)
        ours = read_timer_checkpoint(self.root / tfmt.CHECKPOINT_FILE) or TimerCheckpoint()
        new = replace(
            ours,
            last_read_time_ms=theirs.last_read_time_ms,
            master_timer_queue_offset=theirs.master_timer_queue_offset,
            last_timer_queue_offset=min(ours.last_timer_queue_offset, theirs.master_timer_queue_offset),
        )
        if new == ours and (self.root / tfmt.CHECKPOINT_FILE).exists():
            return False
        write_checkpoint(self.root, new)
        return True

    def take_metrics(self, body: bytes) -> bool:
        """The master's metrics answer: True when its data version differed (the file replaced).
        Raises ValueError, CorruptDataError."""
        theirs = fastjson.loads(body.decode())
        if not isinstance(theirs, dict) or not isinstance(theirs.get("timingCount", {}), dict):
            raise ValueError("not a timer metrics document")
        if _version(theirs) == _version(metrics_document(self.root)):
            return False
        counts = theirs.get("timingCount", {})
        write_metrics(self.root, {"dataVersion": theirs.get("dataVersion"), "timingCount": counts})
        return True
