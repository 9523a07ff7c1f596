"""``ConsumeQueue.getOffsetInQueueByTime`` (4.9.x), over any way of reading a queue's store times."""

from __future__ import annotations

from collections.abc import Callable


def offset_by_time(low: int, end: int, store_time: Callable[[int], int | None], timestamp: int) -> int:
    """The queue offset in ``[low, end)`` whose message was stored at ``timestamp``, otherwise the
    closer neighbour; after the last message: the last one; 0 for an empty queue. ``store_time``
    gives a message's store time by queue offset (None: unreadable, taken as -1)."""
    high = end - 1
    if high < low:
        return 0
    times: dict[int, int] = {}

    def ts(offset: int) -> int:
        if offset not in times:
            value = store_time(offset)
            times[offset] = -1 if value is None else value
        return times[offset]

    lo, hi = low, high
    while lo < hi:
        mid = (lo + hi) // 2
        if ts(mid) < timestamp:
            lo = mid + 1
        else:
            hi = mid
    if ts(lo) == timestamp or lo == low:
        return lo
    if ts(lo) < timestamp:  # every message is older
        return lo
    before = lo - 1
    return before if timestamp - ts(before) < ts(lo) - timestamp else lo
