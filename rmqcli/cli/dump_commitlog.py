"""``rmq dump-commitlog``: every CommitLog record with its header fields, properties and body."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rmqcli.cli.common import (
    BodyChoice,
    ConfigOpt,
    JsonOpt,
    OutputOpt,
    SinceOpt,
    UntilOpt,
    open_store,
    parse_time,
)
from rmqcli.cli.render import Column, OutputFormat, Renderer, human_time, progress, resolve_format, warn
from rmqcli.errors import NotFoundError

if TYPE_CHECKING:
    from rmqcli.store.commitlog import CommitLog

PROGRESS_STEP = 1 << 20

COLUMNS = [
    Column("position", "Position", justify="right"),
    Column("topic", "Topic"),
    Column("queueId", "Queue", justify="right"),
    Column("queueOffset", "QueueOffset", justify="right"),
    Column("storeTimestamp", "StoreTime", show=human_time),
    Column("totalSize", "Size", justify="right"),
    Column("tags", "Tags"),
    Column("keys", "Keys", wrap=True),
    Column("offsetMsgId", "MsgId"),
]


def dump_commitlog(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="STORE_OR_FILE",
            help="A store directory, a commitlog directory, or one commitlog file (its name is its offset).",
        ),
    ],
    from_offset: Annotated[
        int | None, typer.Option("--from", help="Start at the first record at or after this physical offset.")
    ] = None,
    count: Annotated[int | None, typer.Option("--count", "-n", min=0, help="Show at most N records.")] = None,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Only records of this topic.")] = None,
    queue: Annotated[int | None, typer.Option("--queue", "-q", help="Only records of this queue id.")] = None,
    key: Annotated[
        str | None, typer.Option("--key", "-k", help="Only records with this key or UNIQ_KEY.")
    ] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    body: Annotated[
        BodyChoice, typer.Option("--body", help="Show the body as none, utf8, hex, base64 or sha256.")
    ] = BodyChoice.none,
    raw: Annotated[
        bool, typer.Option("--raw", help="Show compressed bodies as stored (no inflating).")
    ] = False,
    properties: Annotated[
        bool, typer.Option("--properties", help="Add the raw properties string (and a table column).")
    ] = False,
    skip_corrupt: Annotated[
        bool, typer.Option("--skip-corrupt", help="Report corrupt stretches and go on instead of stopping.")
    ] = False,
    config: ConfigOpt = None,
    output: OutputOpt = OutputFormat.table,
    json_: JsonOpt = False,
) -> None:
    """Dump CommitLog records: header fields, decoded properties, message id and body.

    A corrupt record stops the dump with an error naming its file and byte offset (exit code 4);
    with --skip-corrupt it is reported on stderr (and as a row of kind "corrupt" in JSON) and skipped.
    """
    from formats.commitlog import parse_delay_levels
    from rmqcli.ops.records import BodyMode, RecordFilter, filtered

    fmt = resolve_format(output, json_)
    flt = RecordFilter(topic, queue, key, parse_time(since, "--since"), parse_time(until, "--until"))
    commitlog, delay_spec = _open(path, config)
    delay = parse_delay_levels(delay_spec) if delay_spec else None
    items = filtered(commitlog.records(from_offset, skip_corrupt=skip_corrupt), flt, count)
    mode = BodyMode(body.value)
    columns = list(COLUMNS)
    if properties:
        columns.append(Column("properties", "Properties", wrap=True))
    if mode is not BodyMode.none:
        columns.append(Column("bodySha256" if mode is BodyMode.sha256 else "body", "Body", wrap=True))
    renderer = Renderer(fmt)
    start = max(from_offset or 0, commitlog.min_offset)
    end = commitlog.files[-1].from_offset + commitlog.files[-1].size if commitlog.files else 0
    with progress(end - start, "records", enabled=not renderer.tty) as update:

        def rows() -> Iterator[dict[str, Any]]:
            yield from _rows(items, mode, raw, properties, delay, fmt, lambda pos: update(pos - start))

        renderer.rows(rows(), columns)


def _rows(
    items: Iterator[Any],
    mode: Any,
    raw: bool,
    properties: bool,
    delay: list[int] | None,
    fmt: OutputFormat,
    update: Callable[[int], None],
) -> Iterator[dict[str, Any]]:
    from rmqcli.ops.records import corruption_fields, record_fields
    from rmqcli.store.commitlog import Corruption

    next_report = 0
    for item in items:
        if isinstance(item, Corruption):
            warn(f"{item.file} at byte {item.file_position}: {item.reason}; skipped {item.length} bytes")
            if fmt is not OutputFormat.table:
                yield corruption_fields(item)
            continue
        if item.position >= next_report:
            update(item.position)
            next_report = item.position + PROGRESS_STEP
        yield record_fields(item, body=mode, raw=raw, properties_raw=properties, delay_millis=delay)


def _open(path: Path, config: Path | None) -> tuple[CommitLog, str | None]:
    """The CommitLog ``path`` names and the delay levels in force (``None``: the defaults)."""
    from rmqcli.ops.records import commitlog_dir, single_file_commitlog

    if not path.exists():
        raise NotFoundError(f"{path}: no such store, directory or file")
    if path.is_file():
        return single_file_commitlog(path), None
    bare = commitlog_dir(path)
    if bare is not None:
        return bare, None
    store = open_store(path, config)
    if not any(d.is_dir() for d in store.commitlog_dirs):
        raise NotFoundError(f"{path}: no commitlog directory (not a RocketMQ store?)")
    return store.commitlog, store.settings.message_delay_level
