"""Staging directories: ``STORE/.rmq-staging/<name>/``, filled by a command and swapped in by
``Change.replace_dir``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rmqcli.errors import UsageError
from rmqcli.ops.safety.journal import STAGING_DIR, fsync_dir


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


def remove_staging(store_root: Path, name: str) -> None:
    """Remove ``STORE/.rmq-staging/<name>/`` (whatever it holds) and ``.rmq-staging`` when it is empty."""
    root = Path(store_root).absolute() / STAGING_DIR
    if name and "/" not in name and name not in (".", ".."):
        shutil.rmtree(root / name, ignore_errors=True)
    if root.is_dir():
        remove_empty_staging(Path(store_root).absolute())


def remove_empty_staging(store_root: Path) -> None:
    """Remove the empty directories left in ``.rmq-staging`` (and it, when empty) after swaps."""
    staging = store_root / STAGING_DIR
    for dirpath, _dirs, _files in sorted(os.walk(staging, topdown=False), key=lambda w: -len(w[0])):
        try:
            Path(dirpath).rmdir()
        except OSError:
            pass
    if not staging.exists():
        fsync_dir(store_root)
