"""``rmq pipeline export``: one row per CommitLog record, as Parquet (or JSON lines) via Spark.

A row is ``rmqcli.ops.records.record_fields`` of the record, the very row ``rmq dump-commitlog
--output jsonl`` prints, plus the store it came from (``store``) and the UTC date of its store
time (``storeDate``). Output is partitioned by ``topic`` and ``storeDate``. Each Spark task
reads one CommitLog file (``tasks.FileTask``) inside ``mapInArrow`` and hands Arrow batches to
the JVM writer.
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
from rmqcli.pipeline.tasks import FileTask, file_tasks

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
    from formats.commitlog import parse_delay_levels
    from rmqcli.ops.records import BodyMode, RecordFilter, record_fields

    flt = RecordFilter(since=selection.since, until=selection.until)
    delay = parse_delay_levels(task.store.delay_levels)
    mode = BodyMode.utf8 if body is ExportBody.text else BodyMode.none
    store = task.store.path
    commitlog = task.commitlog()
    try:
        for rec in commitlog.records():
            if selection.topics and rec.topic not in selection.topics:
                continue
            if not flt.matches(rec):
                continue
            row = record_fields(rec, body=mode, delay_millis=delay)
            if body is ExportBody.raw:
                data = rec.body()
                if rec.compressed:
                    row["decompressedLength"] = len(data)
                row["body"] = data
            row["store"] = store
            row["storeDate"] = store_date(rec.store_timestamp)
            yield row
    finally:
        commitlog.close()


def arrow_batches(tasks: list[FileTask], selection: Selection, body: ExportBody, counter=None):  # type: ignore[no-untyped-def]
    """The ``mapInArrow`` function: batches of task ids in, record batches out."""
    from rmqcli.pipeline.session import task_errors

    def run(batches):  # type: ignore[no-untyped-def]
        import pyarrow as pa

        schema = arrow_schema(body)
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                rows: list[dict[str, Any]] = []
                with task_errors():
                    for row in task_rows(tasks[task_id], selection, body):
                        rows.append(row)
                        if len(rows) >= BATCH_ROWS:
                            yield pa.RecordBatch.from_pylist(rows, schema=schema)
                            if counter is not None:
                                counter.add(len(rows))
                            rows = []
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=schema)
                    if counter is not None:
                        counter.add(len(rows))

    return run


@dataclass
class ExportResult:
    out: str
    format: str
    stores: int
    files: int
    records: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "format": self.format,
            "stores": self.stores,
            "commitlogFiles": self.files,
            "records": self.records,
            "partitionedBy": list(PARTITION_COLUMNS),
        }


def export(
    session,  # type: ignore[no-untyped-def]
    paths: list[Path],
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
    from rmqcli.pipeline.session import jobs

    if "://" not in out:
        target = Path(out)
        if target.exists() and not overwrite:
            raise UsageError(f"{out}: already exists (use --overwrite to replace it)")
    stores, tasks = file_tasks(paths, config)
    sc = session.sparkContext
    counter = sc.accumulator(0)
    with jobs(session, f"export {len(tasks)} CommitLog files", progress=progress):
        ids = session.range(0, len(tasks), 1, numPartitions=max(len(tasks), 1))
        frame = ids.mapInArrow(arrow_batches(tasks, selection, body, counter), spark_schema(body))
        writer = frame.write.mode("overwrite" if overwrite else "errorifexists").partitionBy(
            *PARTITION_COLUMNS
        )
        if fmt is ExportFormat.parquet:
            writer.parquet(out)
        else:
            writer.json(out)
    return ExportResult(out, fmt.value, len(stores), len(tasks), int(counter.value))
