"""Rows for the ``dump-*`` commands: consume-queue units, index files, checkpoint, config files.

Pure functions over the store readers; they return dicts and dataclasses and never print.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import indexfile as ifmt
from rmqcli.errors import CorruptDataError, NotFoundError, UsageError
from rmqcli.ops.records import has_key
from rmqcli.store.checkpoint import Checkpoint
from rmqcli.store.configfiles import CONFIG_FILES, load_config, parse_consumer_offsets, parse_delay_offsets
from rmqcli.store.read.commitlog import CommitLog, Record
from rmqcli.store.read.consumequeue import CqUnit
from rmqcli.store.read.dledger import DLedgerCommitLog
from rmqcli.store.read.index import JAVA_LONG_MAX, IndexFile, IndexService


# --- consume queues -------------------------------------------------------------------------------
def cq_unit_fields(unit: CqUnit, topic: str | None, queue_id: int | None) -> dict[str, Any]:
    return {
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": unit.queue_offset,
        "commitLogOffset": unit.commitlog_offset,
        "size": unit.size,
        "tagsCode": unit.tags_code,
        "filler": unit.is_filler,
    }


def queue_of_cq_file(path: Path) -> tuple[str | None, int | None]:
    """(topic, queueId) from a ``consumequeue/<topic>/<queueId>/<file>`` path, when it is one."""
    qdir = path.parent
    if qdir.name.lstrip("-").isdigit() and qdir.parent.parent.name == "consumequeue":
        return qdir.parent.name, int(qdir.name)
    return None, None


def store_root_of_cq_file(path: Path) -> Path | None:
    """The store directory holding a ``consumequeue/<topic>/<queueId>/<file>`` path, when it is one."""
    if queue_of_cq_file(path)[0] is None:
        return None
    return path.resolve().parent.parent.parent.parent


@dataclass
class UnconfirmedUnits:
    """The units pointing at or past ``boundary`` (a controller-mode store's first unconfirmed
    record, ``rmqcli.store.confirm``). A running 5.1.1 broker builds none past its confirm offset
    (``DefaultMessageStore.ReputMessageService`` stops at ``CommitLog.getConfirmOffset``); such a
    unit was flushed after the checkpoint and points at a record the in-sync replicas did not
    confirm (``rmqcli.ops.lag``). Counted and left out, or (``show``) passed on marked
    ``confirmed: false``, as ``dump-commitlog`` does with the records themselves."""

    boundary: int | None
    show: bool
    left_out: int = 0
    shown: int = 0

    def past(self, unit: CqUnit) -> bool:
        return self.boundary is not None and not unit.is_filler and unit.commitlog_offset >= self.boundary

    def rows(
        self, units: Iterator[CqUnit], topic: str | None, queue_id: int | None
    ) -> Iterator[dict[str, Any]]:
        for unit in units:
            row = cq_unit_fields(unit, topic, queue_id)
            if self.past(unit):
                if not self.show:
                    self.left_out += 1
                    continue
                self.shown += 1
                row["confirmed"] = False
            yield row


# --- index files ----------------------------------------------------------------------------------
def index_header_fields(f: IndexFile) -> dict[str, Any]:
    h = f.header
    return {
        "file": f.name,
        "size": f.mapped.size,
        "beginTimestamp": h.begin_timestamp,
        "endTimestamp": h.end_timestamp,
        "beginPhyOffset": h.begin_phy_offset,
        "endPhyOffset": h.end_phy_offset,
        "hashSlotCount": h.hash_slot_count,
        "indexCount": h.index_count,
        "maxHashSlotNum": f.hash_slot_num,
        "maxIndexNum": f.index_num,
    }


def index_entries(f: IndexFile, begin: int = 0, end: int = JAVA_LONG_MAX) -> Iterator[dict[str, Any]]:
    """Entries of one index file in write order, those stored within [begin, end]."""
    base = f.header.begin_timestamp
    for e in f.entries():
        stamp = base + e.time_diff * 1000
        if begin <= stamp <= end:
            yield {
                "file": f.name,
                "indexNo": e.index_no,
                "keyHash": e.key_hash,
                "phyOffset": e.phy_offset,
                "timeDiff": e.time_diff,
                "timestamp": stamp,
                "prevIndex": e.prev_index,
            }


@dataclass
class IndexHit:
    """One physical offset an index lookup returned and what is there."""

    phy_offset: int
    status: str  # "match", "collision" (other key, same hash), "missing" (no such file), "corrupt"
    record: Record | None = None
    reason: str | None = None


@dataclass
class IndexLookup:
    topic: str
    key: str
    index_key: str
    key_hash: int
    slot: int | None
    phy_offsets: list[int]
    hits: list[IndexHit] = field(default_factory=list)
    checked: bool = False  # whether the records were read from a CommitLog

    @property
    def count(self) -> int:
        return len(self.phy_offsets)

    @property
    def matched(self) -> int | None:
        return sum(h.status == "match" for h in self.hits) if self.checked else None


def index_lookup(
    index: IndexService | IndexFile,
    topic: str,
    key: str,
    commitlog: CommitLog | DLedgerCommitLog | None,
    *,
    begin: int = 0,
    end: int = JAVA_LONG_MAX,
    max_num: int = ifmt.MAX_QUERY_RESULTS,
) -> IndexLookup:
    """``IndexService.queryOffset`` for ``topic#key``, then the records at those offsets.

    Index entries compare only a 31-bit hash; reading the records tells real hits from collisions.
    """
    full_key = ifmt.index_key(topic, key)
    if isinstance(index, IndexService):
        offsets = index.query(topic, key, max_num, begin, end)
        slots = {f.hash_slot_num for f in index.files}
    else:
        offsets = []
        if index.is_time_matched(begin, end):
            index.select(full_key, min(max_num, ifmt.MAX_QUERY_RESULTS), begin, end, offsets)
        slots = {index.hash_slot_num}
    key_hash = ifmt.key_hash(full_key)
    slot = ifmt.slot_of(key_hash, slots.pop()) if len(slots) == 1 else None
    result = IndexLookup(topic, key, full_key, key_hash, slot, offsets)
    if commitlog is not None:
        result.checked = True
        result.hits = [_hit(commitlog, off, topic, key) for off in offsets]
    return result


def _hit(commitlog: CommitLog | DLedgerCommitLog, offset: int, topic: str, key: str) -> IndexHit:
    try:
        rec = commitlog.read(offset)
    except NotFoundError as exc:
        return IndexHit(offset, "missing", reason=str(exc))
    except CorruptDataError as exc:
        return IndexHit(offset, "corrupt", reason=str(exc))
    status = "match" if rec.topic == topic and has_key(rec, key) else "collision"
    return IndexHit(offset, status, rec)


# --- checkpoint -----------------------------------------------------------------------------------
def checkpoint_fields(cp: Checkpoint) -> dict[str, Any]:
    return {
        "physicMsgTimestamp": cp.physic_msg_timestamp,
        "logicsMsgTimestamp": cp.logics_msg_timestamp,
        "indexMsgTimestamp": cp.index_msg_timestamp,
        "masterFlushedOffset": cp.master_flushed_offset,
        "confirmPhyOffset": cp.confirm_phy_offset,
        "minTimestamp": cp.min_timestamp,
        "minTimestampIndex": cp.min_timestamp_index,
    }


# --- config files ---------------------------------------------------------------------------------
CONFIG_KINDS = tuple(CONFIG_FILES)


@dataclass
class ConfigDump:
    kind: str
    source: Path | None
    warning: str | None
    rows: list[dict[str, Any]]


def config_dump(config_dir: Path, kind: str) -> ConfigDump:
    """The rows of one config file (``topics``, ``subscriptions``, ``offsets`` or ``delay``)."""
    if kind not in CONFIG_FILES:
        raise UsageError(f"unknown config kind {kind!r}")
    loaded = load_config(config_dir, CONFIG_FILES[kind])
    data = loaded.data
    if kind == "topics":
        rows = [_named("topicName", name, v) for name, v in data.get("topicConfigTable", {}).items()]
    elif kind == "subscriptions":
        rows = [_named("groupName", name, v) for name, v in data.get("subscriptionGroupTable", {}).items()]
    elif kind == "offsets":
        rows = [
            {"topic": topic, "group": group, "queueId": qid, "offset": offset}
            for (topic, group), queues in parse_consumer_offsets(data, loaded.source or "").items()
            for qid, offset in sorted(queues.items())
        ]
    else:
        rows = [
            {"level": level, "queueId": level - 1, "offset": offset}
            for level, offset in sorted(parse_delay_offsets(data, loaded.source or "").items())
        ]
    return ConfigDump(kind, loaded.source, loaded.error, rows)


def _named(key: str, name: Any, value: Any) -> dict[str, Any]:
    row = {key: str(name)}
    if isinstance(value, dict):
        row.update({k: v for k, v in value.items() if k != key})
    return row
