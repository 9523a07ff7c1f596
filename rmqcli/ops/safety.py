"""The safety layer of every command that changes a store ("Nothing is lost", DESIGN.md).

A command checks that no broker holds the store (``ensure_unlocked``), rolls back a change an
earlier run left interrupted (``finish_interrupted``), builds a ``Plan`` (what it would do; printed
as the ``--dry-run`` output) and applies it through one ``Change``::

    ensure_unlocked(root, force=force_unlocked)
    finish_interrupted(root)          # before reading the store to plan
    plan = make_plan(root)            # the command's own work; may stage dirs with staging_dir()
    with Change(root, "truncate", argv) as change:
        change.truncate_file("commitlog/00000000000000000000", valid_size)
        change.delete_file("commitlog/00000000001073741824")
        backup = change.commit()

Backups. Each ``Change`` gets ``STORE/.rmq-backup/<timestamp>/`` (UTC, ``20261122T233012.123Z``,
unique and increasing per store) holding ``manifest.json`` (command, argv, state, extra roots, and at
commit the full step list), ``journal.jsonl`` (one line per step, appended and fsynced *before* the
step touches the store) and the backed-up pieces ``NNNNN.bin`` / ``NNNNN.dir``. Every piece is
byte-exact and its sha256 is in the journal; a zero tail of a removed range (RocketMQ pre-allocates
its files) is counted, not stored. Removed files and directories are moved into the backup when they
are on the store root's filesystem (else files are copied; a directory on another filesystem is
refused). A replaced file's old version is hard-linked (else copied) into the backup before the new
one is renamed over it. Staged directories live in ``STORE/.rmq-staging/<name>/`` (``staging_dir``).

Paths. A step names a path relative to the store root, or an absolute path inside one of the
change's extra ``roots``: the CommitLog directories a broker.conf puts elsewhere
(``storePathCommitLog=/data/a,/data/b``). Nothing outside the store and those roots can be touched.

``rmq`` never reads ``.rmq-backup`` or ``.rmq-staging``: the store readers only open known names
(``commitlog/`` and ``index/`` files named by 20 / 17 digits, the consume-queue directories under
``consumequeue/``, ``checkpoint``, ``abort``, ``lock``, ``config/*.json``), and temporary files
beside a store file carry the suffixes ``.rmq-new`` / ``.rmq-restore``, which no reader accepts.
A broker ignores both directories as well; ``rmq stats`` counts their files under "other".

Interruption rule. A change that did not reach ``commit()`` (killed, or an exception left its
``with`` block) is **rolled back as a whole**: every journalled step is undone in reverse order
(a truncate or write gets its bytes and length back, a deleted or replaced file is put back, a
half-done ``replace_dir`` swap is swapped back), which leaves the store byte-identical to before
the change. Each undo is idempotent, so a rollback killed half-way is simply repeated. The next
``Change`` on the store (or ``restore_backup``) does this first, so re-running a command after a kill
at any point starts from the original store and converges to the same final store as an
uninterrupted run; the completed change's backup then restores the original bytes. Because a plan
made from a half-changed store is stale, ``Change`` raises ``InterruptedChangeError`` after such a
rollback (unless ``replan=False``); commands avoid it by calling ``finish_interrupted`` before
they plan. A change killed after ``commit()`` wrote its manifest is complete: re-running the
command then finds nothing to do (its plan is empty). The rolled-back change keeps its manifest and
journal (state ``rolled-back``); its pieces are deleted.

Restores. ``restore_backup`` undoes a completed change **as a change of its own** (command
``restore-backup``, manifest key ``restores``): whatever it overwrites or removes -- including data
written to the store after the change it undoes (records appended after a cut, a file or directory
created again) -- is first backed up into the restore's own ``.rmq-backup/<timestamp>/``, so a
restore is journalled, rolled back as a whole when interrupted, and can itself be undone with
``rmq restore-backup``. The backed-up bytes are *copied* back into the store; the undone change's
pieces stay untouched. Its plan reports, per step, the bytes of the current store it would replace.
When the restore commits, the undone change's state becomes ``restored``; when the restore is
itself undone, ``complete`` again. Restores do not block restoring an earlier change (they only
return paths to an earlier state); any other later change that touched the same paths does.
A change that was interrupted (not complete) is restored by rolling it back in place.

Locks. Changes on one store are serialised by an ``flock`` on ``.rmq-backup/.lock``, and a
``Change`` takes the broker's POSIX lock on ``lock`` (when that file exists) so a broker cannot start
under it. Failing to take it -- a broker holds it, or the file cannot be opened or locked -- raises
``StoreBusyError`` unless ``force_unlocked``: the check is repeated when the change starts, however
long the planning took. POSIX locks are per process and are dropped when the process closes *any*
descriptor of ``lock``: call ``ensure_unlocked`` before opening the ``Change``, not during it.

Do not start a broker on a store with an interrupted change: re-run the command (or
``rmq restore-backup`` the pending timestamp) first.

Test hook: with ``RMQ_TEST_CRASH_AT=N`` in the environment the process SIGKILLs itself at the Nth
crash point (between every two durable actions); see ``safety_journal.crashpoint``.
"""

from __future__ import annotations

import calendar
import errno
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any

from rmqcli.errors import CorruptDataError, NotFoundError, RmqError, UsageError
from rmqcli.ops.safety_journal import (
    BACKUP_DIR,
    CHUNK,
    COMPLETE,
    FORMAT_VERSION,
    JOURNAL,
    LOCK_NAME,
    MANIFEST,
    NEW_SUFFIX,
    OPEN,
    RESTORE_SUFFIX,
    RESTORED,
    RESTORING,
    ROLLED_BACK,
    ROLLING_BACK,
    STAGING_DIR,
    UNDOABLE,
    UNFINISHED,
    ChangeError,
    append_journal,
    copy_piece,
    crashpoint,
    data_end,
    fsync_dir,
    fsync_tree,
    hash_file,
    listing_sha,
    piece_ok,
    read_journal,
    read_json,
    same_device,
    save_range,
    tree_listing,
    undo_all,
    write_durable,
    write_json_atomic,
    zero_range,
)

__all__ = [
    "BACKUP_DIR",
    "STAGING_DIR",
    "Change",
    "ChangeError",
    "Plan",
    "PlanStep",
    "StoreBusyError",
    "ensure_unlocked",
    "finish_interrupted",
    "InterruptedChangeError",
    "list_backups",
    "outside_roots",
    "pending",
    "plan_path",
    "remove_staging",
    "restore_backup",
    "staging_dir",
]


class InterruptedChangeError(ChangeError):
    """``Change`` found and rolled back an interrupted change: a plan made before is stale; re-run."""


class StoreBusyError(RmqError):
    """The store is in use: a broker holds its ``lock``, or another rmq command is changing it."""

    exit_code = 7


FORCE_HINT = "(or pass --force-unlocked if you are sure nothing writes to the store)"


def ensure_unlocked(store_root: Path, *, force: bool = False) -> None:
    """Raise ``StoreBusyError`` when a broker holds the store's ``lock`` (unless ``force``).

    Fails closed: a ``lock`` file that exists but cannot be checked counts as held.
    """
    from rmqcli.store import Store

    store = Store(Path(store_root))
    if force or not store.lock_held():
        return
    reason = "a running broker holds the store lock; stop it first"
    try:
        os.close(os.open(store.lock_path, os.O_RDONLY | os.O_NONBLOCK))
    except FileNotFoundError:
        pass
    except OSError as exc:
        reason = f"cannot check the store lock {store.lock_path}: {exc.strerror or exc}"
    raise StoreBusyError(f"{store_root}: {reason} {FORCE_HINT}")


# --- plans ----------------------------------------------------------------------------------------
@dataclass
class PlanStep:
    """One thing a command would do to a store."""

    action: str  # "delete" | "truncate" | "replace" | "create" | "replace-dir" | "delete-dir" | "restore"
    path: str  # relative to the store root, or absolute in a CommitLog directory outside it (Plan.roots)
    detail: str  # one line for humans
    bytes_removed: int = 0  # bytes of the store the step removes or replaces (all backed up first)


@dataclass
class Plan:
    """What a store-changing command would do (``--dry-run``) or did (``--yes``)."""

    command: str
    store: Path
    steps: list[PlanStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    roots: list[Path] = field(default_factory=list)  # directories outside the store the steps may name
    backup: Path | None = None  # set once applied, where the change kept its backup
    skipped: list[dict[str, Any]] = field(default_factory=list)  # records left out (``ops.unsafe_topics``)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "store": str(self.store),
            "steps": [
                {"action": s.action, "path": s.path, "detail": s.detail, "bytesRemoved": s.bytes_removed}
                for s in self.steps
            ],
            "notes": list(self.notes),
            "skipped": list(self.skipped),
            "bytesRemoved": sum(s.bytes_removed for s in self.steps),
        }

    @property
    def empty(self) -> bool:
        return not self.steps


# --- helpers --------------------------------------------------------------------------------------
def _backup_root(store_root: Path) -> Path:
    return Path(store_root) / BACKUP_DIR


def _rel(rel: str | Path, root: Path | None = None, roots: Iterable[Path] = ()) -> str:
    """``rel`` checked: inside the store (not in the backup or staging directories) or in a root.

    Returns a store-relative POSIX path, or an absolute one inside (not equal to) one of ``roots``;
    an absolute path inside ``root`` (the store) is made relative.
    """
    p = PurePosixPath(os.fspath(rel).replace(os.sep, "/"))
    if ".." in p.parts:
        raise UsageError(f"{rel!r}: not a path inside the store")
    if p.is_absolute():
        inside = root is not None and _inside(p, root)
        if inside:
            p = p.relative_to(PurePosixPath(os.path.abspath(root)))
        elif not any(_inside(p, r) for r in roots):
            raise UsageError(f"{rel!r}: not a path inside the store or one of its CommitLog directories")
    if not p.is_absolute() and (not p.parts or p.parts[0] in (BACKUP_DIR, STAGING_DIR)):
        raise UsageError(f"{rel!r}: not a path inside the store")
    if p.name.endswith((NEW_SUFFIX, RESTORE_SUFFIX)):
        raise UsageError(f"{rel!r}: a temporary name of the safety layer")
    return p.as_posix()


def _inside(path: PurePosixPath, root: Path) -> bool:
    """Whether the absolute ``path`` lies strictly below ``root`` (both taken as spelled, absolute)."""
    base = PurePosixPath(os.path.abspath(root))
    return path != base and base in path.parents


def plan_path(store_root: Path, path: Path) -> str:
    """How a plan step names ``path``: relative to the store when inside it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(os.path.abspath(store_root)).as_posix()
    except ValueError:
        return absolute.as_posix()


def outside_roots(store_root: Path, dirs: Iterable[Path]) -> list[Path]:
    """The directories of ``dirs`` (e.g. ``Store.commitlog_dirs``) that are not inside the store."""
    base = Path(os.path.abspath(store_root))
    out = []
    for d in dirs:
        absolute = Path(os.path.abspath(d))
        if absolute != base and base not in absolute.parents and absolute not in out:
            out.append(absolute)
    return out


def _timestamp(millis: int) -> str:
    seconds, ms = divmod(millis, 1000)
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds)) + f".{ms:03d}Z"


def _parse_timestamp(name: str) -> int | None:
    try:
        head, ms = name.removesuffix("Z").split(".")
        return calendar.timegm(time.strptime(head, "%Y%m%dT%H%M%S")) * 1000 + int(ms)
    except ValueError:
        return None


def _backup_dirs(store_root: Path) -> list[Path]:
    root = _backup_root(store_root)
    if not root.is_dir():
        return []
    return sorted(
        p for p in root.iterdir() if p.is_dir() and (p / MANIFEST).is_file() and _parse_timestamp(p.name)
    )


class _Locks:
    """The rmq-vs-rmq ``flock`` on ``.rmq-backup/.lock`` and the broker's POSIX lock on ``lock``.

    Fails closed: when ``lock`` exists but cannot be locked (a broker holds it, or it cannot be
    opened or locked at all) ``StoreBusyError`` is raised, unless ``force`` (then no broker lock is held).
    """

    def __init__(self, store_root: Path, *, force: bool = False):
        broot = _backup_root(store_root)
        if not broot.is_dir():
            broot.mkdir()
            fsync_dir(store_root)
        self.fd: int | None = os.open(broot / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            self.fd = None
            raise StoreBusyError(f"{store_root}: another rmq command is changing this store") from None
        self.broker_fd: int | None = None
        lock = Path(store_root) / "lock"
        try:
            self.broker_fd = os.open(lock, os.O_RDWR | os.O_NONBLOCK)
            fcntl.lockf(self.broker_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0, os.SEEK_SET)
        except FileNotFoundError:
            self.broker_fd = None  # no lock file: no broker has run on this store
        except OSError as exc:
            if self.broker_fd is not None:
                os.close(self.broker_fd)
            self.broker_fd = None
            if not force:
                self.release()
                if exc.errno in (errno.EACCES, errno.EAGAIN) and exc.filename is None:
                    reason = "a running broker holds the store lock; stop it first"
                else:
                    reason = f"cannot take the store lock {lock}: {exc.strerror or exc}"
                raise StoreBusyError(f"{store_root}: {reason} {FORCE_HINT}") from None

    def release(self) -> None:
        for fd in (self.broker_fd, self.fd):
            if fd is not None:
                os.close(fd)
        self.fd = self.broker_fd = None


def _finish_unfinished(store_root: Path) -> list[str]:
    """Roll back interrupted changes and finish interrupted restores, newest first (lock held).

    Returns the timestamps of the interrupted changes it rolled back.
    """
    rolled = []
    for bdir in reversed(_backup_dirs(store_root)):
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
    _settle_restores(Path(store_root))
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
    locks = _Locks(root, force=force_unlocked)
    try:
        return _finish_unfinished(root)
    except OSError as exc:
        raise ChangeError(f"{root}: cannot roll back an interrupted change: {exc.strerror or exc}") from None
    finally:
        locks.release()


def _wrap_os_errors(method):  # type: ignore[no-untyped-def]
    """Report an ``OSError`` of a change operation as a one-line ``ChangeError``."""

    def wrapper(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            where = f" {exc.filename}" if exc.filename else ""
            raise ChangeError(f"{method.__name__}:{where}: {exc.strerror or exc}") from None

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


# --- the change -----------------------------------------------------------------------------------
class Change:
    """Applies a plan's steps to a store safely; use as a context manager and call ``commit()``.

    Leaving the ``with`` block by an exception rolls every step back; leaving it normally commits.
    """

    def __init__(
        self,
        store_root: Path,
        command: str,
        argv: list[str] | None = None,
        *,
        replan: bool = True,
        roots: Iterable[Path] = (),
        force_unlocked: bool = False,
        restores: str | None = None,
    ):
        """Start a change; first roll back any interrupted one (see the module docstring).

        When an interrupted change had to be rolled back here, the caller's plan was made from a
        half-changed store, so ``InterruptedChangeError`` is raised after the rollback (re-running the
        command then works). Call ``finish_interrupted`` before planning to avoid that, or pass
        ``replan=False`` when nothing the caller does depends on what it read before.

        ``roots``: directories outside the store whose files the change may touch by absolute path
        (the CommitLog directories of ``storePathCommitLog``). ``StoreBusyError`` when a broker holds
        (or the change cannot take) the store's ``lock``, unless ``force_unlocked``. ``restores``: the
        timestamp of the change this one undoes (``restore_backup``).
        """
        self.root = Path(store_root).absolute()
        if not self.root.is_dir():
            raise NotFoundError(f"{self.root}: no such store directory")
        self.roots = outside_roots(self.root, roots)
        self._locks: _Locks | None = None
        self._closed = False
        self._n = 0
        self._bytes = 0
        try:
            self._locks = _Locks(self.root, force=force_unlocked)
            rolled = _finish_unfinished(self.root)
            if rolled and replan:
                raise InterruptedChangeError(
                    f"{self.root}: rolled back the interrupted {', '.join(rolled)}; the store is as it was "
                    "before that change: run the command again"
                )
            self.dir = self._create_dir()
            self.manifest: dict[str, Any] = {
                "format": FORMAT_VERSION,
                "timestamp": self.dir.name,
                "command": command,
                "argv": list(argv) if argv is not None else [],
                "store": str(self.root),
                "roots": [str(r) for r in self.roots],
                "state": OPEN,
                "pid": os.getpid(),
            }
            if restores:
                self.manifest["restores"] = restores
            write_json_atomic(self.dir / MANIFEST, self.manifest)
            write_durable(self.dir / JOURNAL, b"")
            fsync_dir(self.dir)
            crashpoint()
        except BaseException as exc:
            self._release()
            if isinstance(exc, OSError):
                raise ChangeError(f"{self.root}: cannot start a change: {exc.strerror or exc}") from None
            raise

    def _create_dir(self) -> Path:
        broot = _backup_root(self.root)
        existing = [_parse_timestamp(p.name) or 0 for p in broot.iterdir() if p.is_dir()]
        millis = max([int(time.time() * 1000), *(m + 1 for m in existing)])
        while True:
            candidate = broot / _timestamp(millis)
            try:
                candidate.mkdir()
            except FileExistsError:
                millis += 1
                continue
            fsync_dir(broot)
            return candidate

    # --- context manager ----------------------------------------------------------------------
    def __enter__(self) -> Change:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._closed:
            return
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    @property
    def timestamp(self) -> str:
        return self.dir.name

    def _release(self) -> None:
        if self._locks is not None:
            self._locks.release()
            self._locks = None

    def _begin(self, rel: str) -> tuple[str, Path, int]:
        if self._closed:
            raise ChangeError(f"change {self.dir.name} is already committed or rolled back")
        rel = _rel(rel, self.root, self.roots)
        n = self._n
        self._n += 1
        return rel, self.root / rel, n

    def _name(self, path: Path) -> str:
        """How the journal names ``path`` (store-relative, or absolute in an extra root)."""
        return _rel(Path(os.path.abspath(path)), self.root, self.roots)

    def _journal(self, record: dict[str, Any]) -> None:
        append_journal(self.dir, record)
        self._bytes += record.get("stored", 0) + record.get("zeros", 0)
        crashpoint()

    # --- operations ---------------------------------------------------------------------------
    @_wrap_os_errors
    def truncate_file(self, rel: str, new_size_valid: int, *, keep_size: bool = True) -> None:
        """Back up bytes [new_size_valid, EOF), then zero them (``keep_size``) or cut the file there."""
        rel, path, n = self._begin(rel)
        if not path.is_file():
            raise NotFoundError(f"{rel}: no such file in {self.root}")
        fd = os.open(path, os.O_RDWR)
        try:
            orig = os.fstat(fd).st_size
            if not 0 <= new_size_valid <= orig:
                raise UsageError(f"{rel}: cannot truncate to {new_size_valid}; the file has {orig} bytes")
            if new_size_valid == orig:
                return
            piece = f"{n:05d}.bin"
            stored, zeros, sha = save_range(fd, new_size_valid, orig - new_size_valid, self.dir / piece)
            fsync_dir(self.dir)
            crashpoint()
            self._journal(
                {
                    "n": n,
                    "action": "truncate",
                    "path": rel,
                    "offset": new_size_valid,
                    "orig_size": orig,
                    "keep_size": keep_size,
                    "piece": piece,
                    "stored": stored,
                    "zeros": zeros,
                    "sha256": sha,
                }
            )
            if keep_size:
                end = new_size_valid + stored
                zero = bytes(1 << 20)
                for pos in range(new_size_valid, end, len(zero)):
                    os.pwrite(fd, zero[: min(len(zero), end - pos)], pos)
                    if pos == new_size_valid:
                        crashpoint()  # killed half-way through the zeroing
            else:
                os.ftruncate(fd, new_size_valid)
            os.fsync(fd)
        finally:
            os.close(fd)
        crashpoint()

    @_wrap_os_errors
    def write_range(self, rel: str, offset: int, data: bytes) -> None:
        """Overwrite ``data`` at ``offset`` in place (may extend the file); the old range is backed up."""
        rel, path, n = self._begin(rel)
        if not path.is_file():
            raise NotFoundError(f"{rel}: no such file in {self.root}")
        if offset < 0:
            raise UsageError(f"{rel}: negative offset {offset}")
        fd = os.open(path, os.O_RDWR)
        try:
            orig = os.fstat(fd).st_size
            start = min(offset, orig)
            end = min(offset + len(data), orig)
            piece = f"{n:05d}.bin"
            stored, zeros, sha = save_range(fd, start, end - start, self.dir / piece)
            fsync_dir(self.dir)
            crashpoint()
            self._journal(
                {
                    "n": n,
                    "action": "write",
                    "path": rel,
                    "offset": start,
                    "length": len(data),
                    "orig_size": orig,
                    "piece": piece,
                    "stored": stored,
                    "zeros": zeros,
                    "sha256": sha,
                }
            )
            view = memoryview(data)
            pos = offset
            while view:
                written = os.pwrite(fd, view, pos)
                view, pos = view[written:], pos + written
            os.fsync(fd)
        finally:
            os.close(fd)
        crashpoint()

    @_wrap_os_errors
    def delete_file(self, rel: str) -> None:
        """Move the file into the backup (copy it when on another filesystem), then remove it."""
        rel, path, n = self._begin(rel)
        if not path.is_file():
            raise NotFoundError(f"{rel}: no such file in {self.root}")
        piece = f"{n:05d}.bin"
        if same_device(path.parent, self.dir):
            size, sha = hash_file(path)
            record = {"mode": "move", "stored": size, "zeros": 0, "sha256": sha}
            self._journal({"n": n, "action": "delete", "path": rel, "piece": piece, **record})
            os.rename(path, self.dir / piece)
            fsync_dir(self.dir)
            crashpoint()
        else:
            fd = os.open(path, os.O_RDONLY)
            try:
                stored, zeros, sha = save_range(fd, 0, os.fstat(fd).st_size, self.dir / piece)
            finally:
                os.close(fd)
            fsync_dir(self.dir)
            crashpoint()
            record = {"mode": "copy", "stored": stored, "zeros": zeros, "sha256": sha}
            self._journal({"n": n, "action": "delete", "path": rel, "piece": piece, **record})
            path.unlink()
        fsync_dir(path.parent)
        crashpoint()

    @_wrap_os_errors
    def replace_file(self, rel: str, data: bytes) -> None:
        """Write ``data`` beside as ``rel.rmq-new``, back up the old file (if any), rename into place."""
        self._replace(rel, len(data), lambda tmp: write_durable(tmp, data))

    @_wrap_os_errors
    def restore_file(self, rel: str, piece: Path, step: dict[str, Any]) -> None:
        """Put back a file another change backed up (``step``, its piece), as a copy; a file now at
        ``rel`` is backed up first, as by ``replace_file``. The other change's piece is not touched."""
        if not piece.is_file() or piece.stat().st_size < step["stored"]:
            raise CorruptDataError("backup piece is missing or short", str(piece))
        self._replace(rel, step["stored"] + step["zeros"], lambda tmp: copy_piece(piece, step, tmp))

    def _replace(self, rel: str, new_size: int, write_new: Callable[[Path], None]) -> None:
        rel, path, n = self._begin(rel)
        if path.is_dir():
            raise UsageError(f"{rel}: is a directory")
        record: dict[str, Any] = {"n": n, "action": "replace", "path": rel, "existed": path.exists()}
        made = []
        parent = path.parent
        while not parent.exists():
            made.append(self._name(parent))
            parent = parent.parent
        record["made_dirs"] = list(reversed(made))
        if record["existed"]:
            piece = f"{n:05d}.bin"
            try:
                os.link(path, self.dir / piece)
                size, sha = hash_file(self.dir / piece)
                record.update(mode="link", stored=size, zeros=0, sha256=sha)
            except OSError:
                fd = os.open(path, os.O_RDONLY)
                try:
                    stored, zeros, sha = save_range(fd, 0, os.fstat(fd).st_size, self.dir / piece)
                finally:
                    os.close(fd)
                record.update(mode="copy", stored=stored, zeros=zeros, sha256=sha)
            record["piece"] = piece
            fsync_dir(self.dir)
            crashpoint()
        record["new_size"] = new_size
        self._journal(record)
        for made_dir in record["made_dirs"]:
            (self.root / made_dir).mkdir()
            fsync_dir((self.root / made_dir).parent)
        tmp = path.with_name(path.name + NEW_SUFFIX)
        write_new(tmp)
        crashpoint()
        os.replace(tmp, path)
        fsync_dir(path.parent)
        crashpoint()

    @_wrap_os_errors
    def restore_range(self, rel: str, piece: Path, step: dict[str, Any]) -> None:
        """Put back a byte range another change backed up (its ``truncate`` or ``write`` ``step``):
        the file gets its old length, the piece's bytes at the step's offset and zeros after them.

        The bytes of the file now in that range (e.g. records appended after a cut), and any bytes
        past the old length, are backed up first (journalled as a ``write``).
        """
        rel, path, n = self._begin(rel)
        if not path.is_file():
            raise ChangeError(f"{rel}: missing; cannot put back the bytes backed up from it")
        piece_ok(piece, step)
        offset, old_size = step["offset"], step["orig_size"]
        old_end = offset + step["stored"] + step["zeros"]
        fd = os.open(path, os.O_RDWR)
        try:
            cur = os.fstat(fd).st_size
            start = min(offset, cur)
            end = cur if cur > old_size else min(cur, old_end)
            mine = f"{n:05d}.bin"
            stored, zeros, sha = save_range(fd, start, end - start, self.dir / mine)
            fsync_dir(self.dir)
            crashpoint()
            self._journal(
                {
                    "n": n,
                    "action": "write",
                    "path": rel,
                    "offset": start,
                    "length": old_end - offset,
                    "orig_size": cur,
                    "piece": mine,
                    "stored": stored,
                    "zeros": zeros,
                    "sha256": sha,
                }
            )
            if cur != old_size:
                os.ftruncate(fd, old_size)
            src = os.open(piece, os.O_RDONLY)
            try:
                pos = 0
                while pos < step["stored"]:
                    chunk = os.pread(src, min(CHUNK, step["stored"] - pos), pos)
                    os.pwrite(fd, chunk, offset + pos)
                    pos += len(chunk)
                    if pos == len(chunk):
                        crashpoint()  # killed half-way through the copy
            finally:
                os.close(src)
            zero_range(fd, offset + step["stored"], min(old_end, old_size))
            os.fsync(fd)
        finally:
            os.close(fd)
        crashpoint()

    @_wrap_os_errors
    def replace_dir(self, rel: str, staged: Path) -> None:
        """Swap ``staged`` (under ``STORE/.rmq-staging/``) in for ``rel``; the old dir goes to the backup."""
        rel, path, n = self._begin(rel)
        staged = Path(staged).absolute()
        staging_root = self.root / STAGING_DIR
        if not staged.is_dir() or staging_root.resolve() not in staged.resolve().parents:
            raise UsageError(f"{staged}: not a staged directory under {staging_root}")
        if path.exists() and not path.is_dir():
            raise UsageError(f"{rel}: not a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not same_device(path.parent, self.dir) or not same_device(staged, path.parent):
            raise ChangeError(f"{rel}: on another filesystem than {self.root}; cannot swap it safely")
        existed = path.exists()
        listing = tree_listing(path) if existed else []
        piece = f"{n:05d}.dir"
        self._journal(
            {
                "n": n,
                "action": "replace-dir",
                "path": rel,
                "existed": existed,
                "piece": piece,
                "staged": str(staged),
                "files": listing,
                "sha256": listing_sha(listing),
                "stored": sum(e.get("size", 0) for e in listing),
            }
        )
        if existed:
            os.rename(path, self.dir / piece)
            fsync_dir(path.parent)
            fsync_dir(self.dir)
            crashpoint()
        fsync_tree(staged)
        os.rename(staged, path)
        fsync_dir(path.parent)
        fsync_dir(staged.parent)
        crashpoint()

    @_wrap_os_errors
    def delete_dir(self, rel: str) -> None:
        """Move the directory into the backup (it must be on the store root's filesystem)."""
        rel, path, n = self._begin(rel)
        if not path.is_dir():
            raise NotFoundError(f"{rel}: no such directory in {self.root}")
        if not same_device(path, self.dir) or path.is_mount():
            raise ChangeError(f"{rel}: on another filesystem than {self.root}; cannot move it to the backup")
        listing = tree_listing(path)
        piece = f"{n:05d}.dir"
        self._journal(
            {
                "n": n,
                "action": "delete-dir",
                "path": rel,
                "mode": "move",
                "piece": piece,
                "files": listing,
                "sha256": listing_sha(listing),
                "stored": sum(e.get("size", 0) for e in listing),
            }
        )
        os.rename(path, self.dir / piece)
        fsync_dir(path.parent)
        fsync_dir(self.dir)
        crashpoint()

    # --- the end ------------------------------------------------------------------------------
    @_wrap_os_errors
    def commit(self) -> Path:
        """Mark the change complete (fsynced); returns its backup directory."""
        if self._closed:
            raise ChangeError(f"change {self.dir.name} is already committed or rolled back")
        steps = read_journal(self.dir)
        self.manifest.update(state=COMPLETE, steps=steps, bytes=self._bytes, finished=_now())
        write_json_atomic(self.dir / MANIFEST, self.manifest)
        crashpoint()
        self._closed = True
        try:
            if self.manifest.get("restores"):
                _settle_restores(self.root)  # the restored change is now `restored`
            _remove_empty_staging(self.root)
        finally:
            self._release()
        return self.dir

    def rollback(self) -> None:
        """Undo every step done so far (the store is as before the change) and close the change."""
        if self._closed:
            return
        try:
            self.manifest["state"] = ROLLING_BACK
            write_json_atomic(self.dir / MANIFEST, self.manifest)
            undo_all(self.root, self.dir, ROLLED_BACK)
        finally:
            self._closed = True
            self._release()


def _now() -> str:
    return _timestamp(int(time.time() * 1000))


def _remove_empty_staging(store_root: Path) -> None:
    """Remove the empty directories left in ``.rmq-staging`` (and it, when empty) after swaps."""
    staging = store_root / STAGING_DIR
    for dirpath, _dirs, _files in sorted(os.walk(staging, topdown=False), key=lambda w: -len(w[0])):
        try:
            Path(dirpath).rmdir()
        except OSError:
            pass
    if not staging.exists():
        fsync_dir(store_root)


def remove_staging(store_root: Path, name: str) -> None:
    """Remove ``STORE/.rmq-staging/<name>/`` (whatever it holds) and ``.rmq-staging`` when it is empty."""
    root = Path(store_root).absolute() / STAGING_DIR
    if name and "/" not in name and name not in (".", ".."):
        shutil.rmtree(root / name, ignore_errors=True)
    if root.is_dir():
        _remove_empty_staging(Path(store_root).absolute())


def staging_dir(store_root: Path, name: str) -> Path:
    """``STORE/.rmq-staging/<name>/``, emptied and created (fill it, then ``Change.replace_dir``)."""
    if not name or "/" in name or name in (".", ".."):
        raise UsageError(f"{name!r}: not a staging directory name")
    root = Path(store_root).absolute() / STAGING_DIR
    path = root / name
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    fsync_dir(root)
    fsync_dir(root.parent)
    return path


# --- backups --------------------------------------------------------------------------------------
def _manifests(store_root: Path) -> dict[str, dict[str, Any]]:
    return {b.name: read_json(b / MANIFEST) for b in _backup_dirs(store_root)}


def _restore_states(manifests: dict[str, dict[str, Any]]) -> dict[str, str]:
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


def _state(manifests: dict[str, dict[str, Any]], name: str, want: dict[str, str]) -> str:
    return want.get(name, manifests[name].get("state", ""))


def _settle_restores(store_root: Path) -> None:
    """Write the states ``_restore_states`` gives (after a restore commits, or was killed right after)."""
    manifests = _manifests(store_root)
    for name, state in _restore_states(manifests).items():
        if manifests[name].get("state") != state:
            manifests[name]["state"] = state
            write_json_atomic(_backup_root(store_root) / name / MANIFEST, manifests[name])
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
    manifests = _manifests(store_root)
    want = _restore_states(manifests)
    root = _backup_root(store_root)
    return [_summary(root / name, m, _state(manifests, name, want)) for name, m in manifests.items()]


def pending(store_root: Path) -> list[str]:
    """Timestamps of interrupted changes and restores (the next ``Change`` finishes them)."""
    return [b.name for b in _backup_dirs(store_root) if read_json(b / MANIFEST).get("state") in UNFINISHED]


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


RESTORE_STAGING = "restore-"


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
    bdir = _backup_root(root) / timestamp
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
    manifests = _manifests(root)
    want = _restore_states(manifests)
    manifest = manifests[timestamp]
    state = _state(manifests, timestamp, want)
    if state not in UNDOABLE:
        raise UsageError(f"backup {timestamp} is already {state}; nothing to restore")
    steps = read_journal(bdir)
    paths = {s["path"] for s in steps}
    for later, m in manifests.items():
        # restores only return paths to an earlier state; interrupted changes are rolled back first
        if later <= timestamp or m.get("restores") or _state(manifests, later, want) != COMPLETE:
            continue
        if any(_overlaps(s["path"], p) for s in read_journal(_backup_root(root) / later) for p in paths):
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


def manifest_of(store_root: Path, timestamp: str) -> dict[str, Any]:
    """The manifest of one backup (for tests and tools)."""
    path = _backup_root(Path(store_root)) / timestamp / MANIFEST
    if not path.is_file():
        raise NotFoundError(f"{store_root}: no backup {timestamp!r}")
    return read_json(path)
