"""The index built behind the CommitLog after a recovery, while ``rmq serve`` already serves.

After a crash a broker must re-index the records whose index files it dropped (``IndexService.load``
deletes every file newer than the checkpoint's ``indexMsgTimestamp``). ``rmq serve`` recovers the
CommitLog's end and the consume queues before it listens (``recover.stage_recover(index_later=True)``)
and builds those entries here, in a worker thread, from where the recovery says (``index_from``) to
the CommitLog's end at start-up, in bulk (``recover_bulk.index_backlog``). Meanwhile the writer
writes no index entries (``StoreWriter(index_behind=True)``); once the thread is done it opens the
files, indexes what was appended since, and indexes every record as it is appended again
(``StoreWriter.index_caught_up``), as ``ReputMessageService`` catches up with the CommitLog.

Until then a query by key finds only what is indexed, and the checkpoint's ``indexMsgTimestamp``
stays where the recovery left it: a crash meanwhile re-indexes the same records at the next start.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from rmqcli.store.settings import StoreSettings
from rmqcli.store.write.index import IndexNamer
from rmqcli.store.write.writer import StoreWriter

log = logging.getLogger(__name__)


def build_backlog(root: Path, settings: StoreSettings, namer: IndexNamer, start: int, end: int) -> int:
    """Index the records from ``start`` up to ``end`` into the store's index files; returns ``end``."""
    from rmqcli.ops.recover_bulk import index_backlog
    from rmqcli.store import Store
    from rmqcli.store.naming import is_index_name
    from rmqcli.store.scan.fastdispatch import FastDispatcher
    from rmqcli.store.store import INDEX_DIR

    store = Store(root, settings)
    fast = FastDispatcher(root, settings, namer, consume_queues=False)
    try:
        directory = root / INDEX_DIR
        kept = sorted(p for p in directory.iterdir() if is_index_name(p.name)) if directory.is_dir() else []
        fast.resume_index(kept)
        index_backlog(store, start, end, fast)
    finally:
        fast.close()
        store.close()
    return end


async def catch_up(writer: StoreWriter, start: int) -> None:
    """Build the index behind the CommitLog from ``start``, then let ``writer`` index inline again.

    Should the bulk build fail, the writer indexes record by record from ``start`` (entries already
    written are skipped, as ``IndexService.buildIndex`` skips records behind its last file)."""
    end = writer.max_offset
    built = start
    try:
        built = await asyncio.to_thread(
            build_backlog, writer.root, writer.settings, writer.index_namer, start, end
        )
        log.info("index rebuilt behind the CommitLog from offset %d to %d", start, end)
    except Exception:  # noqa: BLE001 - the writer goes on record by record
        log.exception("the index could not be rebuilt in bulk from offset %d; record by record", start)
    writer.index_caught_up(built)
