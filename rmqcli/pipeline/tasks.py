"""Stores and their CommitLog files as Spark tasks: one task per file (records never span files).

The driver lists the files (``Store.commitlog``, so ``--config``'s ``storePathCommitLog`` and
file sizes count); a task names its file by path and offset, and the executor that runs it maps
the file and reads it with the same ``rmqcli.store`` readers as the single-process commands.
Executors must therefore see the store paths under the same names as the driver (a local run,
or a filesystem shared by the cluster's machines).

A store given as a URL (``hdfs://...``, ``s3a://...``, ``file:///...``: anything Hadoop reads) is
read by Spark itself (the ``binaryFile`` source): export and search take such stores, and a task
gets the bytes of its file instead of a path (``bytes_commitlog``).

A store in DLedger CommitLog mode (``formats.dledger``) has a task per data file of
``dledger-<selfId>/data/``, read as entries (``DLedgerCommitLog``): the same records, at the same
physical offsets (an entry's pos + 48), as the single-process commands read. Entries never span
files (``MmapFileList.preAppend`` ends a file with a blank), so a file is a task here too.
"""

from __future__ import annotations

import mmap
import re
from dataclasses import dataclass
from pathlib import Path

from rmqcli.errors import NotFoundError, UsageError
from rmqcli.store import Store
from rmqcli.store.mapped import MappedFile, MappedFileQueue
from rmqcli.store.naming import is_offset_name
from rmqcli.store.read.commitlog import CommitLog
from rmqcli.store.read.dledger import DLedgerCommitLog
from rmqcli.store.settings import StoreSettings, load_broker_conf

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(store: str | Path) -> bool:
    """Whether a store argument is a URL for Spark to read (``scheme://...``)."""
    return isinstance(store, str) and _URL.match(store) is not None


@dataclass(frozen=True)
class StoreRef:
    """One store of a job: its position in the command line, path and delay levels."""

    index: int
    path: str  # absolute
    delay_levels: str
    # controller mode (``rmqcli.store.confirm``): the first record past confirmPhyOffset, when the
    # log holds any; from there on records are not in the log
    confirm_boundary: int | None = None


@dataclass(frozen=True)
class FileTask:
    """One CommitLog file of one store."""

    store: StoreRef
    path: str
    from_offset: int
    size: int
    file_size: int  # the store's CommitLog file size (mappedFileSizeCommitLog)
    dledger: bool = False  # a data file of a DLedger log (entries)

    @property
    def confirm_boundary(self) -> int | None:
        return self.store.confirm_boundary

    @property
    def unconfirmed_inside(self) -> bool:
        """Whether records of this file may be past its store's confirm boundary."""
        return self.confirm_boundary is not None and self.from_offset + self.size > self.confirm_boundary

    @property
    def order(self) -> tuple[int, int]:
        return self.store.index, self.from_offset

    def commitlog(self) -> CommitLog | DLedgerCommitLog:
        """A CommitLog of this one file (on the executor; mapped on first read)."""
        queue = MappedFileQueue([MappedFile(Path(self.path), self.from_offset, self.size)], self.file_size)
        if self.dledger:  # dledger-<selfId>/data/FILE: the entry index file is not read here
            home = Path(self.path).parent.parent
            return DLedgerCommitLog(queue, MappedFileQueue([]), home)
        return CommitLog(queue)


def open_store(path: Path | str, config: Path | None = None) -> Store:
    """The store at ``path`` with its CommitLog files; ``NotFoundError`` when it has none."""
    root = Path(path)
    if not root.exists():
        raise NotFoundError(f"{root}: no such store directory")
    if not root.is_dir():
        raise NotFoundError(f"{root}: not a store directory")
    if config is not None and not config.is_file():
        raise NotFoundError(f"{config}: no such broker.conf")
    store = Store.open(root.resolve(), config)
    if store.dledger is None and not any(d.is_dir() for d in store.commitlog_dirs):
        raise NotFoundError(f"{root}: no commitlog directory (not a RocketMQ store?)")
    return store


def file_tasks(
    paths: list[Path | str], config: Path | None = None, *, urls: bool = False
) -> tuple[list[StoreRef], list[FileTask]]:
    """The stores named on the command line and a task for each CommitLog file of the local ones.

    ``urls``: URL stores are allowed (they get a ``StoreRef`` and no tasks: Spark lists them).
    """
    stores: list[StoreRef] = []
    tasks: list[FileTask] = []
    for i, path in enumerate(paths):
        if is_url(path):
            if not urls:
                raise UsageError(f"{path}: this command needs a store directory, not a URL")
            settings = load_broker_conf(config) if config else StoreSettings()
            stores.append(StoreRef(i, str(path).rstrip("/"), settings.message_delay_level))
            continue
        store = open_store(path, config)
        try:
            ref = StoreRef(i, str(store.root), store.settings.message_delay_level, store.unconfirmed_from())
            stores.append(ref)
            commitlog = store.commitlog
            dledger = store.dledger is not None
            for mf in commitlog.files:
                tasks.append(
                    FileTask(ref, str(mf.path), mf.from_offset, mf.size, commitlog.file_size, dledger)
                )
        finally:
            store.close()
    return stores, tasks


def check_stores(
    paths: list[Path | str], config: Path | None = None, *, urls: bool = False
) -> list[StoreRef]:
    """Fail on a missing or non-store path before a Spark session is started for nothing; the
    stores' references."""
    return file_tasks(paths, config, urls=urls)[0]


def commitlog_url(store: StoreRef) -> str:
    return f"{store.path}/commitlog"


def bytes_commitlog(path: str, data: bytes) -> CommitLog:
    """A CommitLog of one file read by Spark (``path``: its URL, named by its offset)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if not is_offset_name(name):
        raise NotFoundError(f"{path}: not a CommitLog file (its name is not a 20-digit offset)")
    mapped = MappedFile(Path(path), int(name), len(data))
    if data:
        copy = mmap.mmap(-1, len(data))
        copy.write(data)
        copy.seek(0)  # mmap.find starts at the current position
        mapped._map = copy
    return CommitLog(MappedFileQueue([mapped], len(data)))
