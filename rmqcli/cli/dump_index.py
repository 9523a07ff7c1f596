"""``rmq dump-index``: index file headers and entries, or a key lookup like ``queryMessage``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rmqcli.cli.common import ConfigOpt, JsonOpt, OutputOpt, open_store, parse_time
from rmqcli.cli.render import Column, OutputFormat, Renderer, Section, human_time, resolve_format
from rmqcli.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from rmqcli.ops.dump import IndexLookup
    from rmqcli.store.commitlog import CommitLog
    from rmqcli.store.index import IndexFile

JAVA_LONG_MAX = 2**63 - 1

HEADER_COLUMNS = [
    Column("file", "File"),
    Column("beginTimestamp", "Begin", show=human_time),
    Column("endTimestamp", "End", show=human_time),
    Column("beginPhyOffset", "BeginPhyOffset", justify="right"),
    Column("endPhyOffset", "EndPhyOffset", justify="right"),
    Column("hashSlotCount", "Slots", justify="right"),
    Column("indexCount", "IndexCount", justify="right"),
]
ENTRY_COLUMNS = [
    Column("file", "File"),
    Column("indexNo", "IndexNo", justify="right"),
    Column("keyHash", "KeyHash", justify="right"),
    Column("phyOffset", "PhyOffset", justify="right"),
    Column("timeDiff", "TimeDiff", justify="right"),
    Column("prevIndex", "PrevIndex", justify="right"),
]
HIT_COLUMNS = [
    Column("phyOffset", "PhyOffset", justify="right"),
    Column("status", "Status"),
    Column("topic", "Topic"),
    Column("queueId", "Queue", justify="right"),
    Column("queueOffset", "QueueOffset", justify="right"),
    Column("storeTimestamp", "StoreTime", show=human_time),
    Column("keys", "Keys"),
    Column("uniqKey", "UniqKey"),
]


def dump_index(
    path: Annotated[
        Path, typer.Argument(metavar="STORE_OR_FILE", help="A store directory or one index file.")
    ],
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Topic of the key to look up.")] = None,
    key: Annotated[
        str | None, typer.Option("--key", "-k", help="Look this key (KEYS or UNIQ_KEY) up.")
    ] = None,
    begin: Annotated[
        str | None,
        typer.Option("--begin", help="Only entries stored at or after TIME (epoch ms or ISO-8601)."),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option("--end", help="Only entries stored at or before TIME (epoch ms or ISO-8601)."),
    ] = None,
    max_num: Annotated[
        int, typer.Option("--max", min=1, help="Lookup result cap (the broker caps it at 64).")
    ] = 64,
    headers_only: Annotated[bool, typer.Option("--headers-only", help="Show only the file headers.")] = False,
    config: ConfigOpt = None,
    output: OutputOpt = OutputFormat.table,
    json_: JsonOpt = False,
) -> None:
    """Dump index files: each file's header and all its entries, or, with --topic and --key, the
    physical offsets IndexService.queryOffset returns and the records found there. Index entries
    compare only a hash, so the records are checked against the key: "count" is what the index
    returns, "matched" how many records really carry the key (the rest are hash collisions).
    """
    from rmqcli.ops.dump import index_entries, index_header_fields, index_lookup
    from rmqcli.store.index import IndexService, open_index_file

    if (key is None) != (topic is None):
        raise UsageError("--key and --topic go together")
    lo = parse_time(begin, "--begin")
    hi = parse_time(end, "--end")
    lo = 0 if lo is None else lo
    hi = JAVA_LONG_MAX if hi is None else hi
    if not path.exists():
        raise NotFoundError(f"{path}: no such store or file")
    commitlog: CommitLog | None = None
    if path.is_file():
        settings = _settings(config)
        f = open_index_file(path, *settings)
        files: list[IndexFile] = [f]
        index: IndexService | IndexFile = f
        root = path.parent.parent
        if (root / "commitlog").is_dir():
            commitlog = open_store(root, config).commitlog
    else:
        store = open_store(path, config)
        if not store.index_dir.is_dir():
            raise NotFoundError(f"{path}: no index directory")
        index = store.index
        files = index.files
        commitlog = store.commitlog
    sections = [
        Section("files", "file", rows=[index_header_fields(f) for f in files], columns=HEADER_COLUMNS)
    ]
    if key is not None and topic is not None:
        found = index_lookup(index, topic, key, commitlog, begin=lo, end=hi, max_num=max_num)
        sections.append(Section("query", "query", item=_query_item(found)))
        sections.append(Section("hits", "hit", rows=list(_hit_rows(found)), columns=HIT_COLUMNS))
    elif not headers_only:
        rows = (e for f in files for e in index_entries(f, lo, hi))
        sections.append(Section("entries", "entry", rows=rows, columns=ENTRY_COLUMNS))
    Renderer(resolve_format(output, json_)).sections(sections)


def _settings(config: Path | None) -> tuple[int | None, int | None]:
    if config is None:
        return None, None
    from rmqcli.store.settings import load_broker_conf

    s = load_broker_conf(config)
    if "max_hash_slot_num" in s.explicit or "max_index_num" in s.explicit:
        return s.max_hash_slot_num, s.max_index_num
    return None, None


def _query_item(found: IndexLookup) -> dict[str, Any]:
    return {
        "topic": found.topic,
        "key": found.key,
        "indexKey": found.index_key,
        "keyHash": found.key_hash,
        "slot": found.slot,
        "count": found.count,
        "matched": found.matched,
        "phyOffsets": found.phy_offsets,
    }


def _hit_rows(found: IndexLookup) -> Iterator[dict[str, Any]]:
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
        if hit.reason:
            row["reason"] = hit.reason
        yield row
