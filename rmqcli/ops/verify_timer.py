"""``rmq verify``'s part for the timer store of RocketMQ 5.1.1 (``rmqcli.store.timer``).

Errors, what 5.1.1 would stop at or lose: a wheel of the wrong length (``TimerWheel`` refuses to
start), a timerlog unit whose size or magic is wrong with data after it (``recoverAndRevise`` stops
there and cuts the rest off), a wheel slot of the live window pointing past the timerlog's end, a
unit whose chain does not lead back, a pending unit whose timer-queue message is not in the CommitLog,
an unreadable ``config/timermetrics``. Warnings: a checkpoint ahead of the files (5.1.1 starts from
what the files hold).
"""

from __future__ import annotations

import time

from formats import timer as tfmt
from rmqcli.errors import CorruptDataError
from rmqcli.ops.verify_common import Collector
from rmqcli.store.store import Store
from rmqcli.store.timer import (
    TimerCheckpoint,
    TimerFiles,
    TimerLog,
    TimerWheel,
    first_read_time,
    read_timer_checkpoint,
    store_timers,
)


def check_timer_store(store: Store, p: Collector, precision_ms: int | None = None) -> None:
    """Check the timer files of ``store`` when it has them (nothing otherwise)."""
    files = TimerFiles(store.root)
    if not files.present():
        return
    log = TimerLog(files.log_dir)
    try:
        whole = log.scan(0)
        if whole.bad is not None:
            pos, why = whole.bad
            mf = log.queue.find(pos)
            p.error("timerlog-bad-unit", mf.path, pos - mf.from_offset, f"bad timerlog unit ({why})")
    finally:
        log.close()
    precision = precision_ms or tfmt.DEFAULT_PRECISION_MS
    try:
        wheel = TimerWheel(files.wheel_path, precision)
        state = store_timers(store, precision_ms)
    except CorruptDataError as exc:
        p.error("timer-file", exc.path or files.root, exc.offset, str(exc).split(": ", 1)[-1])
        return
    seen = {("timerlog-bad-unit", None)}  # the whole scan above reported it
    try:
        ckpt = read_timer_checkpoint(files.checkpoint_path) or TimerCheckpoint()
        read_time = first_read_time(ckpt, precision, int(time.time() * 1000))
        for index, slot_ms, first, last, _num in wheel.live(read_time):
            if max(first, last) >= whole.end:
                p.error(
                    "timer-slot-past-end",
                    files.wheel_path,
                    index * tfmt.SLOT_SIZE,
                    f"slot {index} (time {slot_ms}) points at timerlog positions {first}..{last}, "
                    f"past the timerlog's end {whole.end}",
                )
                seen.add(("timer-slot-past-end", index * tfmt.SLOT_SIZE))
    finally:
        wheel.close()
    for problem in state.problems:
        if (problem.kind, problem.offset) not in seen and (problem.kind, None) not in seen:
            p.error(problem.kind, problem.file, problem.offset, problem.message)
    ckpt = state.checkpoint
    if ckpt is None:
        return
    if ckpt.last_timer_log_flush_pos > whole.end:
        p.warning(
            "timer-checkpoint-ahead",
            files.checkpoint_path,
            8,
            f"lastTimerLogFlushPos {ckpt.last_timer_log_flush_pos} is past the timerlog's end {whole.end}",
        )
    if ckpt.last_timer_queue_offset > state.queue_max:
        p.warning(
            "timer-checkpoint-ahead",
            files.checkpoint_path,
            16,
            f"lastTimerQueueOffset {ckpt.last_timer_queue_offset} is past the timer queue's end "
            f"{state.queue_max}",
        )
