"""``rmq pipeline stats``: ``rmq stats`` for many stores, a Spark task per CommitLog file.

Each task folds its file's header arrays into per-(topic, queue) ``QueueStats`` with the function
``rmq stats`` uses (``rmqcli.ops.stats.add_batch``) and adds per-topic histograms: tags, property
names and record sizes. The driver merges the partial results (sums, minima, maxima: the order of
files does not matter) and completes each store as ``store_stats`` does, with the consume queues'
own bounds and the store's file groups, so the numbers are ``rmq stats``'s.

A data file of a DLedger log (``formats.dledger``) is read entry by entry (``DLedgerCommitLog``);
the driver checks the entries' chain across files as ``DLedgerMmapFileStore.recover`` does (index +
1, term never lower, no entries after data ended in zeros), as ``rmq stats`` does over the log.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import commitlog as fmt
from rmqcli.ops.stats import (
    QueueStats,
    StoreStats,
    add_batch,
    earliest,
    finish_confirm,
    finish_stats,
    latest,
    subset,
)
from rmqcli.pipeline.paths import absolute, check_visible
from rmqcli.pipeline.tasks import FileTask, StoreRef, file_tasks, open_store

PERCENTILES = (50, 90, 99)
# a property is NAME \x01 VALUE with a non-empty name and value, pairs split by \x02 (formats.md §1.7)
_NAME = re.compile(
    rb"(?:^|(?<=" + re.escape(fmt.PROPERTY_SEPARATOR.encode()) + rb"))([^\x01\x02]+)\x01(?=[^\x02])"
)


@dataclass
class FilePartial:
    """What one CommitLog file contributes to its store's statistics, and how its data ends (the
    driver checks the files against each other as ``CommitLog.header_batches`` does)."""

    store: int
    path: str = ""
    from_offset: int = 0
    size: int = 0
    records: int = 0
    data_end: int = 0
    zero_tail: bool = False  # the data ends in zeros before the file's end (no BLANK record)
    dledger: bool = False  # a data file of a DLedger log
    first_entry: tuple[int, int] | None = None  # DLedger: (index, term) of the file's first entry
    last_entry: tuple[int, int] | None = None  # and of its last
    queues: dict[tuple[str, int], QueueStats] = field(default_factory=dict)
    # controller mode: the records past the confirm boundary, counted apart (``store_stats``)
    unconfirmed: dict[tuple[str, int], QueueStats] = field(default_factory=dict)
    tags: dict[str, Counter] = field(default_factory=dict)  # topic -> tag (None: no TAGS) -> records
    properties: dict[str, Counter] = field(default_factory=dict)  # topic -> property name -> records
    sizes: dict[str, Counter] = field(default_factory=dict)  # topic -> TOTALSIZE -> records


def merge_queue(into: QueueStats, part: QueueStats) -> None:
    """Add one file's totals of a queue to the running totals."""
    into.messages += part.messages
    into.bytes += part.bytes
    for name, pick in (
        ("min_queue_offset", earliest),
        ("max_queue_offset", latest),
        ("first_store_timestamp", earliest),
        ("last_store_timestamp", latest),
    ):
        value = getattr(part, name)
        if value is not None:
            setattr(into, name, pick(getattr(into, name), value))


def _histograms(partial: FilePartial, scan) -> None:  # type: ignore[no-untyped-def]
    """Tags, property names and sizes per topic from a ``propscan.Scan`` of one file."""
    import numpy as np

    h = scan.headers
    tails = h.tails
    for t, topic in enumerate(h.topics):
        rows = np.flatnonzero(h.topic_index == t)
        if len(rows) == 0:
            continue
        partial.tags.setdefault(topic, Counter()).update(scan.strings(fmt.PROPERTY_TAGS, rows))
        sizes, counts = np.unique(h.total_size[rows], return_counts=True)
        partial.sizes.setdefault(topic, Counter()).update(
            dict(zip(sizes.tolist(), counts.tolist(), strict=True))
        )
        names: Counter = partial.properties.setdefault(topic, Counter())
        starts = h.properties_start[rows].tolist()
        lengths = h.properties_length[rows].tolist()
        data = tails.data
        for s, n in zip(starts, lengths, strict=True):
            if n > 0:
                names.update({m.decode("utf-8", "replace") for m in _NAME.findall(data[s : s + n].tobytes())})


def _histograms_slow(partial: FilePartial, task: FileTask) -> None:
    """The same histograms record by record (a file the bulk scan cannot vouch for)."""
    commitlog = task.commitlog()
    boundary = task.confirm_boundary
    try:
        for rec in commitlog.records():
            if boundary is not None and rec.position >= boundary:
                break  # not in the log (controller mode): no histogram counts it
            partial.tags.setdefault(rec.topic, Counter())[rec.tags] += 1
            partial.sizes.setdefault(rec.topic, Counter())[rec.total_size] += 1
            partial.properties.setdefault(rec.topic, Counter()).update(rec.properties.keys())
    finally:
        commitlog.close()


def file_partial(task: FileTask) -> FilePartial:
    """The statistics of one CommitLog file (on an executor)."""
    from rmqcli.store.read.commitlog import stop_at
    from rmqcli.store.scan import propscan

    partial = FilePartial(task.store.index, task.path, task.from_offset, task.size)
    if task.dledger or task.unconfirmed_inside:
        partial.dledger = True
        _header_scan(partial, task)
        _histograms_slow(partial, task)
        return partial
    mf = task.commitlog().files[0]
    buf = mf.map(whole=True)
    scan = propscan.scan_file(buf, 0, mf.from_offset, None, names=(fmt.PROPERTY_TAGS,))
    if scan is not None:
        stop = stop_at(mf, buf, scan.headers.end, len(buf))
        if stop.problem is None:  # no zeros with records after them: the file is read
            if len(scan):
                add_batch(partial.queues, scan.headers)
                _histograms(partial, scan)
            partial.records = len(scan)
            partial.data_end, partial.zero_tail = scan.headers.end, stop.zero_tail
            mf.close()
            return partial
    mf.close()
    _header_scan(partial, task)
    _histograms_slow(partial, task)
    return partial


def _header_scan(partial: FilePartial, task: FileTask) -> None:
    """The header scan ``rmq stats`` runs: same numbers, same errors (DLedger: and the file's first
    and last entry, for the driver's chain check)."""
    from rmqcli.store.read.dledger import DLedgerCommitLog

    commitlog = task.commitlog()
    try:
        boundary = task.confirm_boundary
        for batch in commitlog.header_batches():
            if boundary is not None and batch.position[-1] >= boundary:
                keep = batch.position < boundary
                add_batch(partial.queues, subset(batch, keep))
                add_batch(partial.unconfirmed, subset(batch, ~keep))
            else:
                add_batch(partial.queues, batch)
            partial.records += len(batch)
            if isinstance(commitlog, DLedgerCommitLog) and len(batch):
                first = commitlog.entry_of(int(batch.position[0]))
                last = commitlog.entry_of(int(batch.position[-1]))
                partial.first_entry = partial.first_entry or (first.index, first.term)
                partial.last_entry = (last.index, last.term)
        end = commitlog.file_end(commitlog.files[0])
        partial.data_end, partial.zero_tail = end.data_end, end.tail == "zeros"
    finally:
        commitlog.close()


def check_entry_chain(parts: list[FilePartial]) -> None:
    """What ``DLedgerCommitLog`` reports between data files: an entry index that does not follow
    the previous file's last, a lower term, or entries after data that ended in zeros."""
    from rmqcli.errors import CorruptDataError

    last: tuple[int, int] | None = None
    ended: FilePartial | None = None  # a file whose data ended in zeros
    for part in sorted(parts, key=lambda p: p.from_offset):
        if part.first_entry is not None:
            if ended is not None:
                raise CorruptDataError(
                    "data ends here in zeros without a blank, yet a later file holds entries: "
                    "recovery stops here",
                    ended.path,
                    ended.data_end,
                )
            index, term = part.first_entry
            if last is not None and index != last[0] + 1:
                raise CorruptDataError(f"entry index {index} does not follow {last[0]}", part.path, 0)
            if last is not None and term < last[1]:
                raise CorruptDataError(
                    f"entry term {term} is lower than the previous entry's {last[1]}", part.path, 0
                )
            last = part.last_entry
        if part.zero_tail:
            ended = ended or part


def check_file_chain(parts: list[FilePartial]) -> None:
    """What ``rmq stats`` reports between files (``commitlog.FileChain``): a file shorter than the
    others, or one that ends in zeros without a BLANK record (or short of the next file) before a
    later file's records."""
    from rmqcli.store.mapped import MappedFile
    from rmqcli.store.read.commitlog import FileChain

    ordered = sorted(parts, key=lambda p: p.from_offset)
    files = [MappedFile(Path(p.path), p.from_offset, p.size) for p in ordered]
    chain = FileChain(files)
    for mf, part in zip(files, ordered, strict=True):
        chain.start(mf)
        if part.records:
            problem = chain.take()
            if problem is not None:
                raise FileChain.error(problem, mf)
        short = chain.end(mf, part.data_end, part.zero_tail)
        if short is not None:
            raise chain.end_error(short, mf)


def percentiles(sizes: Counter) -> dict[str, Any]:
    """Count, min, max, mean and nearest-rank percentiles of a size histogram."""
    total = sum(sizes.values())
    out: dict[str, Any] = {"messages": total}
    if not total:
        return out
    ordered = sorted(sizes.items())
    out["min"] = ordered[0][0]
    out["max"] = ordered[-1][0]
    out["mean"] = round(sum(s * c for s, c in ordered) / total, 1)
    for p in PERCENTILES:
        rank = max(1, -(-p * total // 100))  # ceil(p% of total)
        seen = 0
        for size, count in ordered:
            seen += count
            if seen >= rank:
                out[f"p{p}"] = size
                break
    return out


@dataclass
class PipelineStoreStats:
    """``rmq stats`` of one store plus the histograms."""

    stats: StoreStats
    tags: list[dict[str, Any]]
    properties: list[dict[str, Any]]
    sizes: list[dict[str, Any]]


def finish(ref: StoreRef, parts: list[FilePartial], config: Path | None) -> PipelineStoreStats:
    """Merge one store's file partials and complete them as ``store_stats`` does."""
    queues: dict[tuple[str, int], QueueStats] = {}
    unconfirmed: dict[tuple[str, int], QueueStats] = {}
    tags: dict[str, Counter] = {}
    props: dict[str, Counter] = {}
    sizes: dict[str, Counter] = {}
    if any(p.dledger for p in parts):
        check_entry_chain(parts)
    else:
        check_file_chain(parts)
    for part in parts:
        for into, source in ((queues, part.queues), (unconfirmed, part.unconfirmed)):
            for key, q in source.items():
                merge_queue(into.setdefault(key, QueueStats(*key)), q)
        for target, source in ((tags, part.tags), (props, part.properties), (sizes, part.sizes)):
            for topic, counter in source.items():
                target.setdefault(topic, Counter()).update(counter)
    store = open_store(ref.path, config)
    try:
        result = finish_stats(store, queues)
        bound = store.confirm_bound()
        if bound is not None:
            finish_confirm(result, bound, unconfirmed)
    finally:
        store.close()
    return PipelineStoreStats(
        result,
        tags=[
            {"topic": t, "tag": tag, "messages": n}
            for t in sorted(tags)
            for tag, n in sorted(tags[t].items(), key=lambda kv: (-kv[1], kv[0] or ""))
        ],
        properties=[
            {"topic": t, "property": name, "messages": n}
            for t in sorted(props)
            for name, n in sorted(props[t].items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        sizes=[{"topic": t, **percentiles(sizes[t])} for t in sorted(sizes)],
    )


def _run_task(task: FileTask) -> FilePartial:
    from rmqcli.pipeline.session import task_errors

    with task_errors():
        return file_partial(task)


def pipeline_stats(
    session,  # type: ignore[no-untyped-def]
    paths: list[Path | str],
    *,
    config: Path | None = None,
    progress: bool | None = None,
) -> list[PipelineStoreStats]:
    """Statistics of every store, in command-line order."""
    from rmqcli.pipeline.session import jobs

    stores, tasks = file_tasks(paths, config)
    check_visible(session, tasks)
    parts: list[FilePartial] = []
    if tasks:
        with jobs(session, f"stats of {len(tasks)} CommitLog files", progress=progress):
            rdd = session.sparkContext.parallelize(tasks, len(tasks))
            parts = rdd.map(_run_task).collect()
    return [finish(ref, [p for p in parts if p.store == ref.index], config) for ref in stores]


PARQUET_SECTIONS = ("topics", "queues", "files", "tags", "properties", "sizes", "unsafeTopics")


def write_parquet(session, docs: list[dict[str, Any]], out: str) -> None:  # type: ignore[no-untyped-def]
    """Write each section of the per-store results (rendered as by the CLI) as ``out/<section>``."""
    import json

    from rmqcli.pipeline.session import jobs

    out = absolute(out)
    check_visible(session, outs=[out])
    with jobs(session, "write the statistics as Parquet"):
        for name in PARQUET_SECTIONS:
            rows = [{"store": d["store"]["store"], **row} for d in docs for row in d.get(name, ())]
            if not rows:
                continue
            lines = session.sparkContext.parallelize([json.dumps(r) for r in rows], 1)
            session.read.json(lines).write.mode("overwrite").parquet(f"{out}/{name}")
