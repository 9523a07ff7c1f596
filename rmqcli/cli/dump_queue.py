"""``rmq dump-cq``: the 20-byte units of one consume queue (or of one consume-queue file)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rmqcli.cli.columns import QUEUE_OFFSET, SIZE, number
from rmqcli.cli.common import Common, config_output, open_store, queue_option, topic_option, value_option
from rmqcli.cli.render import Column
from rmqcli.errors import NotFoundError, RmqError, UsageError

if TYPE_CHECKING:
    from rmqcli.store import Store

COLUMNS = [
    QUEUE_OFFSET,
    number("commitLogOffset", "CommitLogOffset"),
    SIZE,
    number("tagsCode", "TagsCode"),
    Column("filler", "Filler"),
]


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
    *,
    common: Common,
) -> None:
    """Dump consume-queue units: queue offset, CommitLog offset, size, tags code and filler flag.

    Filler units (offset 0, size 0x7fffffff) pad the head of a queue whose first file starts past
    offset 0.
    """
    from rmqcli.ops.dump import cq_unit_fields, queue_of_cq_file
    from rmqcli.store.naming import consume_queue_dir, topic_dir_problem
    from rmqcli.store.read.consumequeue import read_cq_file

    renderer = common.renderer()
    if not path.exists():
        raise NotFoundError(f"{path}: no such store or file")
    if path.is_file():
        t, q = queue_of_cq_file(path)
        t, q = topic or t, queue if queue is not None else q
        units = islice((u for u in read_cq_file(path) if u.queue_offset >= (from_offset or 0)), count)
        rows: Iterable[dict[str, Any]] = (cq_unit_fields(u, t, q) for u in units)
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
        rows = (cq_unit_fields(u, topic, queue) for u in cq.units(from_offset or 0, count))
    renderer.rows(rows, COLUMNS)


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
