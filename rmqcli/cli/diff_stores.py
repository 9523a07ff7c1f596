"""``rmq diff-stores``: how two replicas' CommitLogs compare (``rmqcli.ops.diff_stores``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rmqcli.cli.columns import QUEUE_ID, QUEUE_OFFSET, SIZE, STORE_TIME, TOPIC, number
from rmqcli.cli.common import Common, config_output, open_store
from rmqcli.cli.render import Column, OutputFormat, Section, camel_dict
from rmqcli.errors import CorruptDataError

RECORD_COLUMNS = [
    Column("side", "Store"),
    number("offset", "Physical offset"),
    SIZE,
    TOPIC,
    QUEUE_ID,
    QUEUE_OFFSET,
    STORE_TIME,
]


@config_output
def diff_stores(
    store_a: Annotated[
        Path, typer.Argument(metavar="STORE_A", help="A store directory (e.g. the master's).")
    ],
    store_b: Annotated[Path, typer.Argument(metavar="STORE_B", help="Another (e.g. its slave's).")],
    limit: Annotated[
        int, typer.Option("--limit", min=0, help="List at most N records of each one-sided range.")
    ] = 10,
    *,
    common: Common,
) -> None:
    """Compare the CommitLogs of two replicas of one broker (a master's store and its slave's).

    Replicas hold the same bytes at the same physical offsets. Reports each store's offsets, the
    replication gap (bytes STORE_A holds past STORE_B; negative when STORE_B is ahead), the first
    byte that differs (physical offset, CommitLog file and position) and the records that only one
    store holds. Run it on stopped brokers' stores before promoting a slave by hand. Exit status 0
    when the stores agree wherever both hold data (one is a prefix of the other), 3 when a path is
    not a store, 4 when they diverge or hold no common range.
    """
    from rmqcli.ops.diff_stores import diff_stores as compare

    first = open_store(store_a, common.config)
    try:
        second = open_store(store_b, common.config)
        try:
            result = compare(first, second, limit)
        finally:
            second.close()
    finally:
        first.close()
    data = camel_dict(result)
    records = [{"side": only["side"], **ref} for only in data["only"] for ref in only["first"]]
    ranges = [{k: v for k, v in only.items() if k != "first"} for only in data["only"]]
    summary = {k: v for k, v in data.items() if k != "only"}
    renderer = common.renderer()
    if renderer.fmt is OutputFormat.table:
        for line in _describe(result):
            renderer.out.write(line + "\n")
        if records:
            renderer.rows(records, RECORD_COLUMNS, title="First records only one store holds")
    else:
        renderer.sections(
            [
                Section("summary", "summary", item=summary),
                Section("ranges", "range", rows=ranges),
                Section("records", "record", rows=records, columns=RECORD_COLUMNS),
            ]
        )
    sys.stdout.flush()
    if not result.consistent:
        where = ""
        if result.divergence is not None:
            where = f" at physical offset {result.divergence.offset}"
        raise CorruptDataError(f"{result.a.store} and {result.b.store}: {result.verdict}{where}")


def _describe(result) -> list[str]:  # noqa: ANN001  (an ops.diff_stores.StoreDiff)
    lines = []
    for name, side in (("A", result.a), ("B", result.b)):
        lines.append(
            f"{name}: {side.store}: CommitLog [{side.min_offset}, {side.max_offset}) "
            f"in {side.files} files of {side.file_size} bytes"
        )
    gap = result.gap
    ahead = "A" if gap > 0 else "B"
    equal = f"{result.compared_bytes} bytes equal over [{result.common_from}, {result.common_to})"
    if result.verdict == "identical":
        lines.append(f"identical: {equal}")
    elif result.verdict == "prefix":
        lines.append(f"prefix: {equal}" + (f"; {ahead} holds {abs(gap)} bytes more" if gap else ""))
    elif result.verdict == "diverged":
        d = result.divergence
        lines.append(
            f"diverged at physical offset {d.offset} ({d.file} position {d.position}: "
            f"A has 0x{d.byte_a:02x}, B has 0x{d.byte_b:02x}) after {result.compared_bytes} equal bytes"
        )
    else:
        lines.append("disjoint: the two CommitLogs hold no offsets in common")
    for only in result.only:
        unreadable = f", unreadable from {only.unreadable_from}" if only.unreadable_from is not None else ""
        span = f"[{only.from_offset}, {only.to_offset})"
        lines.append(f"only on {only.side.upper()}: {only.records} records in {span}{unreadable}")
    return lines
