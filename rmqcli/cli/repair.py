"""``rmq recover``, ``rmq truncate``, ``rmq rebuild``: the store-changing repair commands.

Each one plans in a staging directory inside the store, prints the plan, and applies it only
with ``--yes`` (backed up, journalled, fsynced: ``rmqcli.ops.safety``).

Design note: this plan/print/apply skeleton is the model a new store-changing command copies. The
command is a function of its own options that checks them and returns a ``Repair`` (how to stage
the plan, apply it and drop what was staged); ``repair_command`` gives it ``--config``,
``--dry-run``, ``--yes``, ``--force-unlocked`` and ``--json``, and ``_run`` does the rest the same
way for every command: refuse a held lock, roll back an interrupted run, stage, print the plan,
apply only with ``--yes`` and always remove the staging area.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rmqcli.cli.common import (
    ConfigOpt,
    RebuildCqOpt,
    RebuildIndexOpt,
    RebuildTopicOpt,
    StoreArg,
    open_store,
    parse_time,
    rebuild_targets,
    record_offset_option,
    switch_option,
    value_option,
)
from rmqcli.cli.plan import DryRunOpt, ForceUnlockedOpt, PlanJsonOpt, YesOpt, confirm, print_plan
from rmqcli.cli.render import OutputFormat, Renderer, resolve_format
from rmqcli.errors import UsageError

if TYPE_CHECKING:
    from rmqcli.store import Store


@dataclass(frozen=True)
class Repair:
    """What a repair command plans with: ``stage(store)`` stages the plan (its result has
    ``.plan``) in ``STORE/.rmq-staging/<staging>``, ``commit(root, result, argv, force_unlocked=)``
    applies it and returns the backup, ``discard(result)`` drops what was staged. ``dledger``: the
    repair to run instead on a DLedger CommitLog store (``formats.dledger``); without it such a
    store is refused."""

    stage: Callable[[Any], Any]
    commit: Callable[..., Path]
    discard: Callable[[Any], None]
    staging: str
    dledger: Repair | None = None


def _run(
    store_path: Path, config: Path | None, apply: bool, force_unlocked: bool, json_: bool, repair: Repair
) -> None:
    """Plan (staged), print, and apply with ``--yes``; the staging area is removed either way.

    ``repair.staging`` names the directory under ``STORE/.rmq-staging`` the stage function fills:
    it is removed even when staging or applying fails, and ``.rmq-staging`` with it when left
    empty. The ``Change`` that applies the plan takes the broker's lock again (planning may take
    long), so a broker started meanwhile makes it refuse (``StoreBusyError``) before it touches
    anything.
    """
    from rmqcli.ops.safety import ensure_unlocked, finish_interrupted, remove_staging

    renderer = Renderer(resolve_format(OutputFormat.table, json_))
    store = open_store(store_path, config)
    result = None
    try:
        if store.dledger is not None and repair.dledger is not None:
            repair = repair.dledger
        else:
            refuse_dledger(store, repair.staging)
        if apply:
            ensure_unlocked(store.root, force=force_unlocked)
            # an earlier run killed half-way is rolled back first
            finish_interrupted(store.root, force_unlocked=force_unlocked)
        result = repair.stage(store)
        store.close()
        if not apply or result.plan.empty:
            print_plan(renderer, result.plan)
            return
        backup = repair.commit(store.root, result, sys.argv[1:], force_unlocked=force_unlocked)
        print_plan(renderer, result.plan, applied=True, backup=backup)
    finally:
        store.close()
        if result is not None:
            repair.discard(result)
        remove_staging(store.root, repair.staging)


def refuse_dledger(store: Store, staging: str) -> None:
    """A change to a DLedger CommitLog store (``formats.dledger``) by a command that plans none for
    it (no ``Repair.dledger``): refused before anything is read or locked (consumer offsets may
    change: they do not depend on the log's layout)."""
    from rmqcli.ops.offsets import STAGING_NAME as OFFSETS

    if store.dledger is not None and staging != OFFSETS:
        raise UsageError(
            f"{store.root}: a DLedger CommitLog store ({store.dledger.home.name}/): rmq reads it "
            "(stats, dump-*, verify) but does not change it yet"
        )


def _plan_options(
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    force_unlocked: ForceUnlockedOpt = False,
    json_: PlanJsonOpt = False,
) -> None:
    """Never called: its parameters are the options ``repair_command`` gives every repair command."""


def repair_command(plan: Callable[..., Repair], *, store_in_context: bool = False) -> Callable[..., None]:
    """The typer command of ``plan(store, **its options) -> Repair``: its options, then those of
    ``_plan_options``; the plan's own checks run first, then ``--dry-run``/``--yes``, then ``_run``.
    With ``store_in_context`` the store is not an argument of the command but the ``ctx.obj`` its
    group's callback set (``rmq offsets STORE reset ...``)."""
    own = list(inspect.signature(plan, eval_str=True).parameters.values())
    wants_config = any(p.name == "config" for p in own)  # the plan reads broker.conf's other keys too
    own = [p for p in own if p.name != "config"]
    if store_in_context:
        own[0] = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    common = list(inspect.signature(_plan_options, eval_str=True).parameters.values())

    @functools.wraps(plan, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
    def command(
        *,
        config: Path | None,
        dry_run: bool,
        yes: bool,
        force_unlocked: bool,
        json_: bool,
        **options: Any,
    ) -> None:
        store = options.pop("ctx").obj if store_in_context else options.pop("store")
        repair = plan(store, **options, **({"config": config} if wants_config else {}))
        _run(store, config, confirm(dry_run, yes), force_unlocked, json_, repair)

    command.__signature__ = inspect.Signature([*own, *common])  # type: ignore[attr-defined]
    del command.__wrapped__  # type hints resolve in this module, whatever module the plan is in
    return command


@repair_command
def recover(
    store: StoreArg,
    normal: switch_option("--normal", help="Recover as after a clean shutdown.") = False,
    abnormal: switch_option(
        "--abnormal", help="Recover as after a crash (the default when `abort` exists)."
    ) = False,
    check_crc: value_option(
        bool, "--check-crc/--no-check-crc", help="Check body CRCs (default: checkCRCOnRecover, true)."
    ) = None,
    salvage: switch_option(
        "--salvage",
        help="Unlike the broker: check every CommitLog file, replace each invalid record by "
        "tombstone records of the same length and keep the valid records after it.",
    ) = False,
) -> Repair:
    """Do offline what a broker does to its store at start-up, and leave the same store.

    Abnormal recovery (the default when the `abort` file exists) walks the CommitLog from the file
    the checkpoint's timestamps choose, stops at the first invalid record (bad magic, size or CRC),
    cuts the CommitLog there and deletes later files, re-dispatches what it walked to the consume
    queues and index, removes units past the end, re-indexes after deleting index files newer
    than the checkpoint, updates the checkpoint and removes `abort`. Normal recovery walks from
    the third-last file and dispatches only what the queues lack.

    Like the broker, recovery discards everything after the first invalid record; every removed
    byte is backed up under STORE/.rmq-backup/ (see `rmq backups`, `rmq restore-backup`). Unlike
    the broker, rmq zeroes the stale bytes after the new end of a file, and replaces an index file
    of the wrong size (which a broker extends with zeros, losing its entries) by re-indexing from
    where the index files before it end. Without --yes nothing changes. Sizes not given with
    --config are read off the store's files; a default assumed for want of files is noted.

    --salvage is a divergence from the broker: every CommitLog file is checked, including those
    before the file where recovery starts (a broker serves their records as they are, a bad body
    included), and an invalid record that valid records follow is overwritten by tombstones, valid
    records of exactly its length, and the walk goes on. A
    tombstone keeps the topic, queue id and queue offset of the record it replaces (read from its
    header, or from the consume-queue units that pointed at it), the properties that still decode
    except TAGS, and adds RMQ_SALVAGED=<reason>; its body is spaces. It takes the record's place
    in its queue: consumers subscribed by tag skip it, `*` subscribers receive it. Bytes whose
    records are unknown become one ROLLBACK-type record in topic RMQ_SALVAGED_GAP, which no queue
    or index holds; garbage up to the end of a file that later files follow becomes a BLANK
    record. The replaced bytes are backed up.

    On a DLedger CommitLog store (dledger-<selfId>/), --normal and --abnormal do the same, as the
    broker's DLedgerCommitLog does: entry headers are walked from the third-last data file (magic,
    size, pos, index + 1, term), data and entry index are cut where the walk stops, index units
    that disagree with the data are written again, the checkpoint's endIndex follows and
    committedIndex is capped at it; consume-queue units past the end go and the committed entries
    the queues lack are dispatched. Like the broker, a sound entry whose message is torn is kept.
    """
    from rmqcli.errors import UsageError
    from rmqcli.ops import recover as ops

    if normal and abnormal:
        raise UsageError("--normal and --abnormal exclude each other")
    mode = "normal" if normal else "abnormal" if abnormal else None
    return Repair(
        lambda s: ops.stage_recover(s, mode=mode, check_crc=check_crc, salvage=salvage),
        ops.apply_recover,
        ops.discard,
        ops.STAGING_NAME,
        dledger=_dledger_recover(salvage),
    )


def _dledger_recover(salvage: bool) -> Repair:
    """``recover`` on a DLedger CommitLog store (``rmqcli.ops.recover_dledger``)."""
    from rmqcli.ops import recover_dledger as dl

    def stage(store: Store) -> dl.DLedgerRecoverResult:
        if salvage:
            raise UsageError("--salvage: not for a DLedger CommitLog store (entries are cut, not replaced)")
        return dl.stage(store)

    return Repair(stage, dl.apply, dl.discard, dl.STAGING_NAME)


CutOffsetOpt = record_offset_option("--offset", "Cut")


@repair_command
def truncate(
    store: StoreArg,
    offset: CutOffsetOpt = None,
    time: value_option(
        str, "--time", help="Cut at the first record stored after TIME (epoch ms or ISO-8601)."
    ) = None,
    clamp_offsets: switch_option(
        "--clamp-offsets",
        help="Set committed consumer and delay offsets that lie past a queue's new end to that end.",
    ) = False,
) -> Repair:
    """Cut the CommitLog at a record boundary; consume queues, index and checkpoint follow.

    Later CommitLog files are deleted and the rest of the cut file is zeroed; units at or past the
    cut are removed from the consume queues; index files reaching the cut are rebuilt from the
    records before it. Every removed byte is backed up. Without --yes nothing changes.

    The plan lists the committed offsets (config/consumerOffset.json, config/delayOffset.json)
    that lie past a queue's new end: a group would skip the messages later sent to that queue up
    to its offset. --clamp-offsets sets each to its queue's end (the files are backed up). A store
    already cut there (no record at or after --offset, none stored after --time) needs nothing:
    the command says so and exits 0, so it can be re-run until it succeeds.

    On a DLedger CommitLog store the log is cut before the entry of that record: data files, entry
    index and the checkpoint's committedIndex/endIndex follow.
    """
    from rmqcli.ops import rebuild
    from rmqcli.ops import truncate as ops

    when = parse_time(time, "--time")
    repair = Repair(
        lambda s: ops.stage_truncate(s, offset=offset, time_ms=when, clamp_offsets=clamp_offsets),
        ops.apply_truncate,
        lambda r: rebuild.discard(r.staged),
        rebuild.STAGING_NAME,
    )
    return replace(repair, dledger=repair)  # a DLedger log is cut before an entry (ops.dledger_cut)


@repair_command
def rebuild(
    store: StoreArg,
    cq: RebuildCqOpt = False,
    index: RebuildIndexOpt = False,
    topic: RebuildTopicOpt = None,
    from_offset: value_option(
        int, "--from", help="Keep what lies before this physical offset; dispatch from there."
    ) = None,
) -> Repair:
    """Regenerate consume queues and/or index files from the CommitLog, as the broker's dispatch.

    With neither --cq nor --index both are rebuilt (with --topic: that topic's consume queues).
    Consume-queue files come out byte for byte as a broker writes them. Index files hold the
    broker's entries; they are named after the store time of the first record each indexes (a
    broker uses the time it creates the file). The old files are backed up. Without --yes
    nothing changes. On a DLedger CommitLog store each entry's message is dispatched (a unit holds
    the entry's pos + 48, as the broker writes it).
    """
    from rmqcli.ops import rebuild as ops

    queues, indexes = rebuild_targets(cq, index, topic)
    repair = Repair(
        lambda s: ops.stage_rebuild(
            s, consume_queues=queues, index=indexes, topic=topic, from_offset=from_offset
        ),
        ops.apply_rebuild,
        ops.discard,
        ops.STAGING_NAME,
    )
    return replace(repair, dledger=repair)  # the dispatch reads a DLedger log's entries as records


@repair_command
def clean(
    store: StoreArg,
    reserved_hours: value_option(
        int,
        "--reserved-hours",
        help="fileReservedTime: files last modified longer ago expire (default: broker.conf's, else 72).",
    ) = None,
    at: value_option(
        str, "--at", help="The moment of the round: epoch ms or ISO-8601, local time (default: now)."
    ) = None,
    disk_ratio: value_option(
        float,
        "--disk-ratio",
        help="The disk's used share to judge by, 0 to 1 like commitLogDiskRatio (default: measured).",
    ) = None,
    manual: switch_option(
        "--manual", help="As after deleteExpiredCommitLog: expired files go whatever the hour."
    ) = False,
    no_backup: switch_option(
        "--no-backup",
        help="Delete the files for good instead of moving them into the backup (which frees no space).",
    ) = False,
    config: Path | None = None,
) -> Repair:
    """Plan (and with --yes apply) what a broker's clean-up round would delete: expired CommitLog files.

    The rules are a 4.9.8 broker's, with broker.conf's fileReservedTime, deleteWhen,
    diskMaxUsedSpaceRatio, diskSpaceCleanForciblyRatio, cleanFileForciblyEnable, deleteFileBatchMax:
    at a deleteWhen hour, or with the disk above diskMaxUsedSpaceRatio, the oldest CommitLog files
    (never the last) last modified fileReservedTime hours ago or more go, at most deleteFileBatchMax;
    above diskSpaceCleanForciblyRatio they go whatever their age. Consume-queue and index files wholly
    below the new CommitLog minimum follow. The plan names the messages' time range and every consumer
    group whose committed offset lies below a queue's new minimum, with the unread messages it loses.

    Applied, the files are moved into the backup, which frees no space on the store's disk;
    --no-backup deletes them for good. A re-run plans the next round.

    On a DLedger CommitLog store the data files go by DLedger's rules: kept fileReservedTime + 1
    hours, at a deleteWhen hour (or --manual) or with a disk above diskMaxUsedSpaceRatio, all but
    the last when cleanFileForciblyEnable and a disk above 85%, at most 10 a round; the entry-index
    files below the first entry left follow.
    """
    from rmqcli.errors import UsageError
    from rmqcli.ops import clean as ops
    from rmqcli.store.retention import RetentionConfig, retention_from_properties
    from rmqcli.store.settings import read_properties

    retention = (
        retention_from_properties(read_properties(config)) if config is not None else RetentionConfig()
    )
    if reserved_hours is not None:
        if reserved_hours < 0:
            raise UsageError(f"--reserved-hours: must be 0 or more, not {reserved_hours}")
        retention = replace(retention, file_reserved_time=reserved_hours)
    if disk_ratio is not None and not 0 <= disk_ratio <= 1:
        raise UsageError(f"--disk-ratio: a share from 0 to 1, not {disk_ratio}")
    when = parse_time(at, "--at")
    repair = Repair(
        lambda s: ops.stage_clean(
            s, retention, at_ms=when, disk_ratio=disk_ratio, manual=manual, no_backup=no_backup
        ),
        ops.apply_clean,
        ops.discard,
        ops.STAGING_NAME,
    )
    return replace(repair, dledger=repair)  # DLedger's data files by its rules (ops.clean_dledger)
