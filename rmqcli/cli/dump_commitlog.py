"""``rmq dump-commitlog``: every CommitLog record with its header fields, properties and body."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rmqcli.cli.columns import (
    MSG_ID,
    POSITION,
    QUEUE_ID,
    QUEUE_OFFSET,
    RECORD_KEYS,
    STORE_TIME,
    TAGS,
    TOPIC,
    body_columns,
    number,
)
from rmqcli.cli.common import (
    BodyChoice,
    BodyOpt,
    Common,
    SinceOpt,
    UntilOpt,
    config_output,
    key_option,
    open_store,
    parse_time,
    queue_option,
    record_offset_option,
    skip_corrupt_option,
    switch_option,
    topic_option,
    value_option,
    warn_skipped,
)
from rmqcli.cli.render import (
    Column,
    OutputFormat,
    plain,
    progress,
    warn,
)
from rmqcli.errors import CorruptDataError, NotFoundError

if TYPE_CHECKING:
    from rmqcli.store import Store
    from rmqcli.store.read.commitlog import CommitLog

PROGRESS_STEP = 1 << 20

COLUMNS = [
    POSITION,
    TOPIC,
    QUEUE_ID,
    QUEUE_OFFSET,
    STORE_TIME,
    number("totalSize", "Size"),
    Column(
        "crcOk",
        "Body CRC matches",
        show=lambda ok: plain(ok).upper() if ok is False else plain(ok),
        alert=lambda ok: ok is False,
    ),  # fmt: skip
    TAGS,
    RECORD_KEYS,
    MSG_ID,
]
PROPERTIES = Column("properties", "Properties", wrap=True)

SourceArg = Annotated[
    Path,
    typer.Argument(
        metavar="STORE_OR_FILE",
        help="A store directory, a commitlog directory, or one commitlog file (its name is its offset).",
    ),
]
FromOpt = record_offset_option("--from", "Start")
SkipCorruptOpt = skip_corrupt_option("go on instead of stopping")


@dataclass
class Problems:
    """What a dump met that is not a sound record: skipped stretches and records whose body CRC
    does not match (the first of them names the file and byte offset of the final error)."""

    skipped: int = 0
    bad_crc: int = 0
    first: tuple[str, int] | None = None

    def add(self, path: str, file_pos: int, *, crc: bool = False) -> None:
        if crc:
            self.bad_crc += 1
        else:
            self.skipped += 1
        if self.first is None:
            self.first = (path, file_pos)

    def error(self) -> CorruptDataError | None:
        if self.first is None:
            return None
        parts = [f"{self.skipped} corrupt stretch(es) skipped"] if self.skipped else []
        parts += [f"{self.bad_crc} record(s) whose body CRC does not match"] if self.bad_crc else []
        return CorruptDataError(
            f"{' and '.join(parts)}, the first here (each is warned about above)", *self.first
        )


@config_output
def dump_commitlog(
    path: SourceArg,
    from_offset: FromOpt = None,
    count: value_option(int, "--count", "-n", min=0, help="Show at most N records.") = None,
    topic: topic_option("Only records of this topic.") = None,
    queue: queue_option("Only records of this queue id.") = None,
    key: key_option("Only records with this key or UNIQ_KEY.") = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    body: BodyOpt = BodyChoice.none,
    raw: switch_option("--raw", help="Show compressed bodies as stored (no inflating).") = False,
    properties: switch_option(
        "--properties", help="Add the raw properties string (and a table column)."
    ) = False,
    skip_corrupt: SkipCorruptOpt = False,
    unconfirmed: switch_option(
        "--unconfirmed",
        help="Also show the records past the checkpoint's confirmPhyOffset (controller mode), marked "
        "confirmed=false.",
    ) = False,
    *,
    common: Common,
) -> None:
    """Dump CommitLog records: header fields, decoded properties, message id and body.

    In a RocketMQ 5 controller-mode store (it has epochFileCheckpoint or brokerIdentity, or
    --config says enableControllerMode=true) the records past the checkpoint's confirmPhyOffset are
    not in the log, as 5.1.1's recovery sees it: they are left out and counted in a warning on
    stderr; --unconfirmed shows them too, marked confirmed=false.

    A corrupt record stops the dump with an error naming its file and byte offset (exit code 4),
    and so do zeros inside a file with valid records after them, a file that ends in zeros
    without a BLANK record before a later file's records, and a file shorter than the distance to
    the next one (an empty file): the error says what was left unread. With --skip-corrupt each is
    reported on stderr (and as a row of kind "corrupt" in JSON), the dump goes on at the next
    valid record, and the exit code is still 4. A record whose body CRC does not match is shown
    with crcOk false (FALSE in the table), warned about, and makes the exit code 4.

    --topic, --queue or --key naming something the store does not have exits 3 ("... not found");
    a topic or queue with a consume-queue directory or an entry in topics.json is found even with
    no records. --from, --count, --since and --until select a range: an empty one exits 0.
    """
    from formats.commitlog import parse_delay_levels
    from rmqcli.ops.records import BodyMode, NameHits, RecordFilter, filtered

    flt = RecordFilter(topic, queue, key, parse_time(since, "--since"), parse_time(until, "--until"))
    commitlog, store = _open(path, common.config)
    delay_spec = store.settings.message_delay_level if store is not None else None
    delay = parse_delay_levels(delay_spec) if delay_spec else None
    hits = NameHits()
    bound = store.confirm_bound() if store is not None else None
    past = Unconfirmed(bound.boundary if bound is not None else None, unconfirmed)
    records = past.records(commitlog.records(from_offset, skip_corrupt=skip_corrupt))
    items = filtered(records, flt, count, hits)
    mode = BodyMode(body.value)
    extra = [number(name, title) for name, title in commitlog.extra_columns]  # DLedger's framing
    columns = [*COLUMNS, *extra, *([PROPERTIES] if properties else []), *body_columns(body.value)]
    renderer = common.renderer()
    problems = Problems()
    start = max(from_offset or 0, commitlog.min_offset)
    end = commitlog.files[-1].from_offset + commitlog.files[-1].size if commitlog.files else 0
    with progress(end - start, "records", enabled=not renderer.tty) as update:

        def rows() -> Iterator[dict[str, Any]]:
            yield from _rows(
                items, mode, raw, properties, delay, renderer.fmt, lambda pos: update(pos - start), problems,
                lambda rec: {**commitlog.record_extra(rec), **past.marks(rec)},
            )  # fmt: skip

        renderer.rows(rows(), columns)
    if bound is not None and (past.left_out or past.shown):
        what = "shown, marked confirmed=false" if unconfirmed else "left out (--unconfirmed shows them)"
        warn(
            f"{past.left_out + past.shown} record(s) from offset {bound.boundary} are past the checkpoint's "
            f"confirmPhyOffset {bound.checkpoint}: not confirmed by the in-sync replicas, not in the log; "
            f"{what}"
        )
    error = problems.error()
    if error is not None:
        raise error
    if flt.by_name and count != 0:
        missing = hits.missing(flt, *_known_names(store))
        if missing is not None:
            raise NotFoundError(missing)


class Unconfirmed:
    """The records from ``boundary`` on (a controller-mode store's, ``rmqcli.store.confirm``):
    counted and left out, or (``show``) passed on marked."""

    def __init__(self, boundary: int | None, show: bool):
        self.boundary, self.show = boundary, show
        self.left_out = self.shown = 0

    def records(self, items: Iterator[Any]) -> Iterator[Any]:
        from rmqcli.store.read.commitlog import Corruption

        for item in items:
            if self.boundary is None or isinstance(item, Corruption) or item.physical_offset < self.boundary:
                yield item
            elif self.show:
                self.shown += 1
                yield item
            else:
                self.left_out += 1

    def marks(self, item: Any) -> dict[str, bool]:
        if self.boundary is not None and item.physical_offset >= self.boundary:
            return {"confirmed": False}
        return {}


def _rows(
    items: Iterator[Any],
    mode: Any,
    raw: bool,
    properties: bool,
    delay: list[int] | None,
    fmt: OutputFormat,
    update: Callable[[int], None],
    problems: Problems,
    extra: Callable[[Any], dict[str, int]],
) -> Iterator[dict[str, Any]]:
    from rmqcli.ops.records import corruption_fields, record_fields
    from rmqcli.store.read.commitlog import Corruption

    next_report = 0
    for item in items:
        if isinstance(item, Corruption):
            warn_skipped(item)
            problems.add(item.file, item.file_position)
            if fmt is not OutputFormat.table:
                yield corruption_fields(item)
            continue
        if item.position >= next_report:
            update(item.position)
            next_report = item.position + PROGRESS_STEP
        row = record_fields(item, body=mode, raw=raw, properties_raw=properties, delay_millis=delay)
        row.update(extra(item))  # the log's own framing (DLedger: the entry's index, term and pos)
        if not row["crcOk"]:
            warn(
                f"{item.file} at byte {item.file_position}: body CRC {row['computedBodyCRC']} != stored "
                f"BODYCRC {item.body_crc}: the body is damaged"
            )
            problems.add(item.file, item.file_position, crc=True)
        yield row


def _known_names(store: Store | None) -> tuple[set[str], set[tuple[str, int]]]:
    """The topics and (topic, queueId) a store has without a record: consume-queue directories
    and ``topics.json`` (a single file or a bare CommitLog directory has none)."""
    if store is None:
        return set(), set()
    from rmqcli.store.configfiles import topic_configs

    queues = set(store.queue_ids())
    topics = {t for t, _ in queues} | set(store.topics())
    try:
        topics |= set(topic_configs(store.config_dir))
    except CorruptDataError:
        pass  # an unreadable topics.json: ``dump-config`` and ``verify`` report it
    return topics, queues


def _open(path: Path, config: Path | None) -> tuple[CommitLog, Store | None]:
    """The CommitLog ``path`` names and its store (``None`` for a file or a bare directory)."""
    from rmqcli.ops.records import commitlog_dir, single_file_commitlog

    if not path.exists():
        raise NotFoundError(f"{path}: no such store, directory or file")
    if path.is_file():
        return single_file_commitlog(path), None
    bare = commitlog_dir(path)
    if bare is not None:
        return bare, None
    store = open_store(path, config)  # NotFoundError without a CommitLog (or DLedger data) directory
    return store.commitlog, store
