"""``rmq offsets STORE reset|set|merge``: committed consumer offsets changed offline
(``rmqcli.ops.offsets``), with the plan / ``--yes`` / lock / backup rules of the repair commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rmqcli.cli.common import command_group, parse_time, switch_option, value_option
from rmqcli.cli.repair import Repair, repair_command

app = command_group(
    "offsets",
    "Change committed consumer offsets (config/consumerOffset.json) of a stopped broker's store: "
    "reset a topic's queues to a time, their min or their max, set one queue, or merge another store's "
    "offsets (the larger per queue). Nothing changes without --yes; the old file is backed up.",
)
GroupOpt = Annotated[str, typer.Option("--group", "-g", help="The consumer group.")]
TopicOpt = Annotated[str, typer.Option("--topic", "-t", help="The topic.")]


@app.callback()
def offsets(
    ctx: typer.Context,
    store: Annotated[Path, typer.Argument(metavar="STORE", help="A store directory.")],
) -> None:
    """Change committed consumer offsets of a store, offline."""
    ctx.obj = store


def _repair(stage, apply_fn) -> Repair:  # type: ignore[no-untyped-def]
    from rmqcli.ops import offsets as ops

    return Repair(stage, apply_fn, ops.discard, ops.STAGING_NAME)


def reset(
    store: Path,
    group: GroupOpt,
    topic: TopicOpt,
    time: value_option(str, "--time", help="The first message stored at TIME (epoch ms or ISO-8601).") = None,
    to_min: switch_option("--to-min", help="Each queue's min offset (everything again).") = False,
    to_max: switch_option("--to-max", help="Each queue's max offset (skip what waits).") = False,
) -> Repair:
    """Reset the group's offsets on every read queue of the topic: to a time, the min or the max.

    --time picks, per queue, the message stored at that time or the closest one
    (getOffsetInQueueByTime, as resetOffsetByTime asks a live broker); the offset is set whatever it
    was. Exactly one of --time, --to-min and --to-max.
    """
    from rmqcli.errors import UsageError
    from rmqcli.ops import offsets as ops

    if sum((time is not None, to_min, to_max)) != 1:
        raise UsageError("give exactly one of --time, --to-min and --to-max")
    when = parse_time(time, "--time")
    to = "min" if to_min else "max" if to_max else None
    return _repair(lambda s: ops.stage_reset(s, group, topic, time_ms=when, to=to), ops.apply_offsets)


def set_offset(
    store: Path,
    group: GroupOpt,
    topic: TopicOpt,
    queue: Annotated[int, typer.Option("--queue", "-q", help="The queue id.")],
    offset: Annotated[int, typer.Argument(metavar="OFFSET", help="The new committed offset.")],
) -> Repair:
    """Set the group's committed offset on one queue (0 up to the queue's max offset)."""
    from rmqcli.ops import offsets as ops

    return _repair(lambda s: ops.stage_set(s, group, topic, queue, offset), ops.apply_offsets)


def merge(
    store: Path,
    other: Annotated[
        Path, typer.Argument(metavar="OTHER_STORE", help="The store whose offsets to merge in.")
    ],
) -> Repair:
    """Take, per group, topic and queue, the larger committed offset of this store and OTHER_STORE.

    The manual fix for 4.x's offset rollback: a master that comes back has older offsets than its
    slave's consumers committed meanwhile; merge the slave's store into the master's (both stopped)
    and consumers do not consume those messages again. OTHER_STORE is only read.
    """
    from rmqcli.cli.common import check_store_dir
    from rmqcli.ops import offsets as ops

    check_store_dir(other)
    return _repair(lambda s: ops.stage_merge(s, other), ops.apply_offsets)


app.command("reset")(repair_command(reset, store_in_context=True))
app.command("set")(repair_command(set_offset, store_in_context=True))
app.command("merge")(repair_command(merge, store_in_context=True))
