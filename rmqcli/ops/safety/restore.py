"""Restores: ``restore_backup`` undoes one change, as a change of its own that backs up whatever it
replaces; its plan says, per step, what of the current store it would replace."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from rmqcli.errors import CorruptDataError, NotFoundError, UsageError
from rmqcli.ops.safety.backups import backup_root, finish_interrupted, manifests_of, restore_states, state_of
from rmqcli.ops.safety.change import Change
from rmqcli.ops.safety.journal import (
    COMPLETE,
    MANIFEST,
    STAGING_DIR,
    UNDOABLE,
    UNFINISHED,
    data_end,
    listing_sha,
    read_journal,
    read_json,
    tree_listing,
)
from rmqcli.ops.safety.locks import ensure_unlocked
from rmqcli.ops.safety.plan import Plan, PlanStep
from rmqcli.ops.safety.staging import remove_staging, staging_dir

RESTORE_STAGING = "restore-"  # the staging directories of the directories a restore puts back


def _rollback_plan_step(step: dict[str, Any]) -> PlanStep:
    """What rolling back one step of an interrupted change does (in place)."""
    action, rel = step["action"], step["path"]
    size = step.get("stored", 0) + step.get("zeros", 0)
    if action == "truncate":
        return PlanStep(
            "restore", rel, f"put back {size} bytes at offset {step['offset']} (length {step['orig_size']})"
        )
    if action == "write":
        return PlanStep("restore", rel, f"put back {size} bytes at offset {step['offset']}")
    if action == "delete":
        return PlanStep("create", rel, f"put back the deleted file ({size} bytes)")
    if action == "replace" and step.get("existed"):
        return PlanStep("replace", rel, f"put back the previous version ({size} bytes)", step["new_size"])
    if action == "replace":
        return PlanStep("delete", rel, "remove the file the change created", step["new_size"])
    if action == "replace-dir" and step.get("existed"):
        return PlanStep("replace-dir", rel, f"put back the previous directory ({len(step['files'])} entries)")
    if action == "replace-dir":
        return PlanStep("delete-dir", rel, "remove the directory the change created")
    if action == "discard":
        return PlanStep("delete", rel, "deleted without a backup (--no-backup): stays deleted")
    return PlanStep("create", rel, f"put back the deleted directory ({len(step['files'])} entries)")


def _puts_file_back(step: dict[str, Any]) -> bool:
    return step["action"] in ("delete", "replace", "create") and step.get("existed", True)


def _tree_bytes(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += (Path(dirpath) / name).lstat().st_size
            except OSError:
                pass
    return total


def _data_in_range(path: Path, start: int, end: int) -> int:
    """Bytes of ``path`` in [start, end) up to the last non-zero one (what a restore would back up)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = min(end, os.fstat(fd).st_size)
        return data_end(fd, start, end) - start if start < end else 0
    finally:
        os.close(fd)


def _restore_plan_step(root: Path, step: dict[str, Any]) -> tuple[PlanStep, int]:
    """One step of a restore, from the store as it is now: (the plan step, bytes written after the change).

    ``bytes_removed`` counts the bytes of the current store the restore replaces or removes.
    """
    action, rel = step["action"], step["path"]
    path = root / rel
    size = step.get("stored", 0) + step.get("zeros", 0)
    if action in ("truncate", "write"):
        if not path.is_file():
            return PlanStep("restore", rel, "missing now: the backed-up bytes cannot be put back"), 0
        cur = path.stat().st_size
        offset, old_size = step["offset"], step["orig_size"]
        old_end = offset + size
        end = cur if cur > old_size else min(cur, old_end)
        replaced = _data_in_range(path, min(offset, cur), end)
        # a truncate left zeros (keep_size) or the end of the file: any data there came later
        later = replaced if action == "truncate" else max(0, cur - old_size)
        detail = f"put back {size} bytes at offset {offset} (length {old_size})"
        if later:
            detail += f"; replaces {later} bytes written after the change (backed up first)"
        return PlanStep("restore", rel, detail, replaced), later
    if _puts_file_back(step):
        detail = f"put back the {'deleted file' if action == 'delete' else 'previous version'} ({size} bytes)"
        if path.is_file():
            now = path.stat().st_size
            later = now if action == "delete" else 0
            detail += f"; replaces the {now}-byte file there now (backed up first)"
            return PlanStep("replace", rel, detail, now), later
        return PlanStep("create", rel, detail), 0
    if action in ("replace", "create"):
        if not path.is_file():
            return PlanStep("delete", rel, "the file the change created is gone already"), 0
        now = path.stat().st_size
        return PlanStep(
            "delete", rel, f"remove the file the change created ({now} bytes now; backed up)", now
        ), 0
    entries = len(step["files"])
    if action == "delete-dir" or step.get("existed"):
        what = "deleted directory" if action == "delete-dir" else "previous directory"
        detail = f"put back the {what} ({entries} entries)"
        if path.is_dir():
            now = _tree_bytes(path)
            detail += f"; replaces the directory there now ({now} bytes, backed up first)"
            return PlanStep("replace-dir", rel, detail, now), now if action == "delete-dir" else 0
        return PlanStep("create", rel, detail), 0
    if not path.is_dir():
        return PlanStep("delete-dir", rel, "the directory the change created is gone already"), 0
    now = _tree_bytes(path)
    return PlanStep(
        "delete-dir", rel, f"remove the directory the change created ({now} bytes; backed up)", now
    ), 0


def _undo_through(change: Change, bdir: Path, step: dict[str, Any]) -> None:
    """Undo one step of the change in ``bdir`` as a step of ``change`` (which backs up what it replaces)."""
    action, rel = step["action"], step["path"]
    path = change.root / rel
    piece = bdir / step["piece"] if step.get("piece") else bdir / "-"
    if action in ("truncate", "write"):
        change.restore_range(rel, piece, step)
    elif _puts_file_back(step):
        change.restore_file(rel, piece, step)
    elif action in ("replace", "create"):
        if path.is_file():
            change.delete_file(rel)
        for made in reversed(step.get("made_dirs", [])):
            made_path = change.root / made
            if made_path.is_dir() and not any(made_path.iterdir()):
                change.delete_dir(made)
    elif action == "delete-dir" or step.get("existed"):
        if not piece.is_dir():
            raise CorruptDataError("backed-up directory is missing", str(piece))
        staged = staging_dir(change.root, f"{RESTORE_STAGING}{change._n:05d}")
        shutil.copytree(piece, staged, symlinks=True, dirs_exist_ok=True)
        if listing_sha(tree_listing(staged)) != step["sha256"]:
            raise CorruptDataError(
                "backed-up directory does not match its listing in the journal", str(piece)
            )
        change.replace_dir(rel, staged)
    elif path.is_dir():
        change.delete_dir(rel)


def restore_backup(
    store_root: Path, timestamp: str, *, yes: bool, force: bool = False, argv: list[str] | None = None
) -> Plan:
    """Undo one change: every backed-up byte, file and directory goes back, in reverse order.

    The restore is a change of its own (see the module docstring): whatever it overwrites or
    removes is backed up first, so it can be undone in turn. Returns the plan (with ``backup`` set
    once applied); changes nothing unless ``yes``. Refuses while a broker holds the store (unless
    ``force``), and while a later change (not a restore) that is still in place touched the same paths.
    """
    root = Path(store_root).absolute()
    if not root.is_dir():
        raise NotFoundError(f"{root}: no such store directory")
    bdir = backup_root(root) / timestamp
    if not (bdir / MANIFEST).is_file():
        raise NotFoundError(f"{root}: no backup {timestamp!r} (see `rmq backups {root}`)")
    plan = _restore_plan(root, bdir)
    if not yes:
        return plan
    ensure_unlocked(root, force=force)
    if read_json(bdir / MANIFEST).get("state") in UNFINISHED:
        finish_interrupted(root, force_unlocked=force)  # an interrupted change: rolled back in place
        return plan
    finish_interrupted(root, force_unlocked=force)
    plan = _restore_plan(root, bdir)  # again: a rollback just now may have changed the store
    manifest = read_json(bdir / MANIFEST)
    roots = [Path(r) for r in manifest.get("roots", [])]
    try:
        with Change(
            root, "restore-backup", argv, roots=roots, force_unlocked=force, restores=timestamp
        ) as change:
            for step in reversed(read_journal(bdir)):
                _undo_through(change, bdir, step)
            plan.backup = change.commit()
    finally:
        for leftover in (root / STAGING_DIR).glob(RESTORE_STAGING + "*"):
            remove_staging(root, leftover.name)
    return plan


def _restore_plan(root: Path, bdir: Path) -> Plan:
    """The plan of ``restore_backup`` (raises when the backup cannot be restored now)."""
    timestamp = bdir.name
    manifests = manifests_of(root)
    want = restore_states(manifests)
    manifest = manifests[timestamp]
    state = state_of(manifests, timestamp, want)
    if state not in UNDOABLE:
        raise UsageError(f"backup {timestamp} is already {state}; nothing to restore")
    steps = read_journal(bdir)
    if any(s["action"] == "discard" for s in steps):
        raise UsageError(
            f"backup {timestamp} deleted files without a backup (--no-backup); they cannot be put back"
        )
    paths = {s["path"] for s in steps}
    for later, m in manifests.items():
        # restores only return paths to an earlier state; interrupted changes are rolled back first
        if later <= timestamp or m.get("restores") or state_of(manifests, later, want) != COMPLETE:
            continue
        if any(_overlaps(s["path"], p) for s in read_journal(backup_root(root) / later) for p in paths):
            raise UsageError(f"change {later} came later and touched the same files; restore it first")
    plan = Plan(f"restore-backup {timestamp}", root, roots=[Path(r) for r in manifest.get("roots", [])])
    plan.notes.append(f"undoes `{manifest.get('command', '?')}` of {timestamp}")
    if state != COMPLETE:
        plan.notes.append(f"this change was interrupted ({state}); restoring it rolls it back in place")
        plan.steps = [_rollback_plan_step(s) for s in reversed(steps)]
        return plan
    later = 0
    for step in reversed(steps):
        plan_step, written = _restore_plan_step(root, step)
        plan.steps.append(plan_step)
        later += written
    if later:
        plan.notes.append(f"{later} bytes were written to these paths after the change; they are backed up")
    plan.notes.append(
        "the restore is a change of its own: every byte it replaces or removes is backed up first, "
        "and `rmq restore-backup` of its timestamp undoes it"
    )
    return plan


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")
