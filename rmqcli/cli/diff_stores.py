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
    store holds. Run it on stopped brokers' stores before promoting a slave by hand. Two replicas
    of a DLedger group (enableDLegerCommitLog) are also compared entry by entry: the entries equal
    in index, term and bytes, the first entry where they differ (and in what: term, pos, size or
    bytes), and the entries only one holds, with their terms and how many are past that replica's
    committedIndex (an uncommitted suffix a new leader truncates). Two replicas of a RocketMQ 5
    controller-mode group are compared over their confirmed records (up to each checkpoint's
    confirmPhyOffset): what a store holds past it is reported as records only it holds, past its
    confirmPhyOffset (an unconfirmed tail a rejoining replica truncates), not as a divergence, and
    stores whose confirmed records agree are identical; with both stores' epoch files, it shows
    each side's epochs, the epoch of each side's bytes where they differ, and what each side would
    cut (offset, bytes, records) to rejoin the other as its slave. Exit status 0 when the stores
    agree wherever both hold data (one is a prefix of the other), 2 when one store is a DLedger
    store and the other not, 3 when a path is not a store, 4 when they diverge or hold no common
    range.
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
    records = [
        {"side": only["side"], **ref, **({"confirmed": False} if only["unconfirmed"] else {})}
        for only in data["only"]
        for ref in only["first"]
    ]
    ranges = [{k: v for k, v in only.items() if k != "first"} for only in data["only"]]
    summary = {k: v for k, v in data.items() if k not in ("only", "entries", "epochs")}
    renderer = common.renderer()
    if renderer.fmt is OutputFormat.table:
        for line in _describe(result):
            renderer.out.write(line + "\n")
        if result.epochs is not None:
            for line in describe_epochs(result.epochs):
                renderer.out.write(line + "\n")
        if result.entries is not None:
            for line in describe_entries(result.entries):
                renderer.out.write(line + "\n")
        if records:
            renderer.rows(records, RECORD_COLUMNS, title="First records only one store holds")
    else:
        sections = [
            Section("summary", "summary", item=summary),
            Section("ranges", "range", rows=ranges),
            Section("records", "record", rows=records, columns=RECORD_COLUMNS),
        ]
        if data.get("entries") is not None:
            sections.append(Section("entries", "entries", item=data["entries"]))
        if data.get("epochs") is not None:
            sections.append(Section("epochs", "epochs", item=data["epochs"]))
        renderer.sections(sections)
    sys.stdout.flush()
    if not result.consistent:
        raise CorruptDataError(f"{result.a.store} and {result.b.store}: {_verdict(result)}")


def _verdict(result) -> str:  # noqa: ANN001  (an ops.diff_stores.StoreDiff)
    where = f"{result.verdict} at physical offset {result.divergence.offset}" if result.divergence else ""
    entries = result.entries
    if entries is not None and not entries.consistent:
        m = entries.mismatch
        sides = (("A", entries.a), ("B", entries.b))
        stops = "; ".join(f"{n}'s entries stop at {s.stopped}" for n, s in sides if s.stopped)
        said = f"entries diverge at index {m.index} ({m.what})" if m else f"entries diverge: {stops}"
        return f"{where}; {said}" if where else said
    return where or result.verdict


def describe_epochs(view) -> list[str]:  # noqa: ANN001  (an ops.diff_stores.EpochView)
    """Each side's epochs, the epochs at the divergence, what each side cuts to rejoin the other."""
    lines = []
    for name, spans in (("A", view.a), ("B", view.b)):
        listed = ", ".join(f"{s.epoch} [{s.start_offset}, {s.end_offset})" for s in spans)
        lines.append(f"{name}: epochs {listed}")
    if view.divergence_epoch_a is not None or view.divergence_epoch_b is not None:
        lines.append(
            f"the differing bytes: A's epoch {view.divergence_epoch_a}, B's epoch {view.divergence_epoch_b}"
        )
    for r in view.rejoin:
        me, other = r.side.upper(), "B" if r.side == "a" else "A"
        if r.point < 0:
            lines.append(f"{me} rejoining {other} as its slave: no consistent point (its handshake fails)")
        elif r.cut_bytes:
            cut = f"{r.cut_bytes} bytes, {r.cut_records} records"
            lines.append(f"{me} rejoining {other} as its slave cuts at {r.point}: {cut}")
        else:
            lines.append(f"{me} rejoining {other} as its slave cuts nothing (consistent point {r.point})")
    return lines


def describe_entries(diff) -> list[str]:  # noqa: ANN001  (an ops.diff_entries.EntryDiff)
    """The entry-by-entry comparison of two DLedger replicas, in lines."""
    lines = []
    for name, side in (("A", diff.a), ("B", diff.b)):
        span = f"entries [{side.first_index}, {side.last_index}]" if side.entries else "no entries"
        terms = ", ".join(f"term {t}: {n}" for t, n in sorted(side.terms.items()))
        committed = "none" if side.committed_index is None else side.committed_index
        lines.append(f"{name}: DLedger {side.self_id}: {span} ({terms}); committedIndex {committed}")
        if side.stopped:
            lines.append(f"{name}: entries stop at {side.stopped}")
    lines.append(f"entries: {diff.verdict}: {diff.equal} equal in index, term and bytes")
    m = diff.mismatch
    if m is not None:
        at = f" at byte {m.byte} of the entry" if m.byte is not None else ""
        lines.append(
            f"first differing entry: index {m.index} ({m.what}{at}): A term {m.term_a} pos {m.pos_a}, "
            f"B term {m.term_b} pos {m.pos_b}"
        )
        for name, problem in (("A", m.record_a), ("B", m.record_b)):
            if problem:
                lines.append(f"{name}'s message record there: {problem}")
    for only in diff.only:
        terms = ", ".join(f"term {t}: {n}" for t, n in only.terms.items())
        lines.append(
            f"entries only on {only.side.upper()}: {only.entries} [{only.from_index}, {only.to_index}] "
            f"({terms}){_past(only.uncommitted, 'committedIndex', always=True)}"
        )
    return lines


def _past(count: int, bound: str, *, always: bool = False) -> str:
    """How many of a one-sided range lie past that store's own bound (a DLedger replica's
    committedIndex, a controller-mode store's confirmPhyOffset): not committed or confirmed."""
    return f", {count} past its {bound}" if count or always else ""


def _describe(result) -> list[str]:  # noqa: ANN001  (an ops.diff_stores.StoreDiff)
    lines = []
    for name, side in (("A", result.a), ("B", result.b)):
        lines.append(
            f"{name}: {side.store}: CommitLog [{side.min_offset}, {side.max_offset}) "
            f"in {side.files} files of {side.file_size} bytes"
        )
        if side.confirm_phy_offset is not None:
            end = side.unconfirmed_to
            tail = f"; records past it in [{side.max_offset}, {end})" if end is not None else ""
            lines.append(f"{name}: confirmPhyOffset {side.confirm_phy_offset}{tail}")
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
        past = _past(only.unconfirmed, "confirmPhyOffset")
        lines.append(f"only on {only.side.upper()}: {only.records} records in {span}{unreadable}{past}")
    return lines
