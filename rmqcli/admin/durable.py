"""Replacing a file so that a crash leaves the old one or the new one, never half of either: the
files the admin writes (exports) and the broker's ACL file. Standard library only: cheap to import
from a command or from the broker."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_file(path: Path, data: bytes, *, keep_mode: bool = False) -> None:
    """Write ``data`` to a new file beside ``path``, fsync it, rename it into place and fsync the
    directory; ``keep_mode``: the new file takes the mode of the one it replaces (else mkstemp's,
    0600). ``OSError`` on failure, the file beside removed."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if keep_mode and path.exists():
            os.chmod(temp, path.stat().st_mode & 0o7777)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
