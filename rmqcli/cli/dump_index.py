"""``rmq dump-index``: index file headers and entries, or a key lookup like ``queryMessage``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rmqcli.cli.columns import (
    FILE,
    KEYS,
    QUEUE_ID,
    QUEUE_OFFSET,
    STORE_TIME,
    TOPIC,
    UNIQ_KEY,
    number,
)
from rmqcli.cli.common import (
    Common,
    config_output,
    key_option,
    parse_time,
    stored_time_option,
    switch_option,
    topic_option,
)
from rmqcli.cli.render import Column, Section, human_time, warn
from rmqcli.errors import NotFoundError, UsageError
from rmqcli.ops.index_source import BROKER_MAX, JAVA_LONG_MAX

if TYPE_CHECKING:
    from rmqcli.ops.dump import IndexLookup
    from rmqcli.store.read.commitlog import CommitLog
    from rmqcli.store.read.dledger import DLedgerCommitLog

PHY_OFFSET = number("phyOffset", "PhyOffset")
HEADER_COLUMNS = [
    FILE,
    Column("beginTimestamp", "Begin", show=human_time),
    Column("endTimestamp", "End", show=human_time),
    number("beginPhyOffset", "BeginPhyOffset"),
    number("endPhyOffset", "EndPhyOffset"),
    number("hashSlotCount", "Slots"),
    number("indexCount", "IndexCount"),
]
ENTRY_COLUMNS = [
    FILE,
    number("indexNo", "IndexNo"),
    number("keyHash", "KeyHash"),
    PHY_OFFSET,
    number("timeDiff", "TimeDiff"),
    number("prevIndex", "PrevIndex"),
]
HIT_COLUMNS = [
    PHY_OFFSET,
    Column("status", "Status"),
    TOPIC,
    QUEUE_ID,
    QUEUE_OFFSET,
    STORE_TIME,
    KEYS,
    UNIQ_KEY,
]

BeginOpt = stored_time_option("--begin", "entries", "after")
EndOpt = stored_time_option("--end", "entries", "before")


@config_output
def dump_index(
    path: Annotated[
        Path, typer.Argument(metavar="STORE_OR_FILE", help="A store directory or one index file.")
    ],
    topic: topic_option("Topic of the key to look up.") = None,
    key: key_option("Look this key (KEYS or UNIQ_KEY) up.") = None,
    begin: BeginOpt = None,
    end: EndOpt = None,
    max_num: Annotated[
        int,
        typer.Option(
            "--max",
            min=1,
            help="Show at most N entries of the lookup. A broker's queryMessage stops at 64 "
            "(maxMsgsNumBatch); rmq reads on, and says when there are more than N or than 64.",
        ),
    ] = BROKER_MAX,
    headers_only: switch_option("--headers-only", help="Show only the file headers.") = False,
    *,
    common: Common,
) -> None:
    """Dump index files: each file's header and all its entries, or, with --topic and --key, the
    physical offsets IndexService.queryOffset returns and the records found there (in a DLedger
    CommitLog store, each record's entry too: its index, term and pos, the offset less 48). Index entries
    compare only a hash, so the records are checked against the key: "count" is what the index
    returns, "matched" how many records really carry the key (the rest are hash collisions).
    The lookup walks the hash chains as the broker does, newest first, but past the broker's 64
    (up to --max); a key no record carries is "not found" (exit 3).
    """
    from rmqcli.ops.dump import index_entries, index_header_fields, index_lookup
    from rmqcli.ops.index_source import open_index_source, uncapped_index

    if (key is None) != (topic is None):
        raise UsageError("--key and --topic go together")
    lo = parse_time(begin, "--begin")
    hi = parse_time(end, "--end")
    lo = 0 if lo is None else lo
    hi = JAVA_LONG_MAX if hi is None else hi
    source = open_index_source(path, common.config)
    files = source.files
    sections = [
        Section("files", "file", rows=[index_header_fields(f) for f in files], columns=HEADER_COLUMNS)
    ]
    if key is None or topic is None:
        if not headers_only:
            rows = (e for f in files for e in index_entries(f, lo, hi))
            sections.append(Section("entries", "entry", rows=rows, columns=ENTRY_COLUMNS))
        common.renderer().sections(sections)
        return
    found = index_lookup(
        uncapped_index(files), topic, key, source.commitlog, begin=lo, end=hi, max_num=max_num + 1
    )
    more = found.count > max_num  # an entry past --max: the lookup was cut
    del found.phy_offsets[max_num:], found.hits[max_num:]
    sections.append(Section("query", "query", item=_query_item(found, max_num, more)))
    log = source.commitlog
    columns = HIT_COLUMNS + [number(name, title) for name, title in (log.extra_columns if log else ())]
    sections.append(Section("hits", "hit", rows=list(_hit_rows(found, log)), columns=columns))
    common.renderer().sections(sections)
    if more:
        warn(f"--max {max_num} reached: more index entries carry the hash of {found.index_key} (raise --max)")
    if found.count > BROKER_MAX:
        warn(
            f"a broker's queryMessage returns only the newest {BROKER_MAX} of these entries "
            "(maxMsgsNumBatch); the rest are read here from the hash chains"
        )
    if found.count == 0 or found.matched == 0:
        raise NotFoundError(f"{path}: {_not_found(found)}")


def _not_found(found: IndexLookup) -> str:
    what = f"key {found.key} of topic {found.topic} not found"
    if found.count == 0:
        return f"{what} in the index"
    statuses = Counter(h.status for h in found.hits)
    parts = [f"{n} {kind}" for kind, n in sorted(statuses.items())]
    return f"{what}: the {found.count} index entries with its hash are " + ", ".join(parts)


def _query_item(found: IndexLookup, max_num: int, more: bool) -> dict[str, Any]:
    return {
        "topic": found.topic,
        "key": found.key,
        "indexKey": found.index_key,
        "keyHash": found.key_hash,
        "slot": found.slot,
        "count": found.count,
        "matched": found.matched,
        "max": max_num,
        "more": more,
        "brokerCount": min(found.count, BROKER_MAX),
        "phyOffsets": found.phy_offsets,
    }


def _hit_rows(found: IndexLookup, log: CommitLog | DLedgerCommitLog | None) -> Iterator[dict[str, Any]]:
    """A row per hit; the log's own framing beside a record (DLedger: its entry's index, term, pos)."""
    for hit in found.hits:
        rec = hit.record
        row: dict[str, Any] = {"phyOffset": hit.phy_offset, "status": hit.status}
        if rec is not None:
            row.update(
                {
                    "topic": rec.topic,
                    "queueId": rec.queue_id,
                    "queueOffset": rec.queue_offset,
                    "storeTimestamp": rec.store_timestamp,
                    "keys": rec.keys,
                    "uniqKey": rec.uniq_key,
                    "offsetMsgId": rec.msg_id,
                }
            )
            if log is not None:
                row.update(log.record_extra(rec))
        if hit.reason:
            row["reason"] = hit.reason
        yield row
