"""Files replaced so that a crash leaves the old one or the new one, never half of either, and
directories fsynced so that the names made or removed in them last ("Nothing is lost").

The one primitive every writer of a whole file uses: the broker's ``config/*.json`` (with their
``.bak``), the ACL file (keeping its mode), the admin's exports. Standard library only, so a
command or the broker imports it without the store's modules.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

BAK_SUFFIX = ".bak"
TMP_SUFFIX = ".tmp"


def replace_file(
    path: Path, data: bytes, *, backup: bool = False, keep_mode: bool = False, sync_dir: bool = True
) -> None:
    """``path`` replaced by ``data``: written to a new file beside it and fsynced, renamed into
    place, then the directory fsynced (unless ``sync_dir`` is false: the caller fsyncs it once
    after several files). ``OSError`` on failure, the file beside removed.

    ``backup``: as the broker's ``MixAll.string2File`` (``ConfigManager.persist``): the file beside
    is ``NAME.tmp``, made as ``open`` makes a file (0666 less the umask, as the JVM does), and the
    previous content, if any, is kept as ``NAME.bak`` (fsynced) before the rename. Otherwise the
    file beside is a unique hidden ``.NAME.XXXXXXXX.tmp`` of mode 0600 (``mkstemp``'s).

    ``keep_mode``: the new file takes the mode of the one it replaces (the ACL file's).
    """
    if backup:
        temp = path.with_name(path.name + TMP_SUFFIX)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    else:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
        temp = Path(name)
    try:
        write_synced(fd, data)
        if backup:
            try:
                old = path.read_bytes()
            except FileNotFoundError:
                old = None
            if old is not None:
                bak = path.with_name(path.name + BAK_SUFFIX)
                write_synced(os.open(bak, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666), old)
        if keep_mode and path.exists():
            os.chmod(temp, path.stat().st_mode & 0o7777)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_dir(path.parent, missing_ok=False)


def write_synced(fd: int, data: bytes) -> None:
    """All of ``data`` written at ``fd``, fsynced; ``fd`` closed."""
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def fsync_dir(directory: Path, *, missing_ok: bool = True) -> None:
    """fsync a directory, so the names created or removed in it are durable; a directory that is
    not there is skipped (``missing_ok``) or raises ``OSError``."""
    if missing_ok and not directory.is_dir():
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
