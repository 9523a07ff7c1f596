"""``rmq verify``: read a whole store and report every problem with its file and byte offset."""

from __future__ import annotations

import sys
from typing import Any

from rmqcli.cli.columns import FILE, KIND, OFFSET, number
from rmqcli.cli.common import (
    Common,
    StoreArg,
    config_output,
    open_store,
    switch_option,
    topic_option,
    value_option,
)
from rmqcli.cli.render import Column, OutputFormat, Section, camel_dict, progress
from rmqcli.errors import CorruptDataError

SEVERITY = Column("severity", "Severity")
KIND_COLUMNS = [SEVERITY, KIND, number("count", "Count")]
PROBLEM_COLUMNS = [SEVERITY, KIND, FILE, OFFSET, Column("message", "Message", wrap=True)]
SUMMARY_FIELDS = (
    "store",
    "records",
    "bytes",
    "crcChecked",
    "commitlogFiles",
    "queues",
    "units",
    "indexFiles",
    "indexEntries",
    "errors",
    "warnings",
    "omitted",
)


@config_output
def verify(
    path: StoreArg,
    crc: switch_option("--crc/--no-crc", help="Recompute every body CRC (as recovery does).") = True,
    topic: topic_option("Check only this topic's queues and index keys.") = None,
    max_problems: value_option(
        int, "--max-problems", min=0, help="List at most N problems (all are still counted)."
    ) = None,
    *,
    common: Common,
) -> None:
    """Verify a store offline: every CommitLog record (magic, lengths, body CRC, PHYSICALOFFSET,
    file ends), every consume-queue unit against its record and every dispatchable record against
    its queue, every index entry and hash chain and every key the broker would index, the
    checkpoint, abort and lock files, the config JSON files, and changes of rmq left unfinished.

    Problems are grouped by kind and name their file (relative to the store) and byte offset.
    Errors are what the broker would reject, lose or never find; warnings are states it handles by
    itself (an unclean shutdown, records not dispatched yet, stale bytes, a deleted topic's
    records). Without --config the file sizes are those of the store's own files (a warning names
    any size assumed) and the delay levels RocketMQ's defaults. Exit status 0 when there is no
    error, 3 when STORE is not a store (no commitlog/ nor dledger-*/), 4 when there is an error.

    A RocketMQ 5 controller-mode store (it has epochFileCheckpoint or brokerIdentity, or --config
    says enableControllerMode=true) is read as 5.1.1's recovery reads it: the records past the
    checkpoint's confirmPhyOffset are not in the log (counted apart, a warning, and so are
    consume-queue units pointing at them); stale ones there (older than the confirmed records or
    repeating their queue offsets: what a replica's truncation after a master change leaves) and
    units pointing at them are errors, as is a confirmPhyOffset past the end. epochFileCheckpoint
    (+ .bak: count, CRC, increasing epochs, start offsets within the log) and brokerIdentity are
    checked too. A RocketMQ 5.1.1 store's timer files (timerwheel, timerlog/, config/timercheck,
    config/timermetrics) are checked as 5.1.1 reads them at start (timerPrecisionMs from --config).
    """
    from rmqcli.ops.verify import verify_store

    store = open_store(path, common.config)
    files = store.commitlog.files
    base = files[0].from_offset if files else 0
    total = files[-1].from_offset + files[-1].size - base if files else 0
    try:
        with progress(total, "verifying") as update:
            report = verify_store(
                store,
                crc=crc,
                topic=topic,
                progress=lambda pos: update(pos - base),
                max_problems=max_problems,
            )
    finally:
        store.close()
    data = camel_dict(report)
    renderer = common.renderer()
    if renderer.fmt is OutputFormat.table:
        if report.problems or report.kinds:
            renderer.sections(
                [
                    Section(
                        "kinds", "kind", rows=data["kinds"], columns=KIND_COLUMNS, title="Problems by kind"
                    ),
                    Section(
                        "problems",
                        "problem",
                        rows=data["problems"],
                        columns=PROBLEM_COLUMNS,
                        title="Problems",
                    ),
                ]
            )
        renderer.out.write(_summary_line(report) + "\n")
    else:
        renderer.sections(verify_sections(report))
    sys.stdout.flush()
    if report.errors:
        raise CorruptDataError(f"{report.errors} error(s) and {report.warnings} warning(s) in {report.store}")


def verify_sections(report: Any) -> list[Section]:
    """``rmq verify --json``'s sections (summary, kinds, problems; ``rmq dashboard`` shows them)."""
    data = camel_dict(report)
    summary = {k: data[k] for k in SUMMARY_FIELDS}
    if report.unconfirmed is not None:  # a controller-mode store
        summary["unconfirmed"] = report.unconfirmed
    return [
        Section("summary", "summary", item=summary),
        Section("kinds", "kind", rows=data["kinds"], columns=KIND_COLUMNS),
        Section("problems", "problem", rows=data["problems"], columns=PROBLEM_COLUMNS),
    ]


def _summary_line(report) -> str:
    state = "OK" if report.clean else "CORRUPT"
    extra = f", {report.omitted} not listed" if report.omitted else ""
    past = f" (and {report.unconfirmed} past confirmPhyOffset)" if report.unconfirmed else ""
    return (
        f"{state}: {report.store}: {report.records} records{past} "
        f"({report.bytes} bytes, {report.crc_checked} CRCs) "
        f"in {report.commitlog_files} CommitLog files, {report.units} units in {report.queues} queues, "
        f"{report.index_entries} entries in {report.index_files} index files; "
        f"{report.errors} errors, {report.warnings} warnings{extra}"
    )
