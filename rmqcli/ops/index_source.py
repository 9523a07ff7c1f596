"""The index files ``rmq dump-index`` reads, from a store or from one index file, and the CommitLog
their entries point into; and ``IndexService.queryOffset``'s walk without the broker's cap.

A path that is a file is one index file: its geometry is the broker.conf's when that sets it
(``maxHashSlotNum``, ``maxIndexNum``), else what the file's size says; its records are read from
the store two levels up (``STORE/index/FILE``) when that has a ``commitlog`` directory or a DLedger
log (``dledger-<selfId>/``, whose records the index entries find at the entry's pos + 48). A
directory is a store: all of its index files, its CommitLog.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rmqcli.errors import NotFoundError

if TYPE_CHECKING:
    from rmqcli.store import Store
    from rmqcli.store.read.commitlog import CommitLog
    from rmqcli.store.read.dledger import DLedgerCommitLog
    from rmqcli.store.read.index import IndexFile, IndexService

JAVA_LONG_MAX = 2**63 - 1
BROKER_MAX = 64  # MessageStoreConfig.maxMsgsNumBatch, IndexService.queryOffset's cap


@dataclass
class IndexSource:
    files: list[IndexFile]  # oldest first
    commitlog: CommitLog | DLedgerCommitLog | None  # None: an index file without its store's CommitLog


def open_index_source(path: Path, config: Path | None) -> IndexSource:
    """The index files at ``path`` (a store or one index file); ``NotFoundError`` when there are none."""
    from rmqcli.store.read.index import open_index_file

    if not path.exists():
        raise NotFoundError(f"{path}: no such store or file")
    if path.is_file():
        index_file = open_index_file(path, *_geometry(config))
        root = path.parent.parent
        commitlog = _store(root, config).commitlog if _has_log(root) else None
        return IndexSource([index_file], commitlog)
    store = _store(path, config)
    if not store.index_dir.is_dir():
        raise NotFoundError(f"{path}: no index directory")
    return IndexSource(store.index.files, store.commitlog)


def _has_log(root: Path) -> bool:
    """Whether ``root`` holds a CommitLog: ``commitlog/`` or a DLedger log (``dledger-<selfId>/``)."""
    from formats.dledger import DIR_PREFIX, self_id_of

    if (root / "commitlog").is_dir():
        return True
    return any(p.is_dir() and self_id_of(p.name) for p in root.glob(DIR_PREFIX + "*"))


def _geometry(config: Path | None) -> tuple[int | None, int | None]:
    """``(maxHashSlotNum, maxIndexNum)`` when the broker.conf sets either, else the file decides."""
    if config is None:
        return None, None
    from rmqcli.store.settings import load_broker_conf

    s = load_broker_conf(config)
    if "max_hash_slot_num" in s.explicit or "max_index_num" in s.explicit:
        return s.max_hash_slot_num, s.max_index_num
    return None, None


def _store(root: Path, config: Path | None) -> Store:
    from rmqcli.store import Store

    if config is not None and not config.is_file():
        raise NotFoundError(f"{config}: no such broker.conf")
    return Store.open(root, config)


def uncapped_index(files: list[IndexFile]) -> IndexService:
    """``IndexService.queryOffset`` over ``files`` (newest file first, the same walk and stops)
    without its ``maxMsgsNumBatch`` cap: an offline reader can follow a chain to its end."""
    from rmqcli.store.read.index import IndexService

    return IndexService.uncapped(files)
