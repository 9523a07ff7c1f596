"""``rmq pipeline search``: the records of many stores that match a key, a unique key, properties or
a body pattern, found by scanning the CommitLog files in parallel (no index needed).

A task reads one file. Before decoding it checks that every literal it looks for (key, unique
key, property values) occurs somewhere in the file's bytes (properties are stored uncompressed, as
UTF-8), and skips the file otherwise. Matching rows are ``record_fields`` rows, as ``rmq
dump-commitlog`` prints them, with the store they came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqcli.errors import UsageError
from rmqcli.pipeline.paths import check_visible
from rmqcli.pipeline.tasks import FileTask, StoreRef, bytes_commitlog, commitlog_url, file_tasks, is_url
from rmqcli.store.naming import is_offset_name
from rmqcli.store.read.commitlog import CommitLog, Record
from rmqcli.store.read.dledger import DLedgerCommitLog


@dataclass(frozen=True)
class Query:
    """What a record must match; every criterion given must hold."""

    key: str | None = None  # one of the KEYS
    uniq_key: str | None = None  # UNIQ_KEY (the client's message id)
    properties: tuple[tuple[str, str], ...] = ()  # NAME=VALUE pairs
    body_regex: str | None = None  # searched in the body as UTF-8 text (inflated when compressed)
    topics: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.key is None and self.uniq_key is None and not self.properties and self.body_regex is None:
            raise UsageError("give at least one of --key, --uniq-key, --property or --body-regex")
        if self.body_regex is not None:
            try:
                re.compile(self.body_regex)
            except re.error as exc:
                raise UsageError(f"--body-regex: {exc}") from None

    def literals(self) -> list[bytes]:
        """Byte strings every matching record holds verbatim."""
        values = [self.key, self.uniq_key, *(v for _, v in self.properties)]
        return [v.encode("utf-8") for v in values if v and "\ufffd" not in v]

    def matches(self, rec: Record, pattern: re.Pattern[str] | None) -> bool:
        if self.topics and rec.topic not in self.topics:
            return False
        if self.key is not None and self.key not in rec.keys:
            return False
        if self.uniq_key is not None and rec.uniq_key != self.uniq_key:
            return False
        props = rec.properties if self.properties else None
        for name, value in self.properties:
            if props is None or props.get(name) != value:
                return False
        if pattern is not None and pattern.search(rec.body().decode("utf-8", "replace")) is None:
            return False
        return True


def parse_property(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (the value may contain ``=``)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise UsageError(f"--property: expected NAME=VALUE, got {text!r}")
    return name, value


def task_matches(task: FileTask, query: Query, body: str = "none") -> list[dict[str, Any]]:
    """The matching rows of one CommitLog file (on an executor)."""
    return commitlog_matches(task.commitlog(), task.store, query, body)


def commitlog_matches(
    commitlog: CommitLog | DLedgerCommitLog, store: StoreRef, query: Query, body: str = "none"
) -> list[dict[str, Any]]:
    """The matching rows of the records of ``commitlog`` (closed at the end)."""
    from formats.commitlog import parse_delay_levels
    from rmqcli.ops.records import BodyMode, record_fields

    try:
        mf = commitlog.files[0]
        buf = mf.map()
        if any(buf.find(lit) < 0 for lit in query.literals()):
            return []
        pattern = re.compile(query.body_regex) if query.body_regex is not None else None
        delay = parse_delay_levels(store.delay_levels)
        rows = []
        past = store.confirm_boundary
        for rec in commitlog.records():
            if past is not None and rec.position >= past:
                break  # not in the log (controller mode): as rmq dump-commitlog, left out
            if query.matches(rec, pattern):
                row = record_fields(rec, body=BodyMode(body), delay_millis=delay)
                rows.append({"store": store.path, **row, **commitlog.record_extra(rec)})
        return rows
    finally:
        commitlog.close()


def _run_task(task: FileTask, query: Query, body: str) -> list[dict[str, Any]]:
    from rmqcli.pipeline.session import task_errors

    with task_errors():
        return task_matches(task, query, body)


def _run_url(path: str, data: bytes, store: StoreRef, query: Query, body: str) -> list[dict[str, Any]]:
    from rmqcli.pipeline.session import task_errors

    with task_errors():
        return commitlog_matches(bytes_commitlog(path, data), store, query, body)


def search(
    session,  # type: ignore[no-untyped-def]
    paths: list[Path | str],
    query: Query,
    *,
    body: str = "none",
    config: Path | None = None,
    progress: bool | None = None,
) -> list[dict[str, Any]]:
    """Every matching record of the stores, in store then CommitLog order."""
    from rmqcli.pipeline.session import jobs

    stores, tasks = file_tasks(paths, config, urls=True)
    check_visible(session, tasks)
    sc = session.sparkContext
    found: list[tuple[int, dict[str, Any]]] = []
    with jobs(session, f"search {len(stores)} stores", progress=progress):
        if tasks:
            rdd = sc.parallelize(tasks, len(tasks))
            found += rdd.flatMap(lambda t: [(t.store.index, r) for r in _run_task(t, query, body)]).collect()
        for ref in stores:
            if is_url(ref.path):
                files = sc.binaryFiles(commitlog_url(ref)).filter(
                    lambda item: is_offset_name(item[0].rsplit("/", 1)[-1])
                )
                found += files.flatMap(
                    lambda item, ref=ref: [
                        (ref.index, r) for r in _run_url(item[0], item[1], ref, query, body)
                    ]
                ).collect()
    found.sort(key=lambda item: (item[0], item[1]["position"]))
    return [row for _, row in found]
