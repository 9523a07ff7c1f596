"""``rmq dump-cq``: the 20-byte units of one consume queue (or of one consume-queue file)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from pathlib import Path
from typing import Annotated, Any

import typer

from rmqcli.cli.common import ConfigOpt, JsonOpt, OutputOpt, open_store
from rmqcli.cli.render import Column, OutputFormat, Renderer, resolve_format
from rmqcli.errors import NotFoundError, UsageError

COLUMNS = [
    Column("queueOffset", "QueueOffset", justify="right"),
    Column("commitLogOffset", "CommitLogOffset", justify="right"),
    Column("size", "Size", justify="right"),
    Column("tagsCode", "TagsCode", justify="right"),
    Column("filler", "Filler"),
]


def dump_cq(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="STORE_OR_FILE", help="A store directory (with --topic and --queue) or one CQ file."
        ),
    ],
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Topic of the queue.")] = None,
    queue: Annotated[int | None, typer.Option("--queue", "-q", help="Queue id.")] = None,
    from_offset: Annotated[
        int | None,
        typer.Option("--from", min=0, help="First queue offset (default: the first unit on disk)."),
    ] = None,
    count: Annotated[int | None, typer.Option("--count", "-n", min=0, help="Show at most N units.")] = None,
    config: ConfigOpt = None,
    output: OutputOpt = OutputFormat.table,
    json_: JsonOpt = False,
) -> None:
    """Dump consume-queue units: queue offset, CommitLog offset, size, tags code and filler flag.

    Filler units (offset 0, size 0x7fffffff) pad the head of a queue whose first file starts past
    offset 0.
    """
    from rmqcli.ops.dump import cq_unit_fields, queue_of_cq_file
    from rmqcli.store.consumequeue import read_cq_file
    from rmqcli.store.naming import consume_queue_dir, topic_dir_problem

    renderer = Renderer(resolve_format(output, json_))
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
        store = open_store(path, config)
        if not consume_queue_dir(store.root, topic, queue).is_dir():
            raise NotFoundError(f"{path}: no consume queue {topic}:{queue}")
        cq = store.consume_queue(topic, queue)
        rows = (cq_unit_fields(u, topic, queue) for u in cq.units(from_offset or 0, count))
    renderer.rows(rows, COLUMNS)
