"""``rmq pipeline export``: one row per CommitLog record, as Parquet (or JSON lines) via Spark.

A row is ``rmqcli.ops.records.record_fields`` of the record, the very row ``rmq dump-commitlog
--output jsonl`` prints, plus the store it came from (``store``) and the UTC date of its store
time (``storeDate``). Output is partitioned by ``topic`` and ``storeDate``. Each Spark task
reads one CommitLog file (``tasks.FileTask``, or the bytes Spark read of a URL store's file).

Parquet into a directory: each task writes its own files with pyarrow (``pipeline.parquet``), so
that the whole job runs in the Python workers and scales with the cores. Parquet to a URL and
JSON lines: the tasks run inside ``mapInArrow`` and Spark's writer writes what they return.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rmqcli.errors import UsageError
from rmqcli.pipeline.schema import PARTITION_COLUMNS, ExportBody, ExportFormat, arrow_schema, spark_schema
from rmqcli.pipeline.tasks import FileTask, StoreRef, bytes_commitlog, commitlog_url, file_tasks, is_url
from rmqcli.remoting.javanames import camel_fields
from rmqcli.store.naming import is_offset_name
from rmqcli.store.read.commitlog import CommitLog
from rmqcli.store.read.dledger import DLedgerCommitLog

BATCH_ROWS = 4096
DAY_MS = 86_400_000


@functools.lru_cache(maxsize=4096)
def _date(day: int) -> str:
    return datetime.fromtimestamp(day * DAY_MS / 1000, UTC).strftime("%Y-%m-%d")


def store_date(store_timestamp: int) -> str:
    """The UTC calendar date of an epoch-millisecond time."""
    return _date(store_timestamp // DAY_MS)


@dataclass(frozen=True)
class Selection:
    """Which records go out: topics (empty: all) and a store-time range (epoch ms, inclusive)."""

    topics: frozenset[str] = frozenset()
    since: int | None = None
    until: int | None = None


def task_rows(task: FileTask, selection: Selection, body: ExportBody) -> Iterator[dict[str, Any]]:
    """The export rows of one CommitLog file (on an executor)."""
    return commitlog_rows(task.commitlog(), task.store, selection, body)


def commitlog_rows(
    commitlog: CommitLog | DLedgerCommitLog, store: StoreRef, selection: Selection, body: ExportBody
) -> Iterator[dict[str, Any]]:
    """The export rows of the records of ``commitlog`` (closed at the end)."""
    from formats.commitlog import parse_delay_levels
    from rmqcli.ops.records import BodyMode, RecordFilter, record_fields

    flt = RecordFilter(since=selection.since, until=selection.until)
    delay = parse_delay_levels(store.delay_levels)
    mode = BodyMode.utf8 if body is ExportBody.text else BodyMode.none
    past = store.confirm_boundary
    try:
        for rec in commitlog.records():
            if past is not None and rec.position >= past:
                break  # not in the log (controller mode): as rmq dump-commitlog, left out
            if selection.topics and rec.topic not in selection.topics:
                continue
            if not flt.matches(rec):
                continue
            row = record_fields(rec, body=mode, delay_millis=delay)
            row.update(commitlog.record_extra(rec))  # DLedger: the entry's index, term and pos
            if body is ExportBody.raw:
                data = rec.body()
                if rec.compressed:
                    row["decompressedLength"] = len(data)
                row["body"] = data
            row["store"] = store.path
            row["storeDate"] = store_date(rec.store_timestamp)
            yield row
    finally:
        commitlog.close()


def _batched(rows: Iterator[dict[str, Any]], schema, counter) -> Iterator:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    from rmqcli.pipeline.session import task_errors

    chunk: list[dict[str, Any]] = []
    with task_errors():
        for row in rows:
            chunk.append(row)
            if len(chunk) >= BATCH_ROWS:
                yield pa.RecordBatch.from_pylist(chunk, schema=schema)
                if counter is not None:
                    counter.add(len(chunk))
                chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=schema)
        if counter is not None:
            counter.add(len(chunk))


def arrow_batches(tasks: list[FileTask], selection: Selection, body: ExportBody, counter=None):  # type: ignore[no-untyped-def]
    """The ``mapInArrow`` function of local stores: task ids in, record batches out."""

    def run(batches):  # type: ignore[no-untyped-def]
        schema = arrow_schema(body)
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                yield from _batched(task_rows(tasks[task_id], selection, body), schema, counter)

    return run


def url_batches(stores: dict[int, StoreRef], selection: Selection, body: ExportBody, counter=None):  # type: ignore[no-untyped-def]
    """The ``mapInArrow`` function of URL stores: (path, content, store) rows of the ``binaryFile``
    source in, record batches out."""

    def run(batches):  # type: ignore[no-untyped-def]
        schema = arrow_schema(body)
        for batch in batches:
            paths, contents, refs = (batch.column(i).to_pylist() for i in range(3))
            for path, content, ref in zip(paths, contents, refs, strict=True):
                commitlog = bytes_commitlog(path, content)
                yield from _batched(commitlog_rows(commitlog, stores[ref], selection, body), schema, counter)

    return run


def url_frame(session, store: StoreRef):  # type: ignore[no-untyped-def]
    """The CommitLog files of a URL store as (path, content, store) rows, read by Spark."""
    from pyspark.sql import functions as F

    return (
        session.read.format("binaryFile")
        .option("pathGlobFilter", "[0-9]" * 20)
        .load(commitlog_url(store))
        .select("path", "content", F.lit(store.index).alias("store"))
    )


@dataclass
class ExportResult:
    out: str
    format: str
    stores: int
    files: int | None  # CommitLog files of local stores (None: URL stores, listed by Spark)
    records: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **camel_fields(self, "out", "format", "stores", "commitlogFiles=files", "records"),
            "partitionedBy": list(PARTITION_COLUMNS),
        }


def check_out(out: str, overwrite: bool) -> None:
    """Refuse an existing local output directory unless ``overwrite``."""
    if not is_url(out) and Path(out).exists() and not overwrite:
        raise UsageError(f"{out}: already exists (use --overwrite to replace it)")


def export(
    session,  # type: ignore[no-untyped-def]
    paths: list[Path | str],
    out: str,
    *,
    fmt: ExportFormat = ExportFormat.parquet,
    selection: Selection = Selection(),
    body: ExportBody = ExportBody.none,
    config: Path | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
) -> ExportResult:
    """Write every selected record of the stores under ``out``, partitioned by topic and date."""
    from rmqcli.pipeline.paths import absolute, check_visible
    from rmqcli.pipeline.session import jobs

    out = absolute(out)  # a task would resolve a relative one in its executor's directory
    check_out(out, overwrite)
    stores, tasks = file_tasks(paths, config, urls=True)
    remote = {ref.index: ref for ref in stores if is_url(ref.path)}
    files = len(tasks) if not remote else None
    check_visible(session, tasks, outs=[out])
    if fmt is ExportFormat.parquet and not is_url(out):
        records = _export_direct(
            session, tasks, list(remote.values()), out, selection, body, overwrite, progress
        )
        return ExportResult(out, fmt.value, len(stores), files, records)
    sc = session.sparkContext
    counter = sc.accumulator(0)
    schema = spark_schema(body)
    with jobs(session, f"export {len(stores)} stores", progress=progress):
        ids = session.range(0, len(tasks), 1, numPartitions=max(len(tasks), 1))
        frame = ids.mapInArrow(arrow_batches(tasks, selection, body, counter), schema)
        if remote:
            # one CommitLog file (up to 1 GiB) per Arrow batch into the Python workers
            session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1")
            files = functools.reduce(
                lambda a, b: a.unionByName(b), [url_frame(session, r) for r in remote.values()]
            )
            frame = frame.unionByName(files.mapInArrow(url_batches(remote, selection, body, counter), schema))
        writer = frame.write.mode("overwrite" if overwrite else "errorifexists").partitionBy(
            *PARTITION_COLUMNS
        )
        if fmt is ExportFormat.parquet:
            writer.parquet(out)
        else:
            writer.json(out)
    return ExportResult(out, fmt.value, len(stores), files, int(counter.value))


def _write_task(task: FileTask, out: str, selection: Selection, body: ExportBody) -> int:
    from rmqcli.pipeline.parquet import write_rows
    from rmqcli.pipeline.session import task_errors

    with task_errors():
        name = f"{task.store.index:04d}-{task.from_offset:020d}"
        return write_rows(task_rows(task, selection, body), out, name, body)


def _write_url(
    path: str, data: bytes, store: StoreRef, out: str, selection: Selection, body: ExportBody
) -> int:
    from rmqcli.pipeline.parquet import write_rows
    from rmqcli.pipeline.session import task_errors

    with task_errors():
        commitlog = bytes_commitlog(path, data)
        name = f"{store.index:04d}-{commitlog.files[0].from_offset:020d}"
        return write_rows(commitlog_rows(commitlog, store, selection, body), out, name, body)


def _export_direct(
    session,  # type: ignore[no-untyped-def]
    tasks: list[FileTask],
    remote: list[StoreRef],
    out: str,
    selection: Selection,
    body: ExportBody,
    overwrite: bool,
    progress: bool | None,
) -> int:
    """Parquet into a directory: each task writes its files itself (``rmqcli.pipeline.parquet``)."""
    import shutil

    from rmqcli.pipeline.parquet import SUCCESS, remove_leftovers
    from rmqcli.pipeline.session import jobs

    target = Path(out)
    if overwrite and target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    sc = session.sparkContext
    records = 0
    with jobs(session, f"export {len(tasks)} CommitLog files", progress=progress):
        if tasks:
            rdd = sc.parallelize(tasks, len(tasks))
            records += rdd.map(lambda t: _write_task(t, out, selection, body)).sum()
        for ref in remote:
            named = sc.binaryFiles(commitlog_url(ref)).filter(
                lambda item: is_offset_name(item[0].rsplit("/", 1)[-1])
            )
            records += named.map(
                lambda item, ref=ref: _write_url(item[0], item[1], ref, out, selection, body)
            ).sum()
    remove_leftovers(target)  # what attempts killed mid-write left (their retries wrote it all)
    (target / SUCCESS).touch()
    return int(records)
