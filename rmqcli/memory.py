"""The C allocator's free memory given back to the system (glibc; a no-op elsewhere).

Shared by the store checks, which free large arrays between passes, and the gRPC endpoint, which
refuses large requests that grpc has already read. glibc keeps freed chunks in its arenas, counted
in the RSS, until trimmed; and it raises its mmap threshold to the size of the last large block
freed, so that the next large blocks come from its arenas too.
"""

from __future__ import annotations

import functools
from typing import Any

_M_MMAP_THRESHOLD = -3  # glibc mallopt parameter
_MMAP_FROM = 1 << 20


@functools.cache
def _libc() -> Any:
    """glibc, loaded once (``find_library`` runs ``ldconfig -p``); None where there is none."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - both exist in glibc only
    except (OSError, AttributeError):
        return None
    return libc


def give_back_free_memory() -> None:
    """Return the allocator's free memory to the system (glibc ``malloc_trim``)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def map_large_blocks() -> None:
    """Have glibc give every block of 1 MiB or more its own mapping, unmapped when freed, instead of
    raising its threshold (up to 32 MiB) each time such a block is freed."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_FROM)
