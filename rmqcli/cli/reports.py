"""Operator reports read from a store directory, offline: ``rmq lag``, ``rmq delay-report`` and
``rmq tx-report`` (``rmqcli.ops.lag``, ``delayreport``, ``txreport``)."""

from __future__ import annotations

from rmqcli.cli.columns import GROUP, KEYS, LEVEL, QUEUE_ID, QUEUE_OFFSET, TOPIC, UNIQ_KEY, number
from rmqcli.cli.common import (
    Common,
    LagGroupOpt,
    LagTopicOpt,
    StoreArg,
    config_output,
    open_store,
    switch_option,
)
from rmqcli.cli.render import Column, OutputFormat, human_time

LAG_COLUMNS = [
    GROUP,
    TOPIC,
    QUEUE_ID,
    number("brokerOffset", "#Broker Offset"),
    number("consumerOffset", "#Consumer Offset"),
    number("diff", "#Diff"),
    number("minOffset", "#Min Offset"),
    Column("lastTime", "#LastTime"),
    Column("oldestUnconsumed", "#Oldest Unconsumed"),
    Column("flags", "#Flags"),
]


@config_output
def lag(store: StoreArg, group: LagGroupOpt = None, topic: LagTopicOpt = None, *, common: Common) -> None:
    """Consumer lag from the store, as consumerProgress shows it live, with what it hides.

    For every group of config/consumerOffset.json, each read queue of each topic it committed offsets
    for: the broker offset (the queue's max offset), the consumer offset, the diff, the store time of
    the last message consumed (LastTime, "N/A" for none), and, added: the queue's min offset, the store
    time of the oldest unconsumed message, and flags: below-min (messages the group had not consumed
    were deleted: it skips them) and past-max (the offset lies past the queue's end). Works on a
    stopped broker's store, a backup, or a copy from a dead host.

    In a RocketMQ 5 controller-mode store the broker offset counts only the units whose records
    end at or before the checkpoint's confirmPhyOffset (what the group serves; an elected master
    lacks the others, and this broker truncates them when it rejoins): the units past it are
    counted in the row (JSON "unconfirmed", the flag unconfirmed:N in the table) and in a warning
    on stderr.
    """
    from rmqcli.ops.lag import lag_rows

    renderer = common.renderer()
    handle = open_store(store, common.config)
    try:
        rows = [row.to_dict() for row in lag_rows(handle, group, topic)]
    finally:
        handle.close()
    warn_lag_unconfirmed(rows, str(store))
    if renderer.fmt is OutputFormat.table:
        rows = [lag_display(row) for row in rows]
    renderer.rows(rows, LAG_COLUMNS)


def lag_display(row: dict) -> dict:
    """A lag row with its times and flags as the table shows them (units past a controller-mode
    store's confirmPhyOffset as the flag ``unconfirmed:N``)."""
    oldest = row["oldestUnconsumedTimestamp"]
    flags = [*row["flags"], *([f"unconfirmed:{row['unconfirmed']}"] if row.get("unconfirmed") else [])]
    return {
        **row,
        "lastTime": human_time(row["lastTimestamp"]) if row["lastTimestamp"] else "N/A",
        "oldestUnconsumed": human_time(oldest) if oldest else "-",
        "flags": ",".join(flags) or "-",
    }


def warn_lag_unconfirmed(rows: list[dict], store: str | None = None) -> None:
    """One warning per store whose queues hold units past its confirmPhyOffset (rows of
    ``rmq pipeline lag`` name their store; ``store`` names that of ``rmq lag``'s)."""
    from rmqcli.cli.render import warn

    seen: dict[str, dict[tuple[str, int], int]] = {}
    for row in rows:
        if row.get("unconfirmed"):
            seen.setdefault(row.get("store", store), {})[(row["topic"], row["queueId"])] = row["unconfirmed"]
    for name, queues in seen.items():
        warn(
            f"{name}: {sum(queues.values())} consume-queue unit(s) of {len(queues)} queue(s) point at "
            "records past the checkpoint's confirmPhyOffset: not confirmed by the in-sync replicas, not "
            "counted in the broker offset"
        )


DELAY_COLUMNS = [
    LEVEL,
    Column("delay", "#Delay"),
    number("progress", "#Progress"),
    number("maxOffset", "#Max Offset"),
    number("waiting", "#Waiting"),
    Column("next", "#Next Due"),
    Column("last", "#Last Due"),
]
WAITING_COLUMNS = [LEVEL, QUEUE_OFFSET, Column("dueTime", "#Due"), TOPIC, QUEUE_ID, KEYS, UNIQ_KEY]


def _delay_text(millis: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if millis % size == 0:
            return f"{millis // size}{unit}"
    return f"{millis}ms"


ListOpt = switch_option("--list", help="Each waiting message instead of the levels.")


@config_output
def delay_report(store: StoreArg, list_: ListOpt = False, *, common: Common) -> None:
    """Delayed messages waiting in SCHEDULE_TOPIC_XXXX, per delay level, from the store.

    For each level (messageDelayLevel of --config, else the default 18): the schedule service's
    progress (config/delayOffset.json), the queue's max offset, how many messages wait beyond the
    progress, when the next one is due and when the last one is. --list shows every waiting message:
    its real topic and queue, keys, message id and due time.
    """
    from rmqcli.ops.delayreport import levels, waiting

    renderer = common.renderer()
    handle = open_store(store, common.config)
    try:
        if list_:
            rows = [w.to_dict() for w in waiting(handle)]
        else:
            rows = [r.to_dict() for r in levels(handle)]
    finally:
        handle.close()
    if renderer.fmt is not OutputFormat.table:
        renderer.rows(rows, WAITING_COLUMNS if list_ else DELAY_COLUMNS)
        return
    for row in rows:
        if list_:
            row["dueTime"] = human_time(row["due"])
        else:
            row["delay"] = _delay_text(row["delayMs"])
            row["next"] = human_time(row["nextDue"]) if row["nextDue"] else "-"
            row["last"] = human_time(row["lastDue"]) if row["lastDue"] else "-"
    renderer.rows(rows, WAITING_COLUMNS if list_ else DELAY_COLUMNS)


def _age(millis: int) -> str:
    """``3d 16h``, ``16h 29m``, ``29m 5s``, ``5s``: the two largest units."""
    seconds = millis // 1000
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts[:2])


TX_COLUMNS = [
    Column("state", "#State"),
    QUEUE_OFFSET,
    TOPIC,
    Column("producerGroup", "#Producer Group"),
    Column("transactionId", "#Transaction Id"),
    KEYS,
    Column("born", "#Born"),
    Column("age", "#Age"),
    number("checks", "#Checks"),
]


@config_output
def tx_report(store: StoreArg, *, common: Common) -> None:
    """Transactions left open in the store, and those the broker gave up on.

    Pending: half messages in RMQ_SYS_TRANS_HALF_TOPIC at or past the check service's progress
    (CID_RMQ_SYS_TRANS's offset) that no op message in RMQ_SYS_TRANS_OP_HALF_TOPIC settles: their
    real topic, producer group (the one the broker asks), transaction id, keys, age and how often the
    broker checked them (TRANSACTION_CHECK_TIMES). Given up: what sits in TRANS_CHECK_MAX_TIME_TOPIC,
    checked transactionCheckMax times or older than fileReservedTime.
    """
    import time

    from rmqcli.ops.txreport import half_messages

    renderer = common.renderer()
    now = int(time.time() * 1000)
    handle = open_store(store, common.config)
    try:
        rows = [row.to_dict(now) for row in half_messages(handle)]
    finally:
        handle.close()
    if renderer.fmt is OutputFormat.table:
        for row in rows:
            row["born"] = human_time(row["bornTimestamp"])
            row["age"] = _age(row["ageMs"])
            row["transactionId"] = row["transactionId"] or "-"
    renderer.rows(rows, TX_COLUMNS)
