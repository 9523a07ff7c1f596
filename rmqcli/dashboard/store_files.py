"""The store page's file listing: what a store directory holds, by kind, with sizes.

The layout is the broker's (``DefaultMessageStore``: ``commitlog/``, ``consumequeue/TOPIC/QUEUE/``,
``index/``, ``config/*.json``, ``checkpoint``, ``lock``, ``abort``; StorePathConfigHelper in
Apache RocketMQ). Every file is counted, but each listing keeps at most ``limit`` rows (the first
by name) next to its total, so a store with thousands of consume-queue files takes bounded memory.
Sizes are the files' lengths (``st_size``); directories are not followed through symlinks except
the store's own top-level ones (a broker may put ``commitlog`` on another disk)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIMIT = 200
KNOWN = ("commitlog", "consumequeue", "index", "config", "checkpoint", "lock", "abort")


@dataclass
class Listing:
    """Rows kept (the first ``limit`` by key, at most twice that many held at once), and the count
    and bytes of every row seen."""

    limit: int
    total: int = 0
    bytes: int = 0
    _kept: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)

    def add(self, key: Any, row: dict[str, Any], size: int) -> None:
        self.total += 1
        self.bytes += size
        self._kept.append((key, row))
        if len(self._kept) >= 2 * self.limit + 1:
            self._trim()

    def _trim(self) -> None:
        self._kept.sort(key=lambda kr: kr[0])
        del self._kept[self.limit :]

    def document(self) -> dict[str, Any]:
        self._trim()
        rows = [row for _, row in self._kept]
        return {"total": self.total, "bytes": self.bytes, "shown": len(rows), "rows": rows}


def _entries(path: Path) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(path) as found:
            yield from found
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return


def _size(entry: os.DirEntry[str], follow: bool = False) -> int:
    try:
        return entry.stat(follow_symlinks=follow).st_size
    except OSError:
        return 0


def _files(path: Path, limit: int) -> Listing:
    """The files right under ``path``, by name."""
    listing = Listing(limit)
    for e in _entries(path):
        if e.is_file(follow_symlinks=False):
            size = _size(e)
            listing.add(e.name, {"name": e.name, "bytes": size}, size)
    return listing


def _queues(path: Path, limit: int) -> tuple[Listing, int]:
    """consumequeue/TOPIC/QUEUE/: one row per queue (its files and bytes); and the file count."""
    listing, files = Listing(limit), 0
    for topic in _entries(path):
        if not topic.is_dir(follow_symlinks=False):
            continue
        for queue in _entries(Path(topic.path)):
            if not queue.is_dir(follow_symlinks=False):
                continue
            count = size = 0
            for e in _entries(Path(queue.path)):
                if e.is_file(follow_symlinks=False):
                    count += 1
                    size += _size(e)
            files += count
            qid = int(queue.name) if queue.name.isascii() and queue.name.isdigit() else -1
            row = {
                "topic": topic.name,
                "queueId": qid if qid >= 0 else queue.name,
                "files": count,
                "bytes": size,
            }
            listing.add((topic.name, qid, queue.name), row, size)
    return listing, files


def _tree(path: str) -> tuple[int, int]:
    """(files, bytes) under a directory, symlinks not followed."""
    count = size = 0
    for top, _dirs, names in os.walk(path, followlinks=False):
        for name in names:
            try:
                size += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                continue
            count += 1
    return count, size


def store_files(root: Path, limit: int = LIMIT) -> dict[str, Any]:
    """The listing of the store at ``root``: ``kinds`` (files and bytes of each), ``commitlog``,
    ``queues``, ``index``, ``config`` (each bounded, with its total) and ``other`` entries."""
    commitlog = _files(root / "commitlog", limit)
    queues, cq_files = _queues(root / "consumequeue", limit)
    index = _files(root / "index", limit)
    config = _files(root / "config", limit)
    other = Listing(limit)
    kinds = [
        {"kind": "commitlog", "count": commitlog.total, "bytes": commitlog.bytes},
        {"kind": "consumequeue", "count": cq_files, "bytes": queues.bytes},
        {"kind": "index", "count": index.total, "bytes": index.bytes},
        {"kind": "config", "count": config.total, "bytes": config.bytes},
    ]
    for e in sorted(_entries(root), key=lambda e: e.name):
        if e.name in KNOWN[:4]:
            continue
        if e.is_dir(follow_symlinks=False):
            count, size = _tree(e.path)
            kind = "directory"
        else:
            count, size, kind = 1, _size(e), "symlink" if e.is_symlink() else "file"
        row = {"name": e.name, "kind": kind, "files": count, "bytes": size}
        if e.name in KNOWN:
            kinds.append({"kind": e.name, "count": 1, "bytes": size})
        else:
            other.add(e.name, row, size)
    return {
        "store": str(root),
        "kinds": kinds,
        "commitlog": commitlog.document(),
        "queues": queues.document(),
        "index": index.document(),
        "config": config.document(),
        "other": other.document(),
    }
