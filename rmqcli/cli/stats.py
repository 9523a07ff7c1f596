"""``rmq stats``: messages, offsets, bytes and times per topic and queue, from one header scan."""

from __future__ import annotations

from rmqcli.cli.columns import BYTES, FILE, KIND, MESSAGES, QUEUE_ID, REASON, TOPIC, number
from rmqcli.cli.common import (
    Common,
    StoreArg,
    config_output,
    open_store,
    skip_corrupt_option,
    warn_skipped,
)
from rmqcli.cli.render import (
    Column,
    Section,
    camel_dict,
    human_time,
    progress,
    warn,
)
from rmqcli.errors import CorruptDataError

QUEUES = number("queues", "Queues")
STORED_COLUMNS = [  # what a topic's or a queue's records take and when they were stored
    BYTES,
    Column("firstStoreTimestamp", "FirstStored", show=human_time),
    Column("lastStoreTimestamp", "LastStored", show=human_time),
]
TOPIC_COLUMNS = [TOPIC, QUEUES, MESSAGES, *STORED_COLUMNS]
QUEUE_COLUMNS = [
    TOPIC,
    QUEUE_ID,
    MESSAGES,
    number("minQueueOffset", "MinQOffset"),
    number("maxQueueOffset", "MaxQOffset"),
    number("cqMinOffset", "CqMin"),
    number("cqMaxOffset", "CqMax"),
    *STORED_COLUMNS,
]
UNSAFE_COLUMNS = [TOPIC, QUEUES, MESSAGES, REASON]
FILE_COLUMNS = [KIND, number("count", "Files"), BYTES]
CORRUPT_COLUMNS = [
    Column("problem", "Problem"),
    FILE,
    number("filePos", "Byte"),
    number("length", "Bytes skipped"),
    REASON,
]
SkipCorruptOpt = skip_corrupt_option("count the records after them")


@config_output
def stats(
    path: StoreArg,
    skip_corrupt: SkipCorruptOpt = False,
    *,
    common: Common,
) -> None:
    """Store statistics: per topic and per queue the message count, queue offsets (in the CommitLog
    and in the consume queue), bytes and first/last store time; the CommitLog's min and max
    physical offsets; and the count and size of the store's files by kind.

    Topics whose name cannot be a consume-queue directory (`..`, a `/`, a NUL, more than 255
    bytes) are warned about on stderr and listed in a section "unsafeTopics" (only when there are
    any): no queue is written for them.

    A corrupt record, zeros inside a CommitLog file with valid records after them, or a file that
    ends short of the next one (an empty file, a lost BLANK record) stops the count with an error
    naming the file and byte offset (exit code 4). With --skip-corrupt each is warned about on
    stderr and listed in a section "corrupt", the count goes on at the next valid record (as
    verify reads), and the exit code is still 4.

    In a RocketMQ 5 controller-mode store (epochFileCheckpoint or brokerIdentity in it, or
    enableControllerMode=true in --config) the records past the checkpoint's confirmPhyOffset are
    not in the log, as 5.1.1's recovery has it: they are left out of every count (and the
    CommitLog's max offset ends before them), warned about on stderr, and listed per queue in the
    sections "confirm" and "unconfirmed".
    """
    from rmqcli.ops.records import corruption_fields
    from rmqcli.ops.stats import store_stats
    from rmqcli.store.read.commitlog import Corruption

    store = open_store(path, common.config)
    files = store.commitlog.files
    total = files[-1].from_offset + files[-1].size - files[0].from_offset if files else 0
    base = files[0].from_offset if files else 0
    skipped: list[Corruption] = []

    def skip(problem: Corruption) -> None:
        warn_skipped(problem)
        skipped.append(problem)

    with progress(total, "scanning") as update:
        result = camel_dict(
            store_stats(store, lambda pos: update(pos - base), skip if skip_corrupt else None)
        )
    warn_unsafe(result["unsafeTopics"])
    sections = stats_sections(result)
    if skipped:
        rows = [{k: v for k, v in corruption_fields(c).items() if k != "kind"} for c in skipped]
        title = "Corrupt stretches skipped (the records after them are counted)"
        sections.append(Section("corrupt", "corrupt", rows=rows, columns=CORRUPT_COLUMNS, title=title))
    common.renderer().sections(sections)
    if skipped:
        first = skipped[0]
        raise CorruptDataError(
            f"{len(skipped)} corrupt stretch(es) skipped, the first here (each is warned about above)",
            first.file,
            first.file_position,
        )


UNCONFIRMED_COLUMNS = [
    TOPIC,
    QUEUE_ID,
    MESSAGES,
    number("minQueueOffset", "MinQOffset"),
    number("maxQueueOffset", "MaxQOffset"),
]


def stats_sections(result: dict) -> list[Section]:  # type: ignore[type-arg]
    """The sections of ``rmq stats``'s output for ``store_stats``'s result as ``--json`` data
    (``rmq dashboard``'s store page shows the same)."""
    sections = [
        Section("store", "store", item={"store": result["store"]}),
        Section("commitlog", "commitlog", item=commitlog_item(result["commitlog"]), title="CommitLog"),
        Section("topics", "topic", rows=result["topics"], columns=TOPIC_COLUMNS, title="Topics"),
        Section("queues", "queue", rows=result["queues"], columns=QUEUE_COLUMNS, title="Queues"),
        Section("files", "files", rows=result["files"], columns=FILE_COLUMNS, title="Files"),
    ]
    if result["unsafeTopics"]:
        sections.append(unsafe_section(result["unsafeTopics"]))
    if result["confirm"] is not None:
        sections += confirm_sections(result["confirm"])
    return sections


def confirm_sections(confirm: dict) -> list[Section]:
    """A controller-mode store: its confirm offset, and the records past it (warned about on
    stderr), which the counts above leave out as 5.1.1's recovery does."""
    item = confirm_item(confirm)
    title = "Past confirmPhyOffset (not in the log until confirmed)"
    return [
        Section("confirm", "confirm", item=item, title="Confirm offset (controller mode)"),
        Section(
            "unconfirmed", "unconfirmed", rows=confirm["queues"], columns=UNCONFIRMED_COLUMNS, title=title
        ),
    ]


def confirm_item(confirm: dict) -> dict:
    """The confirm section's fields (its queues are the ``unconfirmed`` rows); the records past the
    bound, and a stored value a broker would correct, are warned about on stderr."""
    if confirm["unconfirmedRecords"]:
        warn(
            f"{confirm['unconfirmedRecords']} record(s) ({confirm['unconfirmedBytes']} bytes) from offset "
            f"{confirm['unconfirmedFrom']} are past the checkpoint's confirmPhyOffset "
            f"{confirm['confirmPhyOffset']}: not confirmed by the in-sync replicas, not counted"
        )
    if confirm["clamped"]:
        warn(f"{confirm['clamped']}: a starting broker corrects it to {confirm['confirmOffset']}")
    return {k: v for k, v in confirm.items() if k != "queues"}


def commitlog_item(fields: dict) -> dict:
    """The CommitLog section: its fields, and its first and last store times as text too."""
    item = dict(fields)
    for name in ("firstStoreTimestamp", "lastStoreTimestamp"):
        item[name + "Human"] = human_time(item[name])
    return item


def unsafe_section(rows: list[dict], columns: list[Column] | None = None) -> Section:
    """The topics that can have no consume queue (``rmqcli.ops.stats.UnsafeTopicStats``)."""
    title = "Topics that cannot name a consume-queue directory (no queue is written)"
    return Section("unsafeTopics", "unsafeTopic", rows=rows, columns=columns or UNSAFE_COLUMNS, title=title)


def warn_unsafe(rows: list[dict], store: str | None = None) -> None:
    """One warning line on stderr per topic of ``rows``."""
    where = f"{store}: " if store else ""
    for row in rows:
        warn(
            f"{where}{row['messages']} record(s) of topic {row['topic']!r} go to no consume queue: "
            f"{row['reason']}"
        )
