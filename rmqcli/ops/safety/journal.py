"""Durable files, backup pieces, the journal and the undo of journalled steps (see ``rmqcli.ops.safety``).

Everything here is idempotent where it undoes: running an undo twice, or after it was killed half-way,
gives the same bytes as running it once.

The undo here works in place, without a backup of what it overwrites: it rolls back a change that
did not complete (nothing else may write to a store with an interrupted change), and finishes an
in-place restore an earlier version of rmq left interrupted. ``restore-backup`` of a completed change
does not use it: it is a change of its own (``Change.restore_range`` / ``restore_file`` /
``replace_dir``), which backs up whatever it replaces; ``copy_piece`` copies a piece out of a backup.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import uuid
from pathlib import Path
from typing import Any

from rmqcli.durable import fsync_dir as durable_fsync_dir
from rmqcli.durable import write_synced
from rmqcli.errors import CorruptDataError, RmqError
from rmqcli.store.store import BACKUP_DIR  # noqa: F401 - declared with the store's names, also importable from here

STAGING_DIR = ".rmq-staging"
MANIFEST = "manifest.json"
JOURNAL = "journal.jsonl"
LOCK_NAME = ".lock"
NEW_SUFFIX = ".rmq-new"
RESTORE_SUFFIX = ".rmq-restore"
FORMAT_VERSION = 1
CHUNK = 1 << 20
CRASH_ENV = "RMQ_TEST_CRASH_AT"

# manifest states
OPEN = "open"  # the change is running, or was interrupted
ROLLING_BACK = "rolling-back"  # an interrupted or failed change is being undone
ROLLED_BACK = "rolled-back"
COMPLETE = "complete"
RESTORING = "restoring"  # `restore-backup` is undoing a complete change
RESTORED = "restored"
UNFINISHED = (OPEN, ROLLING_BACK, RESTORING)
UNDOABLE = (COMPLETE, *UNFINISHED)


class ChangeError(RmqError):
    """A store change could not be done (an I/O error, a bad path); the store is left consistent."""

    exit_code = 1


# --- test hook ------------------------------------------------------------------------------------
_crash_count = 0


def crashpoint() -> None:
    """Test hook: with ``RMQ_TEST_CRASH_AT=N`` the process SIGKILLs itself at the Nth crash point.

    Crash points sit between every two durable actions (piece written, journal appended, file
    changed, rename done, manifest state written). Unset (the default), this only counts.
    """
    global _crash_count
    _crash_count += 1
    target = os.environ.get(CRASH_ENV)
    if target and int(target) == _crash_count:
        os.kill(os.getpid(), signal.SIGKILL)


def crashpoints_passed() -> int:
    """How many crash points this process has passed (the test sizes its kill loop with it)."""
    return _crash_count


# --- durable files --------------------------------------------------------------------------------
def fsync_dir(path: Path) -> None:
    """fsync the directory ``path``; ``OSError`` when it is not there (the change then fails)."""
    durable_fsync_dir(path, missing_ok=False)


def write_durable(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (created or emptied) and fsync the file (not its directory)."""
    write_synced(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), data)


def write_json_atomic(path: Path, value: Any) -> None:
    """Replace ``path`` with ``value`` as JSON: temp file, fsync, rename, fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    write_durable(tmp, (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptDataError(f"unreadable backup manifest ({exc})", str(path)) from None


def append_journal(bdir: Path, record: dict[str, Any]) -> None:
    """Append one step to the journal and fsync it: the step is durable before it is done."""
    line = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode()
    write_synced(os.open(bdir / JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), line)


def read_journal(bdir: Path) -> list[dict[str, Any]]:
    """The journalled steps; a torn last line (killed while appending) is ignored: its step never began."""
    try:
        lines = (bdir / JOURNAL).read_bytes().split(b"\n")
    except FileNotFoundError:
        return []
    steps = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            steps.append(json.loads(line))
        except ValueError:
            if i < len(lines) - 1 and any(x.strip() for x in lines[i + 1 :]):
                raise CorruptDataError("bad journal line", str(bdir / JOURNAL)) from None
    return steps


# --- pieces ---------------------------------------------------------------------------------------
def _zero_tail_start(fd: int, start: int, end: int) -> int:
    """The offset in [start, end) after which every byte is zero (``start`` if all are)."""
    pos = end
    while pos > start:
        lo = max(start, pos - CHUNK)
        chunk = os.pread(fd, pos - lo, lo)
        stripped = chunk.rstrip(b"\0")
        if stripped:
            return lo + len(stripped)
        pos = lo
    return start


def save_range(fd: int, start: int, length: int, piece: Path) -> tuple[int, int, str]:
    """Copy bytes [start, start+length) of ``fd`` into ``piece`` and fsync it.

    A zero tail (RocketMQ files are pre-allocated) is not stored, only counted: returns
    (stored, zeros, sha256 of the stored bytes).
    """
    end = _zero_tail_start(fd, start, start + length)
    digest = hashlib.sha256()
    out = os.open(piece, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pos = start
        while pos < end:
            chunk = os.pread(fd, min(CHUNK, end - pos), pos)
            if not chunk:
                raise ChangeError(f"{piece.name}: source shrank while being backed up")
            digest.update(chunk)
            os.write(out, chunk)
            pos += len(chunk)
        os.fsync(out)
    finally:
        os.close(out)
    return end - start, start + length - end, digest.hexdigest()


def hash_fd(fd: int, start: int, length: int) -> str:
    digest = hashlib.sha256()
    pos, end = start, start + length
    while pos < end:
        chunk = os.pread(fd, min(CHUNK, end - pos), pos)
        if not chunk:
            break
        digest.update(chunk)
        pos += len(chunk)
    return digest.hexdigest()


def hash_file(path: Path) -> tuple[int, str]:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        return size, hash_fd(fd, 0, size)
    finally:
        os.close(fd)


def is_zero(fd: int, start: int, end: int) -> bool:
    return _zero_tail_start(fd, start, end) == start


def data_end(fd: int, start: int, end: int) -> int:
    """The offset in [start, end) after which every byte of ``fd`` is zero."""
    return _zero_tail_start(fd, start, end)


def zero_range(fd: int, start: int, end: int) -> None:
    """Make bytes [start, end) of ``fd`` zero, writing only the chunks that are not zero already."""
    zeros = bytes(CHUNK)
    for pos in range(start, end, CHUNK):
        length = min(CHUNK, end - pos)
        if os.pread(fd, length, pos).count(0) != length:
            os.pwrite(fd, zeros[:length], pos)


def copy_stored(piece: Path, stored: int, fd: int, offset: int, *, crash_midway: bool = False) -> None:
    """Write the first ``stored`` bytes of ``piece`` into ``fd`` at ``offset`` (not fsynced).

    ``crash_midway``: a crash point after the first chunk (a copy killed half-way).
    """
    src = os.open(piece, os.O_RDONLY)
    try:
        pos = 0
        while pos < stored:
            chunk = os.pread(src, min(CHUNK, stored - pos), pos)
            os.pwrite(fd, chunk, offset + pos)
            pos += len(chunk)
            if crash_midway and pos == len(chunk):
                crashpoint()
    finally:
        os.close(src)


def copy_piece(piece: Path, step: dict[str, Any], target: Path) -> None:
    """Write the file a piece describes (its stored bytes, then its zero tail) to ``target``, fsynced.

    The stored bytes are checked against the journalled sha256 while they are copied; on a mismatch
    ``target`` is removed and ``CorruptDataError`` raised. ``piece`` is only read.
    """
    stored, size = step["stored"], step["stored"] + step["zeros"]
    digest = hashlib.sha256()
    src = os.open(piece, os.O_RDONLY)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pos = 0
            while pos < stored:
                chunk = os.pread(src, min(CHUNK, stored - pos), pos)
                if not chunk:
                    break
                digest.update(chunk)
                os.write(dst, chunk)
                pos += len(chunk)
            extra = os.fstat(src).st_size
            good = pos == stored and digest.hexdigest() == step["sha256"]
            good = good and (extra <= stored or is_zero(src, stored, extra))
            if good:
                os.ftruncate(dst, size)
                os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    if not good:
        target.unlink(missing_ok=True)
        raise CorruptDataError("backup piece does not match its sha256 in the journal", str(piece))


def tree_listing(root: Path) -> list[dict[str, Any]]:
    """Every entry under ``root``, sorted: directories, and files with size and sha256."""
    entries: list[dict[str, Any]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        rel_dir = base.relative_to(root).as_posix()
        if rel_dir != ".":
            entries.append({"path": rel_dir, "dir": True})
        for name in sorted(filenames):
            size, sha = hash_file(base / name)
            entries.append({"path": (base / name).relative_to(root).as_posix(), "size": size, "sha256": sha})
    return sorted(entries, key=lambda e: e["path"])


def listing_sha(listing: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()


def fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(Path(dirpath) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def same_device(a: Path, b: Path) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


def trash(path: Path, bdir: Path) -> None:
    """Remove the directory ``path``: renamed away first, so no half-removed tree is left at ``path``."""
    if not path.exists():
        return
    target = bdir / f"trash-{uuid.uuid4().hex}"
    try:
        os.rename(path, target)
    except OSError:
        shutil.rmtree(path)
        fsync_dir(path.parent)
        return
    fsync_dir(path.parent)
    crashpoint()
    shutil.rmtree(target)


def empty_trash(bdir: Path) -> None:
    for entry in bdir.glob("trash-*"):
        shutil.rmtree(entry, ignore_errors=True)


# --- undo -----------------------------------------------------------------------------------------
def piece_ok(piece: Path, step: dict[str, Any]) -> None:
    """Raise unless ``piece`` holds exactly the journalled bytes."""
    try:
        fd = os.open(piece, os.O_RDONLY)
    except FileNotFoundError:
        raise CorruptDataError("backup piece is missing", str(piece)) from None
    try:
        size = os.fstat(fd).st_size
        stored = step["stored"]
        if size < stored or hash_fd(fd, 0, stored) != step["sha256"]:
            raise CorruptDataError("backup piece does not match its sha256 in the journal", str(piece))
        if size > stored and not is_zero(fd, stored, size):
            raise CorruptDataError("backup piece has unexpected bytes after its stored length", str(piece))
    finally:
        os.close(fd)


def _file_matches(path: Path, step: dict[str, Any]) -> bool:
    """Whether ``path`` already holds the bytes the piece of ``step`` describes."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return False
    try:
        size = os.fstat(fd).st_size
        stored, zeros = step["stored"], step["zeros"]
        if size != stored + zeros or hash_fd(fd, 0, stored) != step["sha256"]:
            return False
        return is_zero(fd, stored, size)
    finally:
        os.close(fd)


def _put_file_back(path: Path, piece: Path, step: dict[str, Any]) -> None:
    """Make ``path`` hold the piece's bytes (a moved or linked piece is renamed back, else copied)."""
    piece_ok(piece, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    if step.get("mode") in ("move", "link"):
        os.replace(piece, path)
        fsync_dir(piece.parent)
    else:
        tmp = path.with_name(path.name + RESTORE_SUFFIX)
        src = os.open(piece, os.O_RDONLY)
        dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while chunk := os.read(src, CHUNK):
                os.write(dst, chunk)
            os.ftruncate(dst, step["stored"] + step["zeros"])
            os.fsync(dst)
        finally:
            os.close(src)
            os.close(dst)
        os.replace(tmp, path)
    fsync_dir(path.parent)
    crashpoint()


def _undo_range(path: Path, piece: Path, step: dict[str, Any]) -> None:
    """Put back a byte range (truncate, write) and the file's original length."""
    piece_ok(piece, step)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        raise ChangeError(f"{path}: missing; cannot put back the bytes backed up from it") from None
    try:
        if os.fstat(fd).st_size != step["orig_size"]:
            os.ftruncate(fd, step["orig_size"])
        offset = step["offset"]
        copy_stored(piece, step["stored"], fd, offset)
        tail = offset + step["stored"]
        zero_range(fd, tail, tail + step["zeros"])
        os.fsync(fd)
    finally:
        os.close(fd)
    crashpoint()


def _undo_dir(path: Path, piece: Path, step: dict[str, Any], bdir: Path) -> None:
    if piece.is_dir():
        if listing_sha(tree_listing(piece)) != step["sha256"]:
            raise CorruptDataError(
                "backed-up directory does not match its listing in the journal", str(piece)
            )
        trash(path, bdir)
        crashpoint()
        os.rename(piece, path)
        fsync_dir(path.parent)
        fsync_dir(bdir)
        crashpoint()
    elif step["action"] == "replace-dir" and not step["existed"] and path.exists():
        trash(path, bdir)
        crashpoint()


def undo_step(root: Path, bdir: Path, step: dict[str, Any]) -> None:
    """Undo one journalled step, whether it was not begun, half done or done (idempotent)."""
    path = root / step["path"]
    piece = bdir / step["piece"] if step.get("piece") else bdir / "-"
    action = step["action"]
    if action in ("truncate", "write"):
        _undo_range(path, piece, step)
    elif action in ("delete", "replace", "create"):
        new = path.with_name(path.name + NEW_SUFFIX)
        if new.exists():
            new.unlink()
            fsync_dir(path.parent)
        if step.get("existed", True):
            if not _file_matches(path, step):
                _put_file_back(path, piece, step)
        elif path.exists():
            path.unlink()
            fsync_dir(path.parent)
            crashpoint()
        for made in reversed(step.get("made_dirs", [])):
            try:
                (root / made).rmdir()
                fsync_dir((root / made).parent)
            except OSError:
                pass
    elif action in ("replace-dir", "delete-dir"):
        _undo_dir(path, piece, step, bdir)
    elif action == "discard":  # deleted without a backup: nothing to put back, nothing half done
        pass
    else:
        raise CorruptDataError(f"unknown journalled action {action!r}", str(bdir / JOURNAL))


def undo_all(root: Path, bdir: Path, final_state: str) -> None:
    """Undo every journalled step of the change in ``bdir`` in reverse order, then record ``final_state``."""
    manifest = read_json(bdir / MANIFEST)
    for step in reversed(read_journal(bdir)):
        undo_step(root, bdir, step)
    empty_trash(bdir)
    manifest["state"] = final_state
    write_json_atomic(bdir / MANIFEST, manifest)
    crashpoint()
    if final_state == ROLLED_BACK:  # nothing to restore any more: keep only the record
        for entry in bdir.iterdir():
            if entry.name not in (MANIFEST, JOURNAL):
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
