"""Bytes per second of an HA link, as RocketMQ 5's ``FlowMonitor`` reports them to ``haStatus``:
what the last whole second moved."""

from __future__ import annotations

import time
from collections.abc import Callable


class FlowMonitor:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._second = int(clock())
        self._current = 0
        self._last = 0

    def add(self, count: int) -> None:
        self._roll()
        self._current += count

    def per_second(self) -> int:
        self._roll()
        return self._last

    def _roll(self) -> None:
        now = int(self.clock())
        if now != self._second:
            self._last = self._current if now == self._second + 1 else 0
            self._current = 0
            self._second = now
