"""The store pages' box: a request names a store by its index among ``rmq dashboard --store``'s
directories or by its path, and only those directories are ever opened.

A path is compared after resolving it (``..`` and symlinks followed), so ``STORE/..``, a symlink
out of a store or any other absolute path is refused (``Forbidden``, 403) with the list of what is
allowed; a relative path is refused too (the server's working directory is nobody's business)."""

from __future__ import annotations

from pathlib import Path

from rmqcli.dashboard.answers import Forbidden

SHOWN = 200  # characters of a refused reference quoted back


def allowed(stores: list[Path]) -> str:
    """The stores a request may name, on one line."""
    if not stores:
        return "none (start rmq dashboard with --store DIR)"
    return "; ".join(f"{i}: {p}" for i, p in enumerate(stores))


def store_at(stores: list[Path], ref: str) -> tuple[int, Path]:
    """(index, directory) of the given store ``ref`` names (an index or a path), else Forbidden."""
    found = _lookup(stores, ref)
    if found is None:
        quoted = ref if len(ref) <= SHOWN else ref[:SHOWN] + "…"
        raise Forbidden(f"{quoted!r} is not a store given to rmq dashboard; allowed: {allowed(stores)}")
    index, path = found
    try:
        now = path.resolve(strict=True)
    except (OSError, RuntimeError):
        now = None
    if now != path:  # the directory given was replaced since (a symlink, or gone)
        raise Forbidden(f"store {index}: {path} is no longer the directory rmq dashboard was given")
    return found


def _lookup(stores: list[Path], ref: str) -> tuple[int, Path] | None:
    if ref.isascii() and ref.isdigit():
        index = int(ref)
        return (index, stores[index]) if index < len(stores) else None
    try:
        path = Path(ref)
        if not path.is_absolute():
            return None
        real = path.resolve()
    except (OSError, RuntimeError, ValueError):  # a NUL, a symlink loop
        return None
    return (stores.index(real), real) if real in stores else None
