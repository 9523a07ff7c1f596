"""``rmq backups`` and ``rmq restore-backup``: the backups every store-changing command keeps."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rmqcli.cli.columns import BYTES, number
from rmqcli.cli.common import Common, StoreArg, check_store_dir, output_only
from rmqcli.cli.plan import DryRunOpt, ForceUnlockedOpt, PlanJsonOpt, YesOpt, confirm, print_plan
from rmqcli.cli.render import Column, OutputFormat, Renderer, resolve_format
from rmqcli.errors import NotFoundError

# re-exported: the commands that change a store import print_plan from here or from rmqcli.cli.plan
__all__ = ["backups", "print_plan", "restore_backup"]

BACKUP_COLUMNS = [
    Column("timestamp", "Timestamp"),
    Column("command", "Command"),
    Column("state", "State"),
    number("steps", "Steps"),
    BYTES,
    Column("argv", "Arguments", wrap=True),
]


def _store(path: Path) -> Path:
    """``path`` when it is a store: a ``commitlog/`` or ``dledger-<selfId>/`` directory, or ``rmq``'s
    backups at its root."""
    from rmqcli.store.store import has_store_layout, not_a_store

    check_store_dir(path)
    if not has_store_layout(path):
        raise NotFoundError(not_a_store(path))
    return path


@output_only
def backups(store: StoreArg, *, common: Common) -> None:
    """List the backups in STORE/.rmq-backup: one per change a command made, oldest first.

    State is complete (undo it with restore-backup), open (interrupted; the next change on the store
    rolls it back), rolled-back, restoring or restored.
    """
    from rmqcli.ops.safety import list_backups

    common.renderer().rows(list_backups(_store(store)), BACKUP_COLUMNS)


def restore_backup(
    store: StoreArg,
    timestamp: Annotated[
        str, typer.Argument(metavar="TIMESTAMP", help="The backup to restore (see `rmq backups`).")
    ],
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    force_unlocked: ForceUnlockedOpt = False,
    json_: PlanJsonOpt = False,
) -> None:
    """Undo one change: put back every byte, file and directory it backed up, in reverse order.

    Files and directories the change created are removed. The restore is itself a change, with a
    backup of its own: whatever it overwrites or removes -- including data written after the change
    (records appended after a cut, files created again) -- is backed up first, so nothing is lost and
    `rmq restore-backup STORE <the restore's timestamp>` undoes the restore. The plan's BytesRemoved
    column gives, per step, the bytes of the store as it is now that the restore replaces. Without
    --yes the plan is printed and nothing changes. Refuses while a broker holds the store's lock,
    and while a later change (other than a restore) that touched the same files is still in place
    (restore that one first).
    """
    from rmqcli.ops.safety import restore_backup as restore

    apply = confirm(dry_run, yes)
    renderer = Renderer(resolve_format(OutputFormat.table, json_))
    plan = restore(_store(store), timestamp, yes=apply, force=force_unlocked, argv=sys.argv[1:])
    print_plan(renderer, plan, applied=apply, backup=plan.backup)
