"""The consumer page's lag over time: a group's total lag (``consumerProgress -g``'s diff total)
sampled every ``lag_interval`` seconds while a page watches it. Bounded: at most ``MAX_GROUPS``
groups, ``MAX_POINTS`` points each; a group no page has asked for in ``FORGET_AFTER`` seconds is
dropped."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from rmqcli.dashboard.answers import one_line

MAX_GROUPS = 32
MAX_POINTS = 720
FORGET_AFTER = 600.0


def total_lag(progress: dict[str, Any]) -> int:
    """consumerProgress's ``Diff Total`` (the queues' broker offset minus consumer offset, summed)."""
    return int(progress["diffTotal"])


class LagHistory:
    """Samples of watched groups, taken by one daemon thread; ``sample(group)`` is the group's
    ``consumerProgress -g`` document (it raises what the request met)."""

    def __init__(self, sample: Callable[[str], dict[str, Any]], interval: float):
        self._sample = sample
        self.interval = interval
        self._points: dict[str, deque[dict[str, Any]]] = {}
        self._asked: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-history", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def watch(self, group: str) -> list[dict[str, Any]]:
        """The points of ``group`` so far; the first ask takes a sample at once and starts the
        watch (refused beyond ``MAX_GROUPS``: the oldest-asked group is dropped)."""
        with self._lock:
            known = group in self._points
            if not known:
                if len(self._points) >= MAX_GROUPS:
                    oldest = min(self._asked, key=self._asked.__getitem__)
                    del self._points[oldest], self._asked[oldest]
                self._points[group] = deque(maxlen=MAX_POINTS)
            self._asked[group] = time.monotonic()
        if not known:
            self._take(group)
        with self._lock:
            return list(self._points.get(group, ()))

    def _take(self, group: str) -> None:
        at = int(time.time() * 1000)
        try:
            point: dict[str, Any] = {"t": at, "lag": total_lag(self._sample(group))}
        except Exception as exc:  # noqa: BLE001 - a failed sample is a gap with its reason
            point = {"t": at, "lag": None, "error": one_line(exc)}
        with self._lock:
            if group in self._points:
                self._points[group].append(point)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            with self._lock:
                for group in [g for g, t in self._asked.items() if now - t > FORGET_AFTER]:
                    del self._points[group], self._asked[group]
                groups = list(self._points)
            for group in groups:
                self._take(group)
