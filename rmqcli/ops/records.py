"""CommitLog records as plain dicts, record filters, and single-file CommitLog access.

Field names follow RocketMQ's own names (``MessageDecoder``), so a dump can be compared
directly with a dump made by RocketMQ's classes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from formats import commitlog as fmt
from rmqcli.errors import NotFoundError
from rmqcli.store.mapped import MappedFile, MappedFileQueue
from rmqcli.store.naming import is_offset_name
from rmqcli.store.read.commitlog import CommitLog, Corruption, Record


class BodyMode(StrEnum):
    """How a record's body appears in a dump."""

    none = "none"
    utf8 = "utf8"
    hex = "hex"
    base64 = "base64"
    sha256 = "sha256"


def _encode_body(data: bytes, mode: BodyMode) -> tuple[str, str]:
    if mode is BodyMode.sha256:
        return "bodySha256", hashlib.sha256(data).hexdigest()
    if mode is BodyMode.hex:
        return "body", data.hex()
    if mode is BodyMode.base64:
        return "body", base64.b64encode(data).decode("ascii")
    return "body", data.decode("utf-8", "replace")


@functools.lru_cache(maxsize=256)
def _base_name(path: str) -> str:
    return os.path.basename(path)


def record_fields(
    rec: Record,
    *,
    body: BodyMode = BodyMode.none,
    raw: bool = False,
    properties_raw: bool = False,
    delay_millis: list[int] | None = None,
) -> dict[str, Any]:
    """Every header field of ``rec``, its decoded properties, ids and (optionally) its body."""
    stored = rec.stored_body
    computed_crc = fmt.body_crc(stored)
    props = rec.properties
    row: dict[str, Any] = {
        "file": _base_name(rec.file),
        "filePos": rec.file_position,
        "position": rec.position,
        "totalSize": rec.total_size,
        "magicCode": rec.magic_code,
        "magicCodeHex": f"0x{rec.magic_code & 0xFFFFFFFF:08x}",
        "bodyCRC": rec.body_crc,
        "queueId": rec.queue_id,
        "flag": rec.flag,
        "queueOffset": rec.queue_offset,
        "physicalOffset": rec.physical_offset,
        "sysFlag": rec.sys_flag,
        "bornTimestamp": rec.born_timestamp,
        "bornHost": rec.born_host,
        "bornHostBytesHex": bytes(rec.born_address).hex(),
        "storeTimestamp": rec.store_timestamp,
        "storeHost": rec.store_host,
        "storeHostBytesHex": bytes(rec.store_address).hex(),
        "reconsumeTimes": rec.reconsume_times,
        "preparedTransactionOffset": rec.prepared_transaction_offset,
        "topic": rec.topic,
        "topicLength": len(rec.topic.encode("utf-8")),
        "properties": props,
    }
    if properties_raw:
        row["propertiesRaw"] = rec.properties_raw.decode("utf-8", "replace")
    row.update(
        {
            "propertiesLength": len(rec.properties_raw),
            "bodyOffsetInRecord": rec.body_offset,
            "offsetMsgId": rec.msg_id,
            "uniqKey": rec.uniq_key,
            "tags": rec.tags,
            "keys": rec.keys,
            "bodyLength": rec.body_length,
            "computedBodyCRC": computed_crc,
            "crcOk": computed_crc == rec.body_crc,
            "compressed": rec.compressed,
        }
    )
    if rec.compressed:
        row["compressionType"] = _compression_name(rec.sys_flag)
    row["transactionType"] = fmt.transaction_type(rec.sys_flag).name
    row["cqTagsCode"] = _tags_code(rec, delay_millis or fmt.DEFAULT_DELAY_MILLIS)
    if body is not BodyMode.none:
        data = stored if raw else rec.body()
        if rec.compressed and not raw:
            row["decompressedLength"] = len(data)
        key, value = _encode_body(data, body)
        row[key] = value
    return row


def _tags_code(rec: Record, delay_millis: list[int]) -> int:
    try:
        return fmt.dispatch_tags_code(rec.topic, rec.properties, rec.store_timestamp, delay_millis)
    except ValueError:  # a DELAY property that is not a number
        return fmt.tags_code(rec.tags)


def _compression_name(sys_flag: int) -> str:
    kind = fmt.compression_type(sys_flag)
    return "ZLIB" if kind is fmt.CompressionType.ZLIB_LEGACY else kind.name


def corruption_fields(c: Corruption) -> dict[str, Any]:
    """A skipped stretch of bytes, as a dump row of kind ``corrupt`` (``problem``: what it is,
    ``Corruption.kind``)."""
    return {
        "kind": "corrupt",
        "problem": c.kind,
        "file": Path(c.file).name,
        "filePos": c.file_position,
        "position": c.position,
        "length": c.length,
        "reason": c.reason,
    }


@dataclass(frozen=True)
class RecordFilter:
    """Which records a dump keeps; ``None`` fields do not filter."""

    topic: str | None = None
    queue_id: int | None = None
    key: str | None = None
    since: int | None = None  # storeTimestamp >= since (epoch millis)
    until: int | None = None  # storeTimestamp <= until

    def matches(self, rec: Record) -> bool:
        if self.topic is not None and rec.topic != self.topic:
            return False
        if self.queue_id is not None and rec.queue_id != self.queue_id:
            return False
        if self.since is not None and rec.store_timestamp < self.since:
            return False
        if self.until is not None and rec.store_timestamp > self.until:
            return False
        if self.key is not None and not has_key(rec, self.key):
            return False
        return True

    @property
    def by_name(self) -> bool:
        """Whether records are selected by a name (topic, queue, key), not only by a range."""
        return self.topic is not None or self.queue_id is not None or self.key is not None


@dataclass
class NameHits:
    """How many records each named part of a selection matched, whatever the time range: tells
    "not found" (exit 3) from "nothing in the range" (exit 0)."""

    topic: int = 0  # records of the topic (all records when no --topic)
    queue: int = 0  # ... and of the queue
    key: int = 0  # ... and with the key

    def count(self, rec: Record, flt: RecordFilter) -> None:
        if flt.topic is not None and rec.topic != flt.topic:
            return
        self.topic += 1
        if flt.queue_id is not None and rec.queue_id != flt.queue_id:
            return
        self.queue += 1
        if flt.key is None or has_key(rec, flt.key):
            self.key += 1

    def missing(self, flt: RecordFilter, topics: set[str], queues: set[tuple[str, int]]) -> str | None:
        """The named part no record matched, as "<what> not found" (``None``: all were found).

        ``topics``, ``queues``: those the store knows without a record (consume-queue directories,
        ``topics.json``): a topic or queue of the store that has no record in the CommitLog is
        found, and selects nothing.
        """
        if flt.topic is not None and not self.topic and flt.topic not in topics:
            return f"topic {flt.topic!r} not found"
        of_topic = f" of topic {flt.topic!r}" if flt.topic is not None else ""
        if flt.queue_id is not None and not self.queue:
            known = {q for t, q in queues if flt.topic is None or t == flt.topic}
            if flt.queue_id not in known:
                return f"queue {flt.queue_id}{of_topic} not found"
        if flt.key is not None and not self.key:
            in_queue = f" in queue {flt.queue_id}" if flt.queue_id is not None else ""
            return f"key {flt.key!r}{in_queue}{of_topic} not found"
        return None


def has_key(rec: Record, key: str) -> bool:
    """Whether ``key`` is one of the record's KEYS or its UNIQ_KEY (what the index holds)."""
    return key == rec.uniq_key or key in rec.keys


def filtered(
    items: Iterator[Record | Corruption],
    flt: RecordFilter,
    count: int | None = None,
    hits: NameHits | None = None,
) -> Iterator[Record | Corruption]:
    """Records passing ``flt`` (and every ``Corruption``), at most ``count`` records; ``hits``
    counts the records each named part of ``flt`` matched."""
    left = count
    if left is not None and left <= 0:
        return
    for item in items:
        if isinstance(item, Corruption):
            yield item
            continue
        if hits is not None:
            hits.count(item, flt)
        if flt.matches(item):
            yield item
            if left is not None:
                left -= 1
                if left <= 0:
                    return


def single_file_commitlog(path: Path) -> CommitLog:
    """A CommitLog made of one file; its name (a 20-digit offset) gives its start offset."""
    if not path.is_file():
        raise NotFoundError(f"{path}: no such file")
    start = int(path.name) if is_offset_name(path.name) else 0
    size = path.stat().st_size
    return CommitLog(MappedFileQueue([MappedFile(path, start, size)], size))


def commitlog_dir(path: Path) -> CommitLog | None:
    """A CommitLog over a bare directory of offset-named files (not a whole store), if it is one."""
    if not path.is_dir() or (path / "commitlog").exists():
        return None
    queue = MappedFileQueue.open(path)
    return CommitLog(queue) if queue.files else None
