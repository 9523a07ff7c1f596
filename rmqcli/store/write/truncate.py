"""Cutting a running broker's store at a CommitLog offset: 5.1.1 ``DefaultMessageStore.truncateFiles``
(a controller-mode replica that rejoins after a failover, docs/controller.md §6.8).

The CommitLog loses every byte from the offset on; the consume queues lose every unit that points
there (``truncateDirtyLogicFiles``) so that no queue names a message the CommitLog no longer holds
(5.1.1 can leave such units, apache/rocketmq#10666); the queue offsets are read again from the
consume queues (``recoverTopicQueueTable``). The index loses the keys of the records cut (5.1.1
keeps them and checks a query's record; rmq takes them out so that ``rmq verify`` finds the store
whole).

Nothing is lost: the CommitLog bytes cut and the consume-queue files dropped are kept under
``<store>/.rmq-backup/<time>-truncate-<offset>/`` first (fsynced), as every rmq command that
removes bytes does.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from rmqcli.durable import fsync_dir
from rmqcli.ops.safety.journal import BACKUP_DIR, write_durable
from rmqcli.store.write.writer import StoreWriter


@dataclass(frozen=True)
class Truncated:
    offset: int
    commitlog_bytes: int  # cut from the CommitLog
    queue_files: int  # consume-queue files dropped whole
    backup: Path | None  # where what was cut is kept (None when nothing was)


def truncate_store(writer: StoreWriter, offset: int) -> Truncated:
    """Cut ``writer``'s store at ``offset`` (a record boundary); a no-op at or past its end."""
    queue = writer.commitlog
    end = queue.max_offset
    if offset >= end:
        return Truncated(offset, 0, 0, None)
    writer.dispatch_pending()
    writer.drop_held(offset)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    backup = writer.root / BACKUP_DIR / f"{stamp}-truncate-{offset}"
    (backup / "commitlog").mkdir(parents=True, exist_ok=True)
    cut = 0
    kept = []
    for f in queue.files:
        if f.from_offset >= offset:
            f.close()
            cut += f.wrote
            os.replace(f.path, backup / "commitlog" / f.path.name)
            continue
        if f.from_offset + f.wrote > offset:
            pos = offset - f.from_offset
            tail = f.read(pos, f.wrote - pos)
            write_durable(backup / "commitlog" / f"{f.path.name}.from-{offset}", tail)
            f.write_at(pos, bytes(len(tail)))
            f.flush()
            cut += len(tail)
            f.wrote = pos
        kept.append(f)
    queue.files = kept
    dropped = 0
    for (topic, queue_id), cq in writer.dispatcher.cqs.items():
        removed = cq.truncate_dirty(offset)
        if removed:
            target = backup / "consumequeue" / topic / str(queue_id)
            target.mkdir(parents=True, exist_ok=True)
            for path in removed:
                os.replace(path, target / path.name)
            fsync_dir(target)
            dropped += len(removed)
        cq.flush()
    writer.cut_index(offset, backup / "index")  # the keys of the records cut (5.1.1 leaves them)
    writer.reset_queue_offsets()
    fsync_dir(backup / "commitlog")
    fsync_dir(queue.directory)
    return Truncated(offset, cut, dropped, backup)
