"""The change: applies a plan's steps to a store, each backed up and journalled before it is done."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any

from rmqcli.errors import CorruptDataError, NotFoundError, UsageError
from rmqcli.ops.safety.backups import create_backup_dir, finish_unfinished, now, settle_restores
from rmqcli.ops.safety.journal import (
    BACKUP_DIR,
    COMPLETE,
    FORMAT_VERSION,
    JOURNAL,
    MANIFEST,
    NEW_SUFFIX,
    OPEN,
    RESTORE_SUFFIX,
    ROLLED_BACK,
    ROLLING_BACK,
    STAGING_DIR,
    ChangeError,
    append_journal,
    copy_piece,
    copy_stored,
    crashpoint,
    fsync_dir,
    fsync_tree,
    hash_file,
    listing_sha,
    piece_ok,
    read_journal,
    same_device,
    save_range,
    tree_listing,
    undo_all,
    write_durable,
    write_json_atomic,
    zero_range,
)
from rmqcli.ops.safety.locks import StoreLocks
from rmqcli.ops.safety.plan import PlanStep, outside_roots
from rmqcli.ops.safety.staging import remove_empty_staging


class InterruptedChangeError(ChangeError):
    """``Change`` found and rolled back an interrupted change: a plan made before is stale; re-run."""


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


def _piece(n: int) -> str:
    """The name of the backup piece of step ``n`` holding bytes (a directory's is ``NNNNN.dir``)."""
    return f"{n:05d}.bin"


def _listed(listing: list[dict[str, Any]]) -> dict[str, Any]:
    """What the journal keeps of a directory a step moves into the backup: its listing and size."""
    return {
        "files": listing,
        "sha256": listing_sha(listing),
        "stored": sum(e.get("size", 0) for e in listing),
    }


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
        self._locks: StoreLocks | None = None
        self._closed = False
        self._n = 0
        self._bytes = 0
        try:
            self._locks = StoreLocks(self.root, force=force_unlocked)
            rolled = finish_unfinished(self.root)
            if rolled and replan:
                raise InterruptedChangeError(
                    f"{self.root}: rolled back the interrupted {', '.join(rolled)}; the store is as it was "
                    "before that change: run the command again"
                )
            self.dir = create_backup_dir(self.root)
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

    def _begin_on(self, rel: str, directory: bool = False) -> tuple[str, Path, int]:
        """``_begin`` of a step on a file (or directory) that must exist: ``NotFoundError`` if not."""
        rel, path, n = self._begin(rel)
        if not (path.is_dir() if directory else path.is_file()):
            raise NotFoundError(f"{rel}: no such {'directory' if directory else 'file'} in {self.root}")
        return rel, path, n

    def _name(self, path: Path) -> str:
        """How the journal names ``path`` (store-relative, or absolute in an extra root)."""
        return _rel(Path(os.path.abspath(path)), self.root, self.roots)

    def _journal(self, record: dict[str, Any]) -> None:
        append_journal(self.dir, record)
        self._bytes += record.get("stored", 0) + record.get("zeros", 0)
        crashpoint()

    def _back_up(self, fd: int, n: int, start: int, length: int, record: dict[str, Any]) -> int:
        """Save bytes [start, start + length) of ``fd`` as the piece of step ``n``, fsynced, then
        journal the step (``record`` with the piece's name, sizes and sha256): both are durable
        before the step touches the store. Returns the bytes stored (a zero tail is only counted).
        """
        piece = _piece(n)
        stored, zeros, sha = save_range(fd, start, length, self.dir / piece)
        fsync_dir(self.dir)
        crashpoint()
        self._journal({"n": n, **record, "piece": piece, "stored": stored, "zeros": zeros, "sha256": sha})
        return stored

    def _move_to_backup(self, path: Path, piece: str) -> None:
        """Rename ``path`` (a file or directory on the backup's filesystem, its step journalled
        already) into the backup as ``piece``; both directories fsynced."""
        os.rename(path, self.dir / piece)
        fsync_dir(path.parent)
        fsync_dir(self.dir)
        crashpoint()

    def _back_up_copy(self, path: Path, n: int, record: dict[str, Any]) -> None:
        """``_back_up`` of the whole file ``path``, as a copy."""
        fd = os.open(path, os.O_RDONLY)
        try:
            self._back_up(fd, n, 0, os.fstat(fd).st_size, {**record, "mode": "copy"})
        finally:
            os.close(fd)

    def _back_up_link(self, path: Path, n: int, record: dict[str, Any]) -> bool:
        """Back up ``path`` as a hard link in the backup, then journal the step (``record``);
        ``False`` when it cannot be linked (e.g. another filesystem): nothing is done then."""
        piece = _piece(n)
        try:
            os.link(path, self.dir / piece)
        except OSError:
            return False
        size, sha = hash_file(self.dir / piece)
        fsync_dir(self.dir)
        crashpoint()
        self._journal(
            {"n": n, **record, "mode": "link", "piece": piece, "stored": size, "zeros": 0, "sha256": sha}
        )
        return True

    # --- operations ---------------------------------------------------------------------------
    @_wrap_os_errors
    def truncate_file(self, rel: str, new_size_valid: int, *, keep_size: bool = True) -> None:
        """Back up bytes [new_size_valid, EOF), then zero them (``keep_size``) or cut the file there."""
        rel, path, n = self._begin_on(rel)
        fd = os.open(path, os.O_RDWR)
        try:
            orig = os.fstat(fd).st_size
            if not 0 <= new_size_valid <= orig:
                raise UsageError(f"{rel}: cannot truncate to {new_size_valid}; the file has {orig} bytes")
            if new_size_valid == orig:
                return
            record = {
                "action": "truncate",
                "path": rel,
                "offset": new_size_valid,
                "orig_size": orig,
                "keep_size": keep_size,
            }
            stored = self._back_up(fd, n, new_size_valid, orig - new_size_valid, record)
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
        rel, path, n = self._begin_on(rel)
        if offset < 0:
            raise UsageError(f"{rel}: negative offset {offset}")
        fd = os.open(path, os.O_RDWR)
        try:
            orig = os.fstat(fd).st_size
            start = min(offset, orig)
            end = min(offset + len(data), orig)
            record = {"action": "write", "path": rel, "offset": start, "length": len(data), "orig_size": orig}
            self._back_up(fd, n, start, end - start, record)
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
        rel, path, n = self._begin_on(rel)
        record = {"action": "delete", "path": rel}
        if same_device(path.parent, self.dir):
            piece = _piece(n)
            size, sha = hash_file(path)
            self._journal(
                {"n": n, **record, "piece": piece, "mode": "move", "stored": size, "zeros": 0, "sha256": sha}
            )
            self._move_to_backup(path, piece)
        else:
            self._back_up_copy(path, n, record)
            path.unlink()
            fsync_dir(path.parent)
            crashpoint()

    @_wrap_os_errors
    def discard_file(self, rel: str) -> None:
        """Delete the file without a backup (``rmq clean --no-backup``): journalled, never undone. A
        re-run after a kill finds it gone; a file already gone is a step with nothing to do."""
        rel, path, n = self._begin(rel)
        if not path.is_file():
            return
        self._journal({"n": n, "action": "discard", "path": rel, "size": path.stat().st_size})
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
        made = []
        parent = path.parent
        while not parent.exists():
            made.append(self._name(parent))
            parent = parent.parent
        made.reverse()
        record = {
            "action": "replace",
            "path": rel,
            "existed": path.exists(),
            "made_dirs": made,
            "new_size": new_size,
        }
        if not record["existed"]:
            self._journal({"n": n, **record})
        elif not self._back_up_link(path, n, record):
            self._back_up_copy(path, n, record)
        for made_dir in made:
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
            record = {
                "action": "write",
                "path": rel,
                "offset": start,
                "length": old_end - offset,
                "orig_size": cur,
            }
            self._back_up(fd, n, start, end - start, record)
            if cur != old_size:
                os.ftruncate(fd, old_size)
            copy_stored(piece, step["stored"], fd, offset, crash_midway=True)
            zero_range(fd, offset + step["stored"], min(old_end, old_size))
            os.fsync(fd)
        finally:
            os.close(fd)
        crashpoint()

    def apply_file_step(self, step: PlanStep, staged: Path) -> bool:
        """Apply a plan step every staged repair applies alike: ``delete`` a file, ``truncate`` one
        by its ``bytes_removed`` (zeros keep its size), ``replace-dir`` by its copy under ``staged``;
        False for any other action, which is the caller's own."""
        if step.action == "delete":
            self.delete_file(step.path)
        elif step.action == "truncate":
            valid = (self.root / step.path).stat().st_size - step.bytes_removed
            self.truncate_file(step.path, valid, keep_size=True)
        elif step.action == "replace-dir":
            self.replace_dir(step.path, staged / step.path)
        else:
            return False
        return True

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
        record = {"action": "replace-dir", "path": rel, "existed": existed, "staged": str(staged)}
        self._journal({"n": n, **record, "piece": piece, **_listed(listing)})
        if existed:
            self._move_to_backup(path, piece)
        fsync_tree(staged)
        os.rename(staged, path)
        fsync_dir(path.parent)
        fsync_dir(staged.parent)
        crashpoint()

    @_wrap_os_errors
    def delete_dir(self, rel: str) -> None:
        """Move the directory into the backup (it must be on the store root's filesystem)."""
        rel, path, n = self._begin_on(rel, directory=True)
        if not same_device(path, self.dir) or path.is_mount():
            raise ChangeError(f"{rel}: on another filesystem than {self.root}; cannot move it to the backup")
        piece = f"{n:05d}.dir"
        record = {"action": "delete-dir", "path": rel, "mode": "move"}
        self._journal({"n": n, **record, "piece": piece, **_listed(tree_listing(path))})
        self._move_to_backup(path, piece)

    # --- the end ------------------------------------------------------------------------------
    @_wrap_os_errors
    def commit(self) -> Path:
        """Mark the change complete (fsynced); returns its backup directory."""
        if self._closed:
            raise ChangeError(f"change {self.dir.name} is already committed or rolled back")
        steps = read_journal(self.dir)
        self.manifest.update(state=COMPLETE, steps=steps, bytes=self._bytes, finished=now())
        write_json_atomic(self.dir / MANIFEST, self.manifest)
        crashpoint()
        self._closed = True
        try:
            if self.manifest.get("restores"):
                settle_restores(self.root)  # the restored change is now `restored`
            remove_empty_staging(self.root)
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
