"""``rmq dump-timer``: the pending timer messages of a RocketMQ 5.1.1 timer store
(``rmqcli.store.timer``)."""

from __future__ import annotations

from typing import Any

from rmqcli.cli.columns import QUEUE_ID, TOPIC, number
from rmqcli.cli.common import Common, StoreArg, config_output, open_store, switch_option, topic_option
from rmqcli.cli.render import Column, Section, human_time, warn

COLUMNS = [
    Column("due", "Due (TIMER_OUT_MS, local time)"),
    TOPIC,
    QUEUE_ID,
    Column("msgId", "UNIQ_KEY"),
    Column("source", "wheel (timerlog) or queue (not in the wheel yet)"),
    number("timerlogPos", "TimerlogPos"),
    number("queueOffset", "TimerQueueOffset"),
    number("commitlogOffset", "CommitLogOffset"),
    Column("state", "State"),
]
TOPIC_COLUMNS = [
    TOPIC,
    number("pending", "Pending"),
    Column("first", "First due"),
    Column("last", "Last due"),
]


@config_output
def dump_timer(
    store: StoreArg,
    topic: topic_option("Only the timers of this topic (their REAL_TOPIC).") = None,
    all_: switch_option(
        "--all", help="Also the cancelled timers and the cancel markers (state column)."
    ) = False,
    *,
    common: Common,
) -> None:
    """Dump the timers a RocketMQ 5.1.1 broker would still deliver from this store: each one's due
    time (TIMER_OUT_MS: its slot), topic, queue and message id, by due time; then the count per topic
    and the progress read from config/timercheck.

    Read as 5.1.1 does on start: the timerlog up to its first bad unit, the wheel's slots from the
    checkpoint's read time on (each chain back along prev_pos), and the timer queue
    (rmq_sys_wheel_timer) from the queue offset after the timerlog's last unit, capped by the
    checkpoint's masterTimerQueueOffset. A cancel marker (TIMER_DEL_UNIQKEY) cancels its slot's
    message of that UNIQ_KEY. A wheel slot pointing past the timerlog's end or a unit whose message
    is gone is reported on stderr. Exit 3 when the store has no timer files.
    """
    from rmqcli.store.timer import store_timers

    opened = open_store(store, common.config)
    state = store_timers(opened, opened.timer_precision_ms)
    for problem in state.problems:
        warn(f"{problem.file} at byte {problem.offset}: {problem.message}")
    timers = [t for t in state.timers if topic is None or t.topic == topic]
    shown = [t for t in timers if all_ or t.state == "pending"]
    rows = [{**t.as_json(), "due": human_time(t.out_ms)} for t in shown]
    per_topic: dict[str, dict[str, Any]] = {}
    for t in timers:
        if t.state != "pending":
            continue
        row = per_topic.setdefault(t.topic, {"topic": t.topic, "pending": 0, "firstMs": t.out_ms})
        row["pending"] += 1
        row["lastMs"] = t.out_ms
    topics = [
        {**r, "first": human_time(r["firstMs"]), "last": human_time(r["lastMs"])}
        for r in sorted(per_topic.values(), key=lambda r: r["topic"])
    ]
    progress: dict[str, Any] = {
        "checkpoint": state.checkpoint.as_json() if state.checkpoint else None,
        "readTimeMs": state.read_time_ms,
        "readTime": human_time(state.read_time_ms),
        "timerlogStart": state.timerlog_start,
        "timerlogEnd": state.timerlog_end,
        "timerQueueOffset": state.queue_offset,
        "timerQueueMaxOffset": state.queue_max,
        "pending": len(state.pending),
        "metrics": state.metrics,
        "problems": len(state.problems),
    }
    common.renderer().sections(
        [
            Section("timers", "timer", rows=rows, columns=COLUMNS, title="Pending timers"),
            Section("topics", "topic", rows=topics, columns=TOPIC_COLUMNS, title="Per topic"),
            Section("progress", "progress", item=progress, title="Progress (config/timercheck)"),
        ]
    )
