"""``rmq dump-cq``: the 20-byte units of one consume queue (or of one consume-queue file)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rmqcli.cli.columns import QUEUE_OFFSET, SIZE, number
from rmqcli.cli.common import (
    Common,
    config_output,
    open_store,
    queue_option,
    switch_option,
    topic_option,
    value_option,
)
from rmqcli.cli.render import Column, warn
from rmqcli.errors import NotFoundError, RmqError, UsageError

if TYPE_CHECKING:
    from rmqcli.ops.dump import UnconfirmedUnits
    from rmqcli.store import Store

COLUMNS = [
    QUEUE_OFFSET,
    number("commitLogOffset", "CommitLogOffset"),
    SIZE,
    number("tagsCode", "TagsCode"),
    Column("filler", "Filler"),
]
CONFIRMED = Column(
    "confirmed", "Confirmed", show=lambda v: "NO" if v is False else "", alert=lambda v: v is False
)


@config_output
def dump_cq(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="STORE_OR_FILE", help="A store directory (with --topic and --queue) or one CQ file."
        ),
    ],
    topic: topic_option("Topic of the queue.") = None,
    queue: queue_option("Queue id.") = None,
    from_offset: value_option(
        int, "--from", min=0, help="First queue offset (default: the first unit on disk)."
    ) = None,
    count: value_option(int, "--count", "-n", min=0, help="Show at most N units.") = None,
    unconfirmed: switch_option(
        "--unconfirmed",
        help="Also show the units pointing past the checkpoint's confirmPhyOffset (controller mode), "
        "marked confirmed=false.",
    ) = False,
    *,
    common: Common,
) -> None:
    """Dump consume-queue units: queue offset, CommitLog offset, size, tags code and filler flag.

    Filler units (offset 0, size 0x7fffffff) pad the head of a queue whose first file starts past
    offset 0.

    In a RocketMQ 5 controller-mode store (a CQ file's store is the directory holding its
    consumequeue/) the units pointing at records past the checkpoint's confirmPhyOffset (records
    the in-sync replicas did not confirm) are left out and counted in a warning on stderr; --unconfirmed
    shows them too, marked confirmed=false (a Confirmed column in the table). A CQ file outside a
    store is dumped whole.
    """
    from rmqcli.ops.dump import queue_of_cq_file
    from rmqcli.store.naming import consume_queue_dir, topic_dir_problem
    from rmqcli.store.read.consumequeue import read_cq_file

    renderer = common.renderer()
    if not path.exists():
        raise NotFoundError(f"{path}: no such store or file")
    store = None
    if path.is_file():
        t, q = queue_of_cq_file(path)
        t, q = topic or t, queue if queue is not None else q
        store = _store_of_file(path, common.config)
        past = _past(store, unconfirmed)
        units = (u for u in read_cq_file(path) if u.queue_offset >= (from_offset or 0))
        rows: Iterable[dict[str, Any]] = islice(past.rows(units, t, q), count)
    else:
        if topic is None or queue is None:
            raise UsageError("dump-cq on a store needs --topic and --queue")
        problem = topic_dir_problem(topic)
        if problem is not None:
            raise UsageError(f"--topic {topic!r}: {problem}; no consume queue can have that name")
        store = open_store(path, common.config)
        if not consume_queue_dir(store.root, topic, queue).is_dir():
            raise NotFoundError(f"{path}: {_missing_queue(store, topic, queue)}")
        cq = store.consume_queue(topic, queue)
        past = _past(store, unconfirmed)
        rows = islice(past.rows(cq.units(from_offset or 0, None), topic, queue), count)
    try:
        renderer.rows(rows, [*COLUMNS, *([CONFIRMED] if unconfirmed and past.boundary is not None else [])])
    finally:
        if store is not None:
            store.close()
    if past.left_out or past.shown:
        what = "shown, marked confirmed=false" if unconfirmed else "left out (--unconfirmed shows them)"
        warn(
            f"{past.left_out + past.shown} unit(s) point at records from offset {past.boundary} on, past the "
            f"checkpoint's confirmPhyOffset: not confirmed by the in-sync replicas; {what}"
        )


def _store_of_file(path: Path, config: Path | None) -> Store | None:
    """The store holding the CQ file ``path`` (``consumequeue/<topic>/<queueId>/<file>`` of a
    directory with a CommitLog), None when it is in none."""
    from rmqcli.ops.dump import store_root_of_cq_file

    root = store_root_of_cq_file(path)
    if root is None:
        return None
    try:
        return open_store(root, config)
    except NotFoundError:  # no CommitLog beside it: a CQ file on its own, read as it is
        return None


def _past(store: Store | None, show: bool) -> UnconfirmedUnits:
    """The units past ``store``'s confirm boundary (none outside controller mode)."""
    from rmqcli.ops.dump import UnconfirmedUnits

    return UnconfirmedUnits(store.unconfirmed_from() if store is not None else None, show)


def _missing_queue(store: Store, topic: str, queue: int) -> str:
    """The one line for a queue without a directory: the queue, or the whole topic, not found,
    with what the store does know of the topic (its queue directories, its topics.json entry)."""
    from rmqcli.store.configfiles import topic_configs

    queues = [q for _, q in store.queue_ids(topic)]
    if queues:
        return f"consume queue {topic}:{queue} not found (topic {topic} has queues {_ranges(queues)})"
    try:
        entry = topic_configs(store.config_dir).get(topic)
    except RmqError:  # a missing or damaged topics.json says nothing about the topic
        entry = None
    if entry is not None:
        return (
            f"consume queue {topic}:{queue} not found (topic {topic} is in config/topics.json, "
            f"readQueueNums {entry.get('readQueueNums', '?')}, but has no consume queue on disk)"
        )
    return f"topic {topic} not found (no consume queue of it, and no entry in config/topics.json)"


def _ranges(ids: list[int]) -> str:
    """``0-3, 7``: sorted queue ids as runs."""
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
