"""Sends waiting for their replicas: the ``GroupCommitRequest``s a master holds until enough
replicas acknowledged an offset (``HAService.GroupTransferService``; DLedger's pending appends),
each answered once: by the replicas, by its deadline, or when the member stops leading."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

Outcome = TypeVar("Outcome")
Waiter = tuple[int, float, Callable[[Outcome], None]]  # the offset needed, the deadline, the answer


class SendWaiters(Generic[Outcome]):
    """Waiting sends in arrival order: the offset each needs, its deadline and its callback."""

    def __init__(self) -> None:
        self._items: list[Waiter[Outcome]] = []

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, next_offset: int, wait_seconds: float, callback: Callable[[Outcome], None]) -> None:
        self._items.append((next_offset, time.monotonic() + wait_seconds, callback))

    def answer(self, covered: Callable[[int], bool], outcome: Outcome) -> None:
        """Answer every send whose offset ``covered`` accepts."""
        if self._items:
            self._answer(lambda item: covered(item[0]), outcome)

    def expire(self, outcome: Outcome) -> None:
        """Answer the sends past their deadline."""
        if self._items:
            now = time.monotonic()
            self._answer(lambda item: item[1] < now, outcome)

    def fail_all(self, outcome: Outcome) -> None:
        items, self._items = self._items, []
        for _offset, _deadline, callback in items:
            callback(outcome)

    def _answer(
        self, chosen: Callable[[tuple[int, float, Callable[[Outcome], None]]], bool], outcome: Outcome
    ) -> None:
        done = [item for item in self._items if chosen(item)]
        if done:
            self._items = [item for item in self._items if not chosen(item)]
            for _offset, _deadline, callback in done:
                callback(outcome)
