"""Locks: the broker's POSIX lock on ``lock`` and the rmq-vs-rmq ``flock`` on ``.rmq-backup/.lock``."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from rmqcli.errors import StoreBusyError
from rmqcli.ops.safety.journal import BACKUP_DIR, LOCK_NAME, fsync_dir

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


class StoreLocks:
    """The rmq-vs-rmq ``flock`` on ``.rmq-backup/.lock`` and the broker's POSIX lock on ``lock``.

    Fails closed: when ``lock`` exists but cannot be locked (a broker holds it, or it cannot be
    opened or locked at all) ``StoreBusyError`` is raised, unless ``force`` (then no broker lock is held).
    """

    def __init__(self, store_root: Path, *, force: bool = False):
        broot = Path(store_root) / BACKUP_DIR
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
