"""The records of changes in ``STORE/.rmq-backup/<timestamp>/``: their names, states and listing,
and finishing the changes and restores an earlier run left interrupted."""

from __future__ import annotations

import calendar
import time
from pathlib import Path
from typing import Any

from rmqcli.errors import NotFoundError
from rmqcli.ops.safety.journal import (
    BACKUP_DIR,
    COMPLETE,
    MANIFEST,
    OPEN,
    RESTORED,
    RESTORING,
    ROLLED_BACK,
    ROLLING_BACK,
    UNFINISHED,
    ChangeError,
    crashpoint,
    fsync_dir,
    read_journal,
    read_json,
    undo_all,
    write_json_atomic,
)
from rmqcli.ops.safety.locks import StoreLocks


def backup_root(store_root: Path) -> Path:
    return Path(store_root) / BACKUP_DIR


def format_timestamp(millis: int) -> str:
    seconds, ms = divmod(millis, 1000)
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds)) + f".{ms:03d}Z"


def parse_timestamp(name: str) -> int | None:
    try:
        head, ms = name.removesuffix("Z").split(".")
        return calendar.timegm(time.strptime(head, "%Y%m%dT%H%M%S")) * 1000 + int(ms)
    except ValueError:
        return None


def backup_dirs(store_root: Path) -> list[Path]:
    root = backup_root(store_root)
    if not root.is_dir():
        return []
    return sorted(
        p for p in root.iterdir() if p.is_dir() and (p / MANIFEST).is_file() and parse_timestamp(p.name)
    )


def create_backup_dir(store_root: Path) -> Path:
    """A new ``.rmq-backup/<timestamp>/``, its name later than every one there (fsynced)."""
    broot = backup_root(store_root)
    existing = [parse_timestamp(p.name) or 0 for p in broot.iterdir() if p.is_dir()]
    millis = max([int(time.time() * 1000), *(m + 1 for m in existing)])
    while True:
        candidate = broot / format_timestamp(millis)
        try:
            candidate.mkdir()
        except FileExistsError:
            millis += 1
            continue
        fsync_dir(broot)
        return candidate


def now() -> str:
    return format_timestamp(int(time.time() * 1000))


def manifests_of(store_root: Path) -> dict[str, dict[str, Any]]:
    return {b.name: read_json(b / MANIFEST) for b in backup_dirs(store_root)}


def restore_states(manifests: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The state each change undone by a restore change should have: ``restored`` while the newest
    restore of it is in place (complete), ``complete`` again once that restore was itself restored.

    Only the newest restore of a change decides, and a restore's own state may be decided by a
    newer restore of it, hence newest first.
    """
    want: dict[str, str] = {}
    for name in sorted(manifests, reverse=True):
        target = manifests[name].get("restores")
        if not target or target in want or target not in manifests:
            continue
        if manifests[target].get("state") not in (COMPLETE, RESTORED):
            continue
        state = want.get(name, manifests[name].get("state"))
        if state == COMPLETE:
            want[target] = RESTORED
        elif state == RESTORED:
            want[target] = COMPLETE
    return want


def state_of(manifests: dict[str, dict[str, Any]], name: str, want: dict[str, str]) -> str:
    return want.get(name, manifests[name].get("state", ""))


def settle_restores(store_root: Path) -> None:
    """Write the states ``restore_states`` gives (after a restore commits, or was killed right after)."""
    manifests = manifests_of(store_root)
    for name, state in restore_states(manifests).items():
        if manifests[name].get("state") != state:
            manifests[name]["state"] = state
            write_json_atomic(backup_root(store_root) / name / MANIFEST, manifests[name])
            crashpoint()


def _summary(bdir: Path, manifest: dict[str, Any], state: str) -> dict[str, Any]:
    steps = manifest.get("steps") or read_journal(bdir)
    size = sum(s.get("stored", 0) + s.get("zeros", 0) for s in steps)
    return {
        "timestamp": bdir.name,
        "command": manifest.get("command", ""),
        "argv": manifest.get("argv", []),
        "state": state,
        "complete": state == COMPLETE,
        "steps": len(steps),
        "bytes": size,
        "path": str(bdir),
    }


def list_backups(store_root: Path) -> list[dict[str, Any]]:
    """Every change recorded in ``STORE/.rmq-backup``, oldest first."""
    if not Path(store_root).is_dir():
        raise NotFoundError(f"{store_root}: no such store directory")
    manifests = manifests_of(store_root)
    want = restore_states(manifests)
    root = backup_root(store_root)
    return [_summary(root / name, m, state_of(manifests, name, want)) for name, m in manifests.items()]


def pending(store_root: Path) -> list[str]:
    """Timestamps of interrupted changes and restores (the next ``Change`` finishes them)."""
    return [b.name for b in backup_dirs(store_root) if read_json(b / MANIFEST).get("state") in UNFINISHED]


def manifest_of(store_root: Path, timestamp: str) -> dict[str, Any]:
    """The manifest of one backup (for tests and tools)."""
    path = backup_root(Path(store_root)) / timestamp / MANIFEST
    if not path.is_file():
        raise NotFoundError(f"{store_root}: no backup {timestamp!r}")
    return read_json(path)


def finish_unfinished(store_root: Path) -> list[str]:
    """Roll back interrupted changes and finish interrupted restores, newest first (lock held).

    Returns the timestamps of the interrupted changes it rolled back.
    """
    rolled = []
    for bdir in reversed(backup_dirs(store_root)):
        manifest = read_json(bdir / MANIFEST)
        state = manifest.get("state")
        if state in (OPEN, ROLLING_BACK):
            if state == OPEN:
                manifest["state"] = ROLLING_BACK
                write_json_atomic(bdir / MANIFEST, manifest)
                crashpoint()
            undo_all(Path(store_root), bdir, ROLLED_BACK)
            rolled.append(f"`{manifest.get('command', '?')}` of {bdir.name}")
        elif state == RESTORING:  # an in-place restore of an earlier version of rmq
            undo_all(Path(store_root), bdir, RESTORED)
    settle_restores(Path(store_root))
    return rolled


def finish_interrupted(store_root: Path, *, force_unlocked: bool = False) -> list[str]:
    """Roll back interrupted changes (and finish interrupted restores) on the store, now.

    A command that changes the store calls this after ``ensure_unlocked`` and *before* it reads the
    store to make its plan, so the plan is made from a consistent store. Returns a description of
    each change rolled back.
    """
    root = Path(store_root).absolute()
    if not root.is_dir():
        raise NotFoundError(f"{root}: no such store directory")
    if not pending(root):
        return []
    locks = StoreLocks(root, force=force_unlocked)
    try:
        return finish_unfinished(root)
    except OSError as exc:
        raise ChangeError(f"{root}: cannot roll back an interrupted change: {exc.strerror or exc}") from None
    finally:
        locks.release()
