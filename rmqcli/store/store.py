"""Open a store directory in RocketMQ's default layout (FORMATS.md §0.1)."""

from __future__ import annotations

import fcntl
import os
import struct
from dataclasses import replace
from functools import cached_property
from pathlib import Path

from rmqcli.errors import NotFoundError
from rmqcli.store.checkpoint import Checkpoint, read_checkpoint
from rmqcli.store.commitlog import CommitLog
from rmqcli.store.consumequeue import ConsumeQueue
from rmqcli.store.index import IndexService
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.naming import CONSUMEQUEUE_DIR, consume_queue_dir, is_safe_topic_dir, topic_dir
from rmqcli.store.settings import StoreSettings, load_broker_conf

COMMITLOG_DIR = "commitlog"
INDEX_DIR = "index"
CONFIG_DIR = "config"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
LOCK_FILE = "lock"
BACKUP_DIR = ".rmq-backup"  # rmqcli.ops.safety keeps its backups here


def not_a_store(root: Path, commitlog_dirs: tuple[str, ...] = ()) -> str:
    """The one message for a directory that is no RocketMQ store (it has no CommitLog directory)."""
    where = ", ".join(commitlog_dirs) if commitlog_dirs else f"{COMMITLOG_DIR}/"
    return f"{root}: not a RocketMQ store (no {where})"


def has_store_layout(root: Path) -> bool:
    """Whether ``root`` holds a ``commitlog/`` directory or the backups of ``rmq`` (a store whose
    CommitLog a broker.conf puts elsewhere still has its backups at its root)."""
    return (root / COMMITLOG_DIR).is_dir() or (root / BACKUP_DIR).is_dir()


class Store:
    """A broker's store directory, read-only."""

    def __init__(self, root: Path, settings: StoreSettings | None = None):
        self.root = Path(root)
        if not self.root.is_dir():
            raise NotFoundError(f"{self.root}: no such store directory")
        self.settings = settings or StoreSettings()

    @classmethod
    def open(cls, root: Path | str, config: Path | None = None) -> Store:
        """An existing store: ``NotFoundError`` when ``root`` has no CommitLog directory.

        ``rmq serve`` creates stores: it builds ``Store(root, settings)`` itself.
        """
        root = Path(root)
        settings = load_broker_conf(config) if config else StoreSettings()
        store = cls(root, settings)
        store.require_commitlog()
        return store

    def require_commitlog(self) -> None:
        """``NotFoundError`` unless a CommitLog directory exists: without one, no RocketMQ store."""
        if not any(d.is_dir() for d in self.commitlog_dirs):
            raise NotFoundError(not_a_store(self.root, self.settings.store_path_commitlog))

    # --- paths --------------------------------------------------------------------------------
    @property
    def commitlog_dirs(self) -> list[Path]:
        if self.settings.store_path_commitlog:
            return [Path(p) for p in self.settings.store_path_commitlog]
        return [self.root / COMMITLOG_DIR]

    @property
    def consumequeue_dir(self) -> Path:
        return self.root / CONSUMEQUEUE_DIR

    @property
    def index_dir(self) -> Path:
        return self.root / INDEX_DIR

    @property
    def config_dir(self) -> Path:
        return self.root / CONFIG_DIR

    @property
    def checkpoint_path(self) -> Path:
        return self.root / CHECKPOINT_FILE

    @property
    def abort_path(self) -> Path:
        return self.root / ABORT_FILE

    @property
    def lock_path(self) -> Path:
        return self.root / LOCK_FILE

    # --- parts --------------------------------------------------------------------------------
    def _explicit_size(self, name: str) -> int | None:
        return getattr(self.settings, name) if name in self.settings.explicit else None

    @cached_property
    def commitlog(self) -> CommitLog:
        queue = MappedFileQueue.open(self.commitlog_dirs, self._explicit_size("mapped_file_size_commitlog"))
        return CommitLog(queue)

    def effective_settings(self) -> StoreSettings:
        """Settings with the file sizes this store's files show, where not given explicitly."""
        changes: dict[str, int] = {}
        if "mapped_file_size_commitlog" not in self.settings.explicit and self.commitlog.file_size:
            changes["mapped_file_size_commitlog"] = self.commitlog.file_size
        if "max_hash_slot_num" not in self.settings.explicit and self.index.files:
            changes["max_hash_slot_num"] = self.index.files[0].hash_slot_num
            changes["max_index_num"] = self.index.files[0].index_num
        cq_sizes = {f.size for t, q in self.queue_ids() for f in self.consume_queue(t, q).files}
        if "mapped_file_size_consume_queue" not in self.settings.explicit and cq_sizes:
            changes["mapped_file_size_consume_queue"] = max(cq_sizes)
        return replace(self.settings, **changes)

    def topics(self) -> list[str]:
        if not self.consumequeue_dir.is_dir():
            return []
        return sorted(p.name for p in self.consumequeue_dir.iterdir() if p.is_dir())

    def queue_ids(self, topic: str | None = None) -> list[tuple[str, int]]:
        """(topic, queueId) of every consume-queue directory; non-numeric queue dirs are ignored.

        A ``topic`` that cannot name a directory in ``consumequeue/`` (``naming.topic_dir_problem``)
        has no queue there: none is looked for outside it.
        """
        result = []
        if topic and not is_safe_topic_dir(topic):
            return []
        for t in [topic] if topic else self.topics():
            tdir = topic_dir(self.root, t)
            if not tdir.is_dir():
                continue
            for q in tdir.iterdir():
                if q.is_dir() and q.name.lstrip("-").isdigit():
                    result.append((t, int(q.name)))
        return sorted(result)

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cache = self.__dict__.setdefault("_cqs", {})
        if key not in cache:
            directory = consume_queue_dir(self.root, topic, queue_id)  # UnsafeNameError
            size = self._explicit_size("mapped_file_size_consume_queue")
            cache[key] = ConsumeQueue(topic, queue_id, directory, size)
        return cache[key]

    def record_offsets(self):
        """Sorted unique CommitLog offsets the consume queues point at (numpy array).

        A hint for the header scan: it is checked against the CommitLog, never trusted.
        """
        import numpy as np

        from formats.consumequeue import CQ_UNIT_DTYPE, FILLER_SIZE

        unit = np.dtype(CQ_UNIT_DTYPE)
        parts = []
        for topic, queue_id in self.queue_ids():
            cq = self.consume_queue(topic, queue_id)
            for mf in cq.files:
                units = cq.valid_units(mf)
                if units:
                    table = np.frombuffer(mf.map(), dtype=unit, count=units)
                    keep = (table["size"] > 0) & (table["size"] != FILLER_SIZE)
                    parts.append(table["commitlog_offset"][keep].astype(np.int64))
        if not parts:
            return np.empty(0, dtype=np.int64)
        offsets = np.sort(np.concatenate(parts), kind="stable")  # merges the sorted runs of each file
        return offsets[np.concatenate(([True], offsets[1:] != offsets[:-1]))]

    @cached_property
    def index(self) -> IndexService:
        slots = self._explicit_size("max_hash_slot_num")
        num = self._explicit_size("max_index_num")
        return IndexService(self.index_dir, slots, num)

    def checkpoint(self) -> Checkpoint:
        return read_checkpoint(self.checkpoint_path)

    @property
    def abort_exists(self) -> bool:
        return self.abort_path.exists()

    def lock_held(self) -> bool:
        """Whether a running broker holds ``lock`` (a POSIX record lock on byte 0, FORMATS.md §5.2).

        Fails closed: ``False`` only when there is no ``lock`` file or its byte 0 is free; a lock
        file that cannot be opened or queried (permissions, a symlink loop, ...) counts as held.
        """
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return False
        except OSError:
            return True
        try:
            # struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
            query = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, query + b"\0" * 4)
            return struct.unpack("hhqqi", answer[: struct.calcsize("hhqqi")])[0] != fcntl.F_UNLCK
        except OSError:
            return True
        finally:
            os.close(fd)

    def close(self) -> None:
        if "commitlog" in self.__dict__:
            self.commitlog.close()
        if "index" in self.__dict__:
            self.index.close()
        for cq in self.__dict__.get("_cqs", {}).values():
            cq.close()
