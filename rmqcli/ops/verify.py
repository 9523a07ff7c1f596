"""``verify_store``: read a whole store offline and report every problem with its file and offset.

What counts as an error follows what the Apache RocketMQ broker itself would reject, lose or
never find again (formats.md §1.14, §2.4, §3, §6): a record recovery would stop at, a unit or
index entry that points at the wrong place, a dispatchable record missing from its queue, a
config file neither it nor its ``.bak`` parses. States a broker handles by itself on start
(an unclean shutdown, records not dispatched yet, a pre-allocated empty CommitLog file, a
checkpoint that disagrees with the data, stale bytes after a truncation) are warnings.

The parts live in ``verify_commitlog`` (records), ``verify_queues`` (consume queues),
``verify_index`` (index files); the records are read by the bulk scan shared with ``rmq stats``
and ``rmq rebuild`` (``headerscan``, ``propscan``).
"""

from __future__ import annotations

import fcntl
import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from formats import checkpoint as ckpt_fmt
from formats import commitlog as fmt
from formats import dledger as dfmt
from formats import fastjson
from formats.derive import field_offsets
from rmqcli.errors import CorruptDataError
from rmqcli.memory import give_back_free_memory, map_large_blocks
from rmqcli.ops.verify_commitlog import CommitLogVerifier
from rmqcli.ops.verify_common import (
    ERROR,
    WARNING,
    Collector,
    KindCount,
    Problem,
    VerifyReport,
)
from rmqcli.ops.verify_controller import check_confirm, check_epochs
from rmqcli.ops.verify_dledger import DLedgerVerifier, check_dledger_checkpoint, check_entry_index
from rmqcli.ops.verify_index import check_index, open_files
from rmqcli.ops.verify_queues import QueueUnits, check_coverage, check_units, load_queues, queue_hints
from rmqcli.ops.verify_table import FileInfo, RecordTable
from rmqcli.ops.verify_timer import check_timer_store
from rmqcli.store import Store
from rmqcli.store import configfiles as cfg
from rmqcli.store.checkpoint import Checkpoint
from rmqcli.store.read.dledger import DLedgerCommitLog
from rmqcli.store.settings import StoreSettings
from rmqcli.store.store import Geometry

__all__ = ["ERROR", "WARNING", "KindCount", "Problem", "VerifyReport", "verify_store"]

_CKPT_AT = field_offsets(ckpt_fmt.CheckpointFields)
_CKPT_TIMES = ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp")
_JAVA_NAMES = {
    "physic_msg_timestamp": "physicMsgTimestamp",
    "logics_msg_timestamp": "logicsMsgTimestamp",
    "index_msg_timestamp": "indexMsgTimestamp",
}
_FUTURE_MS = 24 * 3600 * 1000  # a timestamp more than a day ahead of this machine's clock
_CONFIG_NAMES = (cfg.TOPICS, cfg.SUBSCRIPTIONS, cfg.OFFSETS, cfg.DELAY, cfg.FILTERS)


def verify_store(
    store: Store,
    *,
    crc: bool = True,
    topic: str | None = None,
    progress: Callable[[int], None] | None = None,
    max_problems: int | None = None,
) -> VerifyReport:
    """Check the CommitLog, consume queues, index files, checkpoint, abort/lock and config files.

    ``crc``: recompute body CRCs (``checkCRCOnRecover``); ``topic``: limit the queue and index
    checks to one topic (the CommitLog is always read whole); ``progress`` gets the physical
    offset reached; ``max_problems`` caps the listed problems (every one is still counted).
    """
    map_large_blocks()
    root = store.root
    p = Collector(root, max_problems)
    geometry = store.geometry()
    settings = geometry.settings
    commitlog = store.commitlog
    cl_min = commitlog.min_offset
    _check_geometry(store, p, geometry)
    cq_size = settings.mapped_file_size_consume_queue
    if topic is None:
        every = queues = load_queues(store, p, cq_size, held=False)
    else:
        every = load_queues(store, Collector(root, 0), cq_size, held=False)
        queues = load_queues(store, p, cq_size, topic)
    table = _scan_commitlog(store, p, settings, crc, every, progress)
    checkpoint = _check_checkpoint(store, p, table)
    bound = store.confirm_bound() if store.controller_mode else None
    unconfirmed = 0
    if bound is not None:  # RocketMQ 5 controller mode: the records past confirmPhyOffset are not in the log
        unconfirmed = check_confirm(store, bound, queues, table, p)
    if store.controller_mode:
        check_epochs(store, bound.end if bound is not None else commitlog.max_offset(), p)
    abort = _check_run_state(store, p)
    redispatch = _redispatch_from(every, table, cl_min, abort, checkpoint, settings.message_index_safe)
    levels_known = store.configured or "message_delay_level" in settings.explicit
    covered, units = check_units(queues, table, p, cl_min, cq_size, levels_known)
    check_coverage(
        queues,
        table,
        covered,
        p,
        root=root,
        cl_min=cl_min,
        redispatch_from=redispatch,
        file_size=cq_size,
        topic=topic,
        configured=_configured_topics(store),
        dispatched_below=bound.boundary if bound is not None else None,
    )
    table.drop_queue_columns()
    give_back_free_memory()
    index_msg_timestamp = checkpoint.index_msg_timestamp if checkpoint else 0
    index_files, entries = _check_index_files(
        store, p, geometry, table, abort, index_msg_timestamp, topic, redispatch
    )
    _check_configs(store.config_dir, p)
    check_timer_store(store, p, store.timer_precision_ms)  # RocketMQ 5.1.1 timer files, if any
    _check_changes(store, p)
    _check_offsets(store, p, every, cl_min, topic)
    report = VerifyReport(
        store=str(root),
        records=len(table) - unconfirmed,
        bytes=table.bytes - (bound.unconfirmed_bytes if bound is not None else 0),
        crc_checked=table.crc_checked,
        commitlog_files=len(commitlog.files),
        queues=len(queues),
        units=units,
        index_files=index_files,
        index_entries=entries,
        unconfirmed=unconfirmed if bound is not None else None,
    )
    return p.fill(report)


def _scan_commitlog(
    store: Store,
    p: Collector,
    settings: StoreSettings,
    crc: bool,
    queues: list[QueueUnits],
    progress: Callable[[int], None] | None,
) -> RecordTable:
    """Read and check every CommitLog record (``verify_commitlog``; in DLedger mode every entry and
    its record, then the entry index and checkpoint files: ``verify_dledger``); the ``queues`` say
    where records start (``queue_hints``, held by the scan alone, which lets them go once done)."""
    commitlog = store.commitlog
    dledger = isinstance(commitlog, DLedgerCommitLog)
    verifier = (DLedgerVerifier if dledger else CommitLogVerifier)(
        commitlog.files,
        settings.mapped_file_size_commitlog,
        p,
        crc=crc,
        delay_millis=fmt.parse_delay_levels(settings.message_delay_level),
        hints=queue_hints(queues),
        progress=progress,
        # DLedger's recovery checks entry headers only: no body CRC is re-checked on start
        recheck_from=None if dledger else _recheck_from(store, settings.check_crc_on_recover),
        salvage=not dledger,
        **({"divided": commitlog.divided} if isinstance(commitlog, DLedgerCommitLog) else {}),
    )
    table = verifier.scan()
    if isinstance(verifier, DLedgerVerifier):
        assert isinstance(commitlog, DLedgerCommitLog)
        check_entry_index(commitlog.index_queue, commitlog.home / dfmt.INDEX_DIR, verifier.entries, p)
        check_dledger_checkpoint(commitlog.home, verifier.entries, p)
    return table


def _check_run_state(store: Store, p: Collector) -> bool:
    """Warn of an unclean shutdown (``abort``) and of a broker running now (``lock`` held);
    returns whether ``abort`` exists."""
    abort = store.abort_exists
    if abort:
        p.warning(
            "abort",
            store.abort_path,
            None,
            "last shutdown was not clean: the broker will run its abnormal recovery on start",
        )
    if store.lock_held():
        p.warning(
            "lock-held",
            store.lock_path,
            0,
            "a broker is running on this store (its lock is held): files may change while being read",
        )
    return abort


def _check_index_files(
    store: Store,
    p: Collector,
    geometry: Geometry,
    table: RecordTable,
    abort: bool,
    index_msg_timestamp: int,
    topic: str | None,
    redispatch: int,
) -> tuple[int, int]:
    """Open and check the index files (their geometry checked only when known); returns
    (index files, entries)."""
    settings = geometry.settings
    index_geometry = next(c for c in geometry.choices if c.kind == "index")
    known = index_geometry.source != "default"
    slots = settings.max_hash_slot_num if known else None
    num = settings.max_index_num if known else None
    index_files = open_files(store.index_dir, p, slots, num)
    try:
        entries = check_index(
            index_files,
            table,
            p,
            cl_min=store.commitlog.min_offset,
            abort=abort,
            index_msg_timestamp=index_msg_timestamp,
            topic=topic,
            index_enabled=settings.message_index_enable,
            redispatch_from=redispatch,
        )
    finally:
        for f in index_files:
            f.close()
        table.keys.close()
        give_back_free_memory()
    return len(index_files), entries


# --- file sizes ----------------------------------------------------------------------------------
_GEOMETRY_DIRS = {"CommitLog": "commitlog", "consume-queue": "consumequeue", "index": "index"}


def _check_geometry(store: Store, p: Collector, geometry: Geometry) -> None:
    """Without a broker.conf the sizes come from the store's own files (``Store.geometry``): say
    which size was assumed when those files disagree, or when a default had to be assumed."""
    for choice in geometry.choices:
        if choice.source == "config" or not choice.disagree:
            continue
        sizes = ", ".join(
            f"{n} of {size} bytes" for size, n in sorted(choice.sizes.items(), key=lambda i: -i[1])
        )
        assumed = (
            f"assumed {choice.describe()}, the most common size that fits the file names"
            if choice.source == "files"
            else f"none fits; assumed RocketMQ's default {choice.describe()}"
        )
        p.warning(
            "geometry",
            store.root / _GEOMETRY_DIRS[choice.kind],
            None,
            f"{choice.kind} files have different sizes ({sizes}): {assumed}; --config broker.conf gives "
            "the broker's sizes",
        )
    note = geometry.note()
    if note is not None and _default_matters(store, geometry):
        p.warning("geometry", store.root, None, note)


def _default_matters(store: Store, geometry: Geometry) -> bool:
    """A default size is worth naming when the store has data that files of that size would hold
    (a CommitLog with records but no consume queue or index file, which a repair would create)."""
    return bool(store.commitlog.files) and any(c.kind != "CommitLog" for c in geometry.assumed())


# --- where the broker would dispatch from --------------------------------------------------------
def _recheck_from(store: Store, check_crc: bool) -> int | None:
    """First CommitLog offset a starting broker's recovery reads (and CRC-checks, unless
    ``checkCRCOnRecover=false``: ``None``): the third-last file after a clean shutdown, the file
    ``isMappedFileMatchedRecover`` picks after an unclean one. Bodies before it are served unchecked."""
    from rmqcli.ops.recover import start_file_index

    files = store.commitlog.files
    if not check_crc:
        return None
    if not files:
        return 0
    try:
        return files[start_file_index(store, store.abort_exists)].from_offset
    except CorruptDataError:  # an unreadable checkpoint: recovery starts at the first file
        return files[0].from_offset


def _redispatch_from(
    queues: list[QueueUnits],
    table: RecordTable,
    cl_min: int,
    abort: bool,
    checkpoint: Checkpoint | None,
    index_safe: bool,
) -> int:
    """First CommitLog offset the broker (re)dispatches on start.

    A clean start reputs from the consume queues' max physical offset (``DefaultMessageStore.start``);
    after an unclean one ``recoverAbnormally`` re-dispatches from the newest file whose first record
    is not newer than the checkpoint's minimum timestamp (or from the first file).
    """
    reput = max([cl_min] + [q.max_physic for q in queues])
    if not abort:
        return reput
    limit = 0
    if checkpoint is not None:
        limit = checkpoint.min_timestamp_index if index_safe else checkpoint.min_timestamp
    start = table.files[0].mapped.from_offset if table.files else cl_min
    info: FileInfo
    for info in reversed(table.files):
        ts = info.first_store_timestamp
        if ts and ts <= limit:
            start = info.mapped.from_offset
            break
    return min(reput, start)


def _configured_topics(store: Store) -> set[str] | None:
    """Topics in config/topics.json (or its .bak); ``None`` when neither loads or there is none."""
    try:
        loaded = cfg.load_config(store.config_dir, cfg.TOPICS)
    except CorruptDataError:
        return None  # reported by _check_configs
    table = loaded.data.get("topicConfigTable")
    if loaded.source is None or not isinstance(table, dict):
        return None
    return set(table)


# --- checkpoint ----------------------------------------------------------------------------------
def _check_checkpoint(store: Store, p: Collector, table: RecordTable) -> Checkpoint | None:
    """``StoreCheckpoint``: a 4 KiB page; its timestamps must not be ahead of the data."""
    path = store.checkpoint_path
    if not path.is_file():
        p.warning("checkpoint-missing", path, None, "no checkpoint: the broker creates an empty one")
        return None
    data = path.read_bytes()
    if len(data) != ckpt_fmt.PAGE_SIZE:
        p.warning(
            "checkpoint-size", path, None, f"checkpoint is {len(data)} bytes, expected {ckpt_fmt.PAGE_SIZE}"
        )
    try:
        ckpt = Checkpoint.from_bytes(data, str(path))
    except CorruptDataError as exc:
        p.error("checkpoint-size", path, 0, str(exc))
        return None
    now = int(time.time() * 1000)
    last = table.max_store_timestamp
    for name in _CKPT_TIMES:
        value = getattr(ckpt, name)
        java = _JAVA_NAMES[name]
        if value < 0 or value > now + _FUTURE_MS:
            p.warning("checkpoint-time", path, _CKPT_AT[name], f"{java} {value} is not a plausible time")
        elif last is not None and value > last:
            p.warning(
                "checkpoint-ahead",
                path,
                _CKPT_AT[name],
                f"{java} {value} is after the last record's store time {last}: the checkpoint claims data "
                "the CommitLog does not hold (lost or truncated data, or a checkpoint from another store)",
            )
    return ckpt


# --- changes rmq left unfinished -----------------------------------------------------------------
def _check_changes(store: Store, p: Collector) -> None:
    """A change of ``rmq`` (recover, truncate, ...) killed before it committed leaves the store half
    changed: its journal in ``.rmq-backup`` says what to roll back (``rmqcli.ops.safety``). The next
    change on the store rolls it back first; until then a broker must not start on it."""
    from rmqcli.ops.safety import list_backups
    from rmqcli.ops.safety.journal import BACKUP_DIR, LOCK_NAME, MANIFEST, UNFINISHED

    try:
        backups = list_backups(store.root)
    except CorruptDataError as exc:
        p.error("unfinished-change", store.root / BACKUP_DIR, None, f"{exc}: see `rmq backups`")
        return
    unfinished = [b for b in backups if b["state"] in UNFINISHED]
    if not unfinished:
        return
    running = _change_running(store.root / BACKUP_DIR / LOCK_NAME)
    for b in unfinished:
        ts = b["timestamp"]
        command = "rmq " + shlex.join(b["argv"]) if b["argv"] else f"rmq {b['command']}"
        where = Path(b["path"]) / MANIFEST
        if running:
            p.warning(
                "change-running",
                where,
                None,
                f"`{command}` ({ts}) is changing this store now: files may change while being read",
            )
            continue
        p.error(
            "unfinished-change",
            where,
            None,
            f"`{command}` ({ts}) was interrupted ({b['state']}): the store is half changed and a broker "
            f"must not start on it; re-run `{command}` (it rolls the change back first) or roll it back "
            f"with `rmq restore-backup {store.root} {ts} --yes`; `rmq backups` lists it",
        )


def _change_running(lock: Path) -> bool:
    """Whether an ``rmq`` command holds the store's change lock (``flock``) at this moment."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a lock taken just now
    return False


# --- config files --------------------------------------------------------------------------------
def _parse_problem(path: Path) -> tuple[str, int | None] | None:
    """Why ``ConfigManager.load`` would reject ``path`` (None: it loads; missing/empty count as bad)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return "missing", None
    except OSError as exc:
        return f"unreadable: {exc.strerror}", None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 ({exc.reason})", exc.start
    if not text.strip():
        return "empty", None
    try:
        data = fastjson.loads(text)
    except ValueError as exc:
        pos = getattr(exc, "pos", None)
        return str(exc), len(text[:pos].encode("utf-8")) if pos is not None else None
    if not isinstance(data, dict):
        return "not a JSON object", 0
    return None


def _check_configs(config_dir: Path, p: Collector) -> None:
    """Each ``config/*.json`` parses (fastjson dialect); a fallback to ``.bak`` is a warning."""
    for name in _CONFIG_NAMES:
        main = config_dir / name
        bak = config_dir / (name + ".bak")
        if not main.exists() and not bak.exists():
            continue
        bad = _parse_problem(main)
        if bad is None:
            continue
        reason, offset = bad
        bak_bad = _parse_problem(bak)
        if bak_bad is None:
            p.warning("config-bak-used", main, offset, f"{reason}: the broker loads {bak.name} instead")
        elif bad[0] == "missing" and bak_bad[0] == "missing":
            continue
        elif bad[0] == "missing":
            p.error(
                "config-corrupt", bak, bak_bad[1], f"{bak_bad[0]}: {name} is missing and its .bak unusable"
            )
        else:
            p.error(
                "config-corrupt",
                main,
                offset,
                f"{reason}; {bak.name}: {bak_bad[0]}: the broker cannot load this configuration",
            )


def _check_offsets(
    store: Store, p: Collector, queues: list[QueueUnits], cl_min: int, topic: str | None
) -> None:
    """Committed consumer offsets and schedule progress lie within their queues' bounds."""
    by_queue = {(q.topic, q.queue_id): q for q in queues}
    config_dir = store.config_dir
    try:
        offsets = cfg.consumer_offsets(config_dir)
    except CorruptDataError as exc:
        p.error("config-unreadable", config_dir / cfg.OFFSETS, None, str(exc))
        offsets = {}
    for (t, group), table in sorted(offsets.items()):
        if topic is not None and t != topic:
            continue
        for qid, offset in sorted(table.items()):
            what = f"{t}@{group} queue {qid}"
            q = by_queue.get((t, qid))
            _offset_in_range(p, q, config_dir / cfg.OFFSETS, offset, what, "consumer-offset-range", cl_min)
    if topic is not None and topic != fmt.SCHEDULE_TOPIC:
        return
    try:
        delays = cfg.delay_offsets(config_dir)
    except CorruptDataError as exc:
        p.error("config-unreadable", config_dir / cfg.DELAY, None, str(exc))
        delays = {}
    for level, offset in sorted(delays.items()):
        q = by_queue.get((fmt.SCHEDULE_TOPIC, level - 1))
        _offset_in_range(
            p, q, config_dir / cfg.DELAY, offset, f"delay level {level}", "delay-offset-range", cl_min
        )


def _offset_in_range(
    p: Collector, q: QueueUnits | None, path: Path, offset: int, what: str, kind: str, cl_min: int
) -> None:
    if q is None or not q.cq.files:
        if offset > 0:
            p.warning(kind, path, None, f"{what}: offset {offset} but the queue has no consume queue")
        return
    low, high = q.cq.min_offset(cl_min), q.cq.max_offset
    if not low <= offset <= high:
        p.warning(kind, path, None, f"{what}: offset {offset} is outside the queue's [{low}, {high}]")
