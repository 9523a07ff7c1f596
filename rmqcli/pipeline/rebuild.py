"""``rmq pipeline rebuild``: ``rmq rebuild`` with the CommitLog decoded by Spark, file by file.

Each task reads one CommitLog file with ``propscan.scan_file`` (or record by record with
``propscan.decode_file`` when the bulk scan cannot vouch for it), which is what ``rmq rebuild``'s
bulk dispatch reads (``fastdispatch.dispatch_commitlog``). The scans are kept by Spark (memory,
then disk) and come back to the driver store by store, in file order, where the same
``FastDispatcher`` groups them by (topic, queue) and writes consume queues and index files into
the store's staging directory (a store with a corrupt record is left to ``stage_rebuild`` itself,
on the driver); the plan and its application are ``rmq rebuild``'s
(``rmqcli.ops.rebuild``, ``rmqcli.ops.safety``): plan unless ``--yes``, lock check, backup,
journal, rename into place, fsync. The files are byte for byte ``rmq rebuild``'s, and records
whose topic cannot name a consume-queue directory go to no queue and are noted in each store's
plan, as there (``rmqcli.ops.unsafe_topics``).

Writing needs the driver to see each store as a local (or shared, mounted) directory. A DLedger
CommitLog store (``formats.dledger``) has no Spark tasks: its entries are read one by one on the
driver (``stage_rebuild``), as ``rmq rebuild`` reads them, so its files are ``rmq rebuild``'s too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from rmqcli.ops import rebuild as ops
from rmqcli.ops.safety import Plan, ensure_unlocked, finish_interrupted, remove_staging, staging_dir
from rmqcli.pipeline.paths import check_visible
from rmqcli.pipeline.tasks import FileTask, file_tasks, open_store
from rmqcli.store import Store
from rmqcli.store.checkpoint import Checkpoint
from rmqcli.store.scan.fastdispatch import FastDispatcher

Report = Callable[[Plan, bool, "Path | None"], None]


def scan_task(task: FileTask):  # type: ignore[no-untyped-def]
    """One CommitLog file as a ``propscan.Scan`` (on an executor), as ``dispatch_commitlog`` reads it."""
    from rmqcli.pipeline.session import task_errors
    from rmqcli.store.scan import propscan

    with task_errors():
        mf = task.commitlog().files[0]
        try:
            buf = mf.map(whole=True)
            scan = propscan.scan_file(buf, 0, mf.from_offset, None)
            if scan is None:
                scan = propscan.decode_file(buf, 0, mf.from_offset, str(mf.path))
            return task.store.index, scan
        finally:
            mf.close()


check_options = ops.check_options  # the option checks of ``stage_rebuild``, before any Spark work


def stage_from_scans(
    store: Store, scans: Iterable, *, consume_queues: bool, index: bool, topic: str | None
) -> ops.RebuildResult:
    """``stage_rebuild`` of a whole store, dispatching scans made elsewhere (in file order)."""
    import numpy as np

    scope = ops.Scope(consume_queues, index, topic)
    scope.check()
    settings = store.effective_settings()
    # an index geometry only the per-record path handles, or a DLedger log (entries, not records)
    if store.dledger is not None or not FastDispatcher.supports(settings):
        for _ in scans:
            pass
        return ops.stage_rebuild(store, consume_queues=consume_queues, index=index, topic=topic)
    staged = staging_dir(store.root, ops.STAGING_NAME)
    start = store.commitlog.min_offset
    notes = ops.size_notes(store, settings, consume_queues, index)
    result = ops.RebuildResult(Plan("rebuild", store.root, [], notes), staged, scope=scope)
    old = store.checkpoint() if store.checkpoint_path.exists() else Checkpoint()
    dispatcher = scope.dispatcher(FastDispatcher, staged, settings)
    damaged = False
    try:
        for scan in scans:
            if scan.error is not None:
                damaged = True
                break
            dispatcher.dispatch(scan, np.flatnonzero(scan.physical >= start))
        for _ in scans:  # the rest of this store's scans, unread
            pass
    finally:
        dispatcher.close()
    if damaged:  # a corrupt record: what a rebuild does past it is rmq rebuild's own (local) path
        ops.discard(result)
        return ops.stage_rebuild(store, consume_queues=consume_queues, index=index, topic=topic)
    result.take_counts(dispatcher)
    result.checkpoint = ops.rebuilt_checkpoint(
        old, dispatcher.logics_msg_timestamp, dispatcher.completed_end_timestamp, scope
    )
    ops.finish_plan(store, result)
    return result


def _by_store(items: Iterator[tuple[int, object]], count: int) -> Iterator[Iterator[object]]:
    """For stores 0 .. count-1 in order: an iterator over that store's scans."""
    grouped = itertools.groupby(items, key=lambda item: item[0])
    pending = next(grouped, None)
    for i in range(count):
        if pending is not None and pending[0] == i:
            yield (scan for _, scan in pending[1])
            pending = next(grouped, None)
        else:
            yield iter(())


def pipeline_rebuild(
    session,  # type: ignore[no-untyped-def]
    paths: list[Path | str],
    report: Report,
    *,
    consume_queues: bool = True,
    index: bool = True,
    topic: str | None = None,
    apply: bool = False,
    force_unlocked: bool = False,
    argv: list[str] | None = None,
    config: Path | None = None,
    progress: bool | None = None,
) -> None:
    """Rebuild every store; ``report(plan, applied, backup)`` is called once per store, in order."""
    from pyspark import StorageLevel

    from rmqcli.pipeline.session import jobs

    check_options(consume_queues, index, topic)
    stores, tasks = file_tasks(paths, config)
    tasks = [t for t in tasks if not t.dledger]  # a DLedger log is read on the driver (stage_from_scans)
    check_visible(session, tasks)
    if apply:
        for ref in stores:
            ensure_unlocked(Path(ref.path), force=force_unlocked)
            finish_interrupted(Path(ref.path), force_unlocked=force_unlocked)  # roll back a killed run
    with jobs(session, f"rebuild: decode {len(tasks)} CommitLog files", progress=progress):
        rdd = session.sparkContext.parallelize(tasks, max(len(tasks), 1)).map(scan_task)
        rdd.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            rdd.count()  # every file decoded in parallel; then read back in order
            items = rdd.toLocalIterator() if tasks else iter(())
            for ref, scans in zip(stores, _by_store(items, len(stores)), strict=True):
                _rebuild_one(
                    ref.path, scans, report, consume_queues, index, topic, apply, force_unlocked, argv, config
                )
        finally:
            rdd.unpersist()


def _rebuild_one(
    path: str,
    scans: Iterator[object],
    report: Report,
    consume_queues: bool,
    index: bool,
    topic: str | None,
    apply: bool,
    force_unlocked: bool,
    argv: list[str] | None,
    config: Path | None,
) -> None:
    store = open_store(path, config)
    result = None
    try:
        result = stage_from_scans(store, scans, consume_queues=consume_queues, index=index, topic=topic)
        store.close()
        if not apply or result.plan.empty:
            report(result.plan, False, None)
            return
        backup = ops.apply_rebuild(store.root, result, argv, force_unlocked=force_unlocked)
        report(result.plan, True, backup)
    finally:
        store.close()
        if result is not None:
            ops.discard(result)
        remove_staging(store.root, ops.STAGING_NAME)
