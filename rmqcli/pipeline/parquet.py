"""Parquet files written by the export tasks themselves (pyarrow), laid out as Spark lays them out.

A task turns its CommitLog file into rows and writes them to ``OUT/topic=<t>/storeDate=<d>/``, one
file per partition directory and task, without the partition columns (they are in the path, as
Spark writes them). Partition values are escaped as Spark's ``ExternalCatalogUtils.escapePathName``
escapes them (``%XX`` for a few ASCII characters; other characters are kept), so Spark and pyarrow
read the dataset back with the same topic names. Beyond Spark, NUL is escaped too (``%00``, which
both unescape), and a partition directory name longer than a file name may be is refused with an
error naming the record: a directory name made from a topic never fails or leads elsewhere. All
the work of a task happens in its Python worker (the JVM only schedules), which is what lets an
export scale with the cores.

A file is written under a hidden name of its own task attempt (``.`` prefix: readers skip it) and
renamed when complete; its final name depends only on the task and the partition, so a retried
task (Spark retries a task whose executor died) replaces what an earlier attempt wrote instead of
adding to it, and two attempts never write the same file. What a killed attempt left under its
hidden names is removed by the driver once the job is done (``remove_leftovers``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rmqcli.errors import CorruptDataError
from rmqcli.pipeline.schema import PARTITION_COLUMNS, ExportBody, arrow_schema
from rmqcli.store.naming import NAME_MAX

BATCH_ROWS = 4096
# org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils.charToEscape (Unix), and NUL
_ESCAPE = {chr(c) for c in range(0x00, 0x20)} | set("\"#%'*/:=?\\\x7f{[]^")
SUCCESS = "_SUCCESS"
IN_PROGRESS = ".inprogress"


def _attempt() -> str:
    """This task attempt's id (Spark's ``taskAttemptId``, unique in the application), or the
    process id outside a task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return f"attempt-{context.taskAttemptId()}" if context is not None else f"pid-{os.getpid()}"


def remove_leftovers(out: Path) -> int:
    """Remove the hidden in-progress files under ``out``; how many there were."""
    found = 0
    for path in out.rglob(f".*{IN_PROGRESS}"):
        path.unlink(missing_ok=True)
        found += 1
    return found


def escape_path_name(value: str) -> str:
    """A partition value as Spark writes it in a directory name."""
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPE else ch for ch in value)


def partition_dir(row: dict[str, Any]) -> str:
    """``topic=<t>/storeDate=<d>`` of a row; ``CorruptDataError`` (naming the record) for a part
    longer than a file name may be."""
    parts = [f"{name}={escape_path_name(str(row[name]))}" for name in PARTITION_COLUMNS]
    for part in parts:
        size = len(part.encode("utf-8", "surrogatepass"))
        if size > NAME_MAX:
            raise CorruptDataError(
                f"topic {row['topic']!r}: its partition directory name would be {size} bytes, more than "
                f"a file name's {NAME_MAX}",
                row.get("file"),
                row.get("filePos"),
            )
    return "/".join(parts)


def file_schema(body: ExportBody):  # type: ignore[no-untyped-def]
    """The columns stored in the files: all but the partition columns."""
    schema = arrow_schema(body)
    for name in PARTITION_COLUMNS:
        schema = schema.remove(schema.get_field_index(name))
    return schema


class _Writer:
    """One Parquet file being written under a hidden name in its partition directory."""

    def __init__(self, directory: Path, name: str, schema):  # type: ignore[no-untyped-def]
        import pyarrow.parquet as pq

        directory.mkdir(parents=True, exist_ok=True)
        self.final = directory / name
        self.temp = directory / f".{name}.{_attempt()}{IN_PROGRESS}"
        self.writer = pq.ParquetWriter(str(self.temp), schema, compression="snappy")
        self.rows: list[dict[str, Any]] = []

    def flush(self) -> None:
        import pyarrow as pa

        if self.rows:
            self.writer.write_batch(pa.RecordBatch.from_pylist(self.rows, schema=self.writer.schema))
            self.rows = []

    def close(self) -> None:
        self.flush()
        self.writer.close()
        os.replace(self.temp, self.final)


def write_rows(rows: Iterator[dict[str, Any]], out: str, task: str, body: ExportBody) -> int:
    """Write ``rows`` under ``out`` as part files of ``task``; returns how many rows."""
    schema = file_schema(body)
    writers: dict[str, _Writer] = {}
    count = 0
    try:
        for row in rows:
            where = partition_dir(row)
            writer = writers.get(where)
            if writer is None:
                writer = writers[where] = _Writer(Path(out) / where, f"part-{task}.snappy.parquet", schema)
            for name in PARTITION_COLUMNS:
                del row[name]
            writer.rows.append(row)
            if len(writer.rows) >= BATCH_ROWS:
                writer.flush()
            count += 1
        for writer in writers.values():
            writer.close()
    except BaseException:
        for writer in writers.values():
            writer.writer.close()
            writer.temp.unlink(missing_ok=True)
        raise
    return count
