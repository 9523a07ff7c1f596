"""What the timer service leaves on disk when it holds ``timerMaxPending`` timers (rmq's own; issue
41): the timers due at or after the *horizon* stay in the timer queue and are read again later, so
that a flood of far-future timers never keeps a due one out of memory.

Invariant: every timer-queue unit below the service's read position whose due time lies before the
horizon is held in memory or delivered; the others are *deferred*, the lowest such offset and the
earliest such due time noted (``Deferred``). When the memory is full, the later half of what is held
goes back to disk (``cut``: the horizon moves down to the first due time of that half). A *pass*
(``Pass``) reads the queue again from the lowest deferred offset when the earliest deferred time
comes near, holding what falls before its target horizon.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass
class Deferred:
    """The timers left on disk: the lowest queue offset and the earliest due time among them."""

    first: int | None = None
    due: int | None = None

    def note(self, offset: int, due: int) -> None:
        self.first = offset if self.first is None else min(self.first, offset)
        self.due = due if self.due is None else min(self.due, due)

    def merge(self, other: Deferred) -> None:
        if other.first is not None and other.due is not None:
            self.note(other.first, other.due)


@dataclass
class Pass:
    """A re-read of the timer queue from ``pos`` up to the read position: a unit due from the
    service's horizon (before it everything is held already) to ``target`` is held, later ones are
    noted in ``found``; at its end ``target`` is the horizon and ``found`` what is deferred."""

    pos: int
    target: int | None = None  # None: no bound
    found: Deferred = field(default_factory=Deferred)


def before(due: int, horizon: int | None) -> bool:
    """Whether a timer due at ``due`` falls before ``horizon`` (None: no horizon)."""
    return horizon is None or due < horizon


def lower(horizon: int | None, cut_at: int) -> int:
    return cut_at if horizon is None else min(horizon, cut_at)


def cut(dues: list[int], now: int, lead: int = 0) -> int | None:
    """The due time from which the held timers (their sorted ``dues``) go back to disk: the median
    or later, and after ``now`` (the due ones stay); after the earliest too, unless even that is
    more than ``lead`` ms away (a pass reads it again in time: so timers that all share one due
    time, as rolled ones share their window's slot, can go back too). None when nothing can go."""
    if not dues:
        return None
    floor = bisect.bisect_right(dues, max(dues[0], now)) if dues[0] <= now + lead else 0
    index = max(len(dues) // 2, floor)
    return dues[index] if index < len(dues) else None
