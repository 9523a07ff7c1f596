"""Operator reports read from a store directory, offline: ``rmq lag``, ``rmq delay-report`` and
``rmq tx-report`` (``rmqcli.ops.lag``, ``delayreport``, ``txreport``)."""

from __future__ import annotations

from typing import Annotated

import typer

from rmqcli.cli.common import ConfigOpt, JsonOpt, OutputOpt, StoreArg, open_store
from rmqcli.cli.render import Column, OutputFormat, Renderer, human_time, resolve_format

LAG_COLUMNS = [
    Column("group", "#Group"),
    Column("topic", "#Topic"),
    Column("queueId", "#QID", justify="right"),
    Column("brokerOffset", "#Broker Offset", justify="right"),
    Column("consumerOffset", "#Consumer Offset", justify="right"),
    Column("diff", "#Diff", justify="right"),
    Column("minOffset", "#Min Offset", justify="right"),
    Column("lastTime", "#LastTime"),
    Column("oldestUnconsumed", "#Oldest Unconsumed"),
    Column("flags", "#Flags"),
]


def lag(
    store: StoreArg,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only this consumer group.")] = None,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Only this topic.")] = None,
    config: ConfigOpt = None,
    output: OutputOpt = OutputFormat.table,
    json_: JsonOpt = False,
) -> None:
    """Consumer lag from the store, as consumerProgress shows it live, with what it hides.

    For every group of config/consumerOffset.json, each read queue of each topic it committed offsets
    for: the broker offset (the queue's max offset), the consumer offset, the diff, the store time of
    the last message consumed (LastTime, "N/A" for none), and, added: the queue's min offset, the store
    time of the oldest unconsumed message, and flags: below-min (messages the group had not consumed
    were deleted: it skips them) and past-max (the offset lies past the queue's end). Works on a
    stopped broker's store, a backup, or a copy from a dead host.
    """
    from rmqcli.ops.lag import lag_rows

    renderer = Renderer(resolve_format(output, json_))
    handle = open_store(store, config)
    try:
        rows = [row.to_dict() for row in lag_rows(handle, group, topic)]
    finally:
        handle.close()
    if renderer.fmt is OutputFormat.table:
        rows = [lag_display(row) for row in rows]
    renderer.rows(rows, LAG_COLUMNS)


def lag_display(row: dict) -> dict:
    """A lag row with its times and flags as the table shows them."""
    oldest = row["oldestUnconsumedTimestamp"]
    return {
        **row,
        "lastTime": human_time(row["lastTimestamp"]) if row["lastTimestamp"] else "N/A",
        "oldestUnconsumed": human_time(oldest) if oldest else "-",
        "flags": ",".join(row["flags"]) or "-",
    }


DELAY_COLUMNS = [
    Column("level", "#Level", justify="right"),
    Column("delay", "#Delay"),
    Column("progress", "#Progress", justify="right"),
    Column("maxOffset", "#Max Offset", justify="right"),
    Column("waiting", "#Waiting", justify="right"),
    Column("next", "#Next Due"),
    Column("last", "#Last Due"),
]
WAITING_COLUMNS = [
    Column("level", "#Level", justify="right"),
    Column("queueOffset", "#Offset", justify="right"),
    Column("dueTime", "#Due"),
    Column("topic", "#Topic"),
    Column("queueId", "#QID", justify="right"),
    Column("keys", "#Keys"),
    Column("uniqKey", "#MsgId"),
]


def _delay_text(millis: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if millis % size == 0:
            return f"{millis // size}{unit}"
    return f"{millis}ms"


def delay_report(
    store: StoreArg,
    list_: Annotated[
        bool, typer.Option("--list", help="Each waiting message instead of the levels.")
    ] = False,
    config: ConfigOpt = None,
    output: OutputOpt = OutputFormat.table,
    json_: JsonOpt = False,
) -> None:
    """Delayed messages waiting in SCHEDULE_TOPIC_XXXX, per delay level, from the store.

    For each level (messageDelayLevel of --config, else the default 18): the schedule service's
    progress (config/delayOffset.json), the queue's max offset, how many messages wait beyond the
    progress, when the next one is due and when the last one is. --list shows every waiting message:
    its real topic and queue, keys, message id and due time.
    """
    from rmqcli.ops.delayreport import levels, waiting

    renderer = Renderer(resolve_format(output, json_))
    handle = open_store(store, config)
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
    Column("queueOffset", "#Offset", justify="right"),
    Column("topic", "#Topic"),
    Column("producerGroup", "#Producer Group"),
    Column("transactionId", "#Transaction Id"),
    Column("keys", "#Keys"),
    Column("born", "#Born"),
    Column("age", "#Age"),
    Column("checks", "#Checks", justify="right"),
]


def tx_report(
    store: StoreArg,
    config: ConfigOpt = None,
    output: OutputOpt = OutputFormat.table,
    json_: JsonOpt = False,
) -> None:
    """Transactions left open in the store, and those the broker gave up on.

    Pending: half messages in RMQ_SYS_TRANS_HALF_TOPIC at or past the check service's progress
    (CID_RMQ_SYS_TRANS's offset) that no op message in RMQ_SYS_TRANS_OP_HALF_TOPIC settles: their
    real topic, producer group (the one the broker asks), transaction id, keys, age and how often the
    broker checked them (TRANSACTION_CHECK_TIMES). Given up: what sits in TRANS_CHECK_MAX_TIME_TOPIC,
    checked transactionCheckMax times or older than fileReservedTime.
    """
    import time

    from rmqcli.ops.txreport import half_messages

    renderer = Renderer(resolve_format(output, json_))
    now = int(time.time() * 1000)
    handle = open_store(store, config)
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
