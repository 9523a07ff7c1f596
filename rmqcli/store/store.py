"""Open a store directory in RocketMQ's default layout (formats.md §0.1)."""

from __future__ import annotations

import fcntl
import os
import struct
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import overload

from formats import dledger as dfmt
from formats import indexfile as ifmt
from formats.consumequeue import CQ_UNIT_SIZE
from rmqcli.conf.parse import BrokerConf, load
from rmqcli.errors import NotFoundError
from rmqcli.store.checkpoint import Checkpoint, read_checkpoint
from rmqcli.store.confirm import ConfirmBound, confirm_bound, controller_mode
from rmqcli.store.layout import DLedgerLayout, find_dledger
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.naming import (
    CONSUMEQUEUE_DIR,
    consume_queue_dir,
    is_index_name,
    is_safe_topic_dir,
    topic_dir,
)
from rmqcli.store.read.commitlog import CommitLog
from rmqcli.store.read.consumequeue import ConsumeQueue
from rmqcli.store.read.dledger import DLedgerCommitLog
from rmqcli.store.read.index import IndexService
from rmqcli.store.settings import PROPERTY_NAMES, StoreSettings, settings_from_properties

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
    """Whether ``root`` holds a ``commitlog/`` directory, a DLedger log (``dledger-<selfId>/``) or
    the backups of ``rmq`` (a store whose CommitLog a broker.conf puts elsewhere still has its
    backups at its root)."""
    return (
        (root / COMMITLOG_DIR).is_dir()
        or (root / BACKUP_DIR).is_dir()
        or any(p.is_dir() and dfmt.self_id_of(p.name) for p in root.glob(dfmt.DIR_PREFIX + "*"))
    )


@dataclass(frozen=True)
class SizeChoice:
    """One file size of a store's geometry: its value(s), where it came from, and the sizes the
    store's files of that kind have (size -> number of files)."""

    kind: str  # "CommitLog", "consume-queue", "index"
    values: dict[str, int]  # StoreSettings field -> value
    source: str  # "config" | "files" | "default"
    sizes: dict[int, int] = field(default_factory=dict)

    @property
    def disagree(self) -> bool:
        """The files of this kind do not all have one size (or none fits a valid geometry)."""
        return len(self.sizes) > 1 or (self.source == "default" and bool(self.sizes))

    def describe(self) -> str:
        return " ".join(f"{_JAVA_NAMES[k]}={v}" for k, v in self.values.items())


@dataclass(frozen=True)
class Geometry:
    """``Store.geometry``: the effective settings and how each file size was chosen."""

    settings: StoreSettings
    choices: list[SizeChoice]
    configured: bool  # a broker.conf was given: its defaults are the broker's own

    def assumed(self) -> list[SizeChoice]:
        """Sizes that are RocketMQ defaults only because neither a broker.conf nor a file gave them."""
        return [c for c in self.choices if c.source == "default" and not self.configured]

    def note(self) -> str | None:
        """One line naming the default sizes assumed (``None`` when there are none)."""
        assumed = self.assumed()
        if not assumed:
            return None
        kinds = " or ".join(f"{c.kind} file" for c in assumed)
        return (
            f"assumed RocketMQ's default {', '.join(c.describe() for c in assumed)} (no broker.conf, and no "
            f"{kinds} to take the size from); --config broker.conf gives the broker's sizes"
        )


_JAVA_NAMES = {v: k for k, v in PROPERTY_NAMES.items()}


def infer_size(files: list[tuple[int, int]], unit: int = 1) -> tuple[int | None, dict[int, int]]:
    """The size a queue of fixed-size files was written with, from (start offset, size) of its files.

    RocketMQ names each file by its start offset, a multiple of the size, and refuses to load a
    file of another size (``MappedFileQueue.load``). The size kept is a non-zero one that divides
    every start offset, a multiple of ``unit`` (consume queues: 20 bytes), the most common; ties go to
    the larger. Returns it (``None`` when no file has a usable size) and the count of each size.
    """
    counts = dict(Counter(size for _start, size in files))

    def rank(size: int) -> tuple[bool, bool, int, int]:
        fits = all(start % size == 0 for start, _ in files)
        return fits, size % unit == 0, counts[size], size

    usable = [size for size in counts if size > 0]
    return (max(usable, key=rank) if usable else None), counts


def _choose(
    name: str, settings: StoreSettings, files: list[tuple[int, int]], explicit: frozenset[str], unit: int = 1
) -> SizeChoice:
    kind = "CommitLog" if name == "mapped_file_size_commitlog" else "consume-queue"
    size, counts = infer_size(files, unit)
    if name in explicit:
        return SizeChoice(kind, {name: getattr(settings, name)}, "config", counts)
    if size is None:
        return SizeChoice(kind, {name: getattr(settings, name)}, "default", counts)
    return SizeChoice(kind, {name: size}, "files", counts)


def _choose_index(settings: StoreSettings, sizes: list[int], explicit: frozenset[str]) -> SizeChoice:
    """Index geometry: a file's size gives its slots and entries only with the default 1:4 ratio."""
    current = {"max_hash_slot_num": settings.max_hash_slot_num, "max_index_num": settings.max_index_num}
    counts = dict(Counter(sizes))
    if explicit & set(current):
        return SizeChoice("index", current, "config", counts)
    fitting = [size for size in counts if ifmt.geometry_from_size(size) is not None]
    if not fitting:
        return SizeChoice("index", current, "default", counts)
    slots, num = ifmt.geometry_from_size(max(fitting, key=lambda n: (counts[n], n)))  # type: ignore[misc]
    return SizeChoice("index", {"max_hash_slot_num": slots, "max_index_num": num}, "files", counts)


class _BelowRoot:
    """A ``Store`` attribute: the path of a fixed name below the store root (formats.md §0.1)."""

    def __init__(self, name: str):
        self.name = name

    @overload
    def __get__(self, store: None, owner: type | None = None) -> _BelowRoot: ...
    @overload
    def __get__(self, store: Store, owner: type | None = None) -> Path: ...
    def __get__(self, store: Store | None, owner: type | None = None) -> Path | _BelowRoot:
        return self if store is None else store.root / self.name


class Store:
    """A broker's store directory, read-only."""

    def __init__(
        self, root: Path, settings: StoreSettings | None = None, conf: Mapping[str, str] | None = None
    ):
        self.root = Path(root)
        if not self.root.is_dir():
            raise NotFoundError(f"{self.root}: no such store directory")
        self.configured = settings is not None  # settings given (a broker.conf): defaults are the broker's
        self.settings = settings or StoreSettings()
        self.conf = BrokerConf(conf or {})  # the broker.conf as given (empty without one)
        # DLedger CommitLog mode (formats.dledger): from the broker.conf ``conf``, else the store's files
        self.dledger: DLedgerLayout | None = find_dledger(self.root, conf or {}, self.commitlog_dirs)
        # RocketMQ 5 controller mode (rmqcli.store.confirm): from the broker.conf, else the store's files
        self.controller_mode = self.dledger is None and controller_mode(self.root, conf)

    @classmethod
    def open(cls, root: Path | str, config: Path | None = None) -> Store:
        """An existing store: ``NotFoundError`` when ``root`` has no CommitLog directory.

        ``rmq serve`` creates stores: it builds ``Store(root, settings)`` itself.
        """
        root = Path(root)
        conf = load(config) if config else None  # the file read once: the settings and the layout
        settings = settings_from_properties(conf) if conf is not None else None
        store = cls(root, settings, conf)
        store.require_commitlog()
        return store

    @property
    def timer_precision_ms(self) -> int:
        """``timerPrecisionMs`` of the broker.conf (the table's default without one): the timer
        wheel's slot, which the timer files are read by."""
        return int(self.conf.value("timerPrecisionMs"))

    def require_commitlog(self) -> None:
        """``NotFoundError`` unless a CommitLog directory exists: without one, no RocketMQ store."""
        if self.dledger is not None:
            self.dledger.require()
            return
        if not any(d.is_dir() for d in self.commitlog_dirs):
            raise NotFoundError(not_a_store(self.root, self.settings.store_path_commitlog))

    # --- paths --------------------------------------------------------------------------------
    @property
    def commitlog_dirs(self) -> list[Path]:
        if self.settings.store_path_commitlog:
            return [Path(p) for p in self.settings.store_path_commitlog]
        return [self.root / COMMITLOG_DIR]

    consumequeue_dir = _BelowRoot(CONSUMEQUEUE_DIR)
    index_dir = _BelowRoot(INDEX_DIR)
    config_dir = _BelowRoot(CONFIG_DIR)
    checkpoint_path = _BelowRoot(CHECKPOINT_FILE)
    abort_path = _BelowRoot(ABORT_FILE)
    lock_path = _BelowRoot(LOCK_FILE)

    # --- parts --------------------------------------------------------------------------------
    def _explicit_size(self, name: str) -> int | None:
        return getattr(self.settings, name) if name in self.settings.explicit else None

    @cached_property
    def commitlog(self) -> CommitLog | DLedgerCommitLog:
        """The store's CommitLog: ``commitlog/`` (or ``storePathCommitLog``), or in DLedger mode
        the entries of ``dledger-<selfId>/data/`` (``DLedgerCommitLog``, the same questions answered;
        a store switched to DLedger mode: its old CommitLog below the entries)."""
        size = self._explicit_size("mapped_file_size_commitlog")
        if self.dledger is not None:
            d = self.dledger
            old = CommitLog(MappedFileQueue.open(self.commitlog_dirs, size)) if d.mixed else None
            return DLedgerCommitLog(
                MappedFileQueue.open(d.data_dir, size), MappedFileQueue.open(d.index_dir), d.home, old
            )
        return CommitLog(MappedFileQueue.open(self.commitlog_dirs, size))

    def effective_settings(self) -> StoreSettings:
        """Settings with the file sizes this store's files show, where not given explicitly."""
        return self.geometry().settings

    def geometry(self) -> Geometry:
        """The file sizes of this store: from the settings where given, else from its own files
        (``infer_size``), else RocketMQ's defaults; with the sizes each kind of file has."""
        explicit = self.settings.explicit
        cl_files = [(f.from_offset, f.size) for f in self.commitlog.files]
        cqs = [self.consume_queue(t, q) for t, q in self.queue_ids()]
        cq_files = [(f.from_offset, f.size) for cq in cqs for f in cq.files]
        index_sizes = self._index_sizes()
        choices = [
            _choose("mapped_file_size_commitlog", self.settings, cl_files, explicit),
            _choose("mapped_file_size_consume_queue", self.settings, cq_files, explicit, unit=CQ_UNIT_SIZE),
            _choose_index(self.settings, index_sizes, explicit),
        ]
        changes: dict[str, int] = {}
        for c in choices:
            if c.source == "files":
                changes.update(c.values)
        return Geometry(replace(self.settings, **changes), choices, self.configured)

    def _index_sizes(self) -> list[int]:
        if not self.index_dir.is_dir():
            return []
        return [p.stat().st_size for p in self.index_dir.iterdir() if is_index_name(p.name) and p.is_file()]

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

    def confirm_bound(self) -> ConfirmBound | None:
        """Where the confirmed records of a controller-mode store end (``rmqcli.store.confirm``);
        None for any other store, whose every record counts. A missing checkpoint reads as 0."""
        if not self.controller_mode:
            return None
        commitlog = self.commitlog
        assert isinstance(commitlog, CommitLog)
        stored = self.checkpoint().confirm_phy_offset if self.checkpoint_path.exists() else 0
        return confirm_bound(commitlog, stored)

    def unconfirmed_from(self) -> int | None:
        """The offset the unconfirmed records start at, when the log holds any past its confirm
        bound; None otherwise (``confirm_bound``)."""
        bound = self.confirm_bound()
        return bound.boundary if bound is not None and bound.boundary < bound.end else None

    @property
    def abort_exists(self) -> bool:
        return self.abort_path.exists()

    def lock_held(self) -> bool:
        """Whether a running broker holds ``lock`` (a POSIX record lock on byte 0, formats.md §5.2).

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
