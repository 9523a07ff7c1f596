"""Operator reports read from a store directory, offline: ``rmq lag`` (``rmqcli.ops.lag``)."""

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
        for row in rows:
            row["lastTime"] = human_time(row["lastTimestamp"]) if row["lastTimestamp"] else "N/A"
            oldest = row["oldestUnconsumedTimestamp"]
            row["oldestUnconsumed"] = human_time(oldest) if oldest else "-"
            row["flags"] = ",".join(row["flags"]) or "-"
    renderer.rows(rows, LAG_COLUMNS)
