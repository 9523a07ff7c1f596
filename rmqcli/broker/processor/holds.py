"""``PullRequestHoldService``: the long-polling pulls waiting for a message (protocol.md B.7).

``pull.hold`` waits here per queue; the message store's arrival listener wakes the queue's waiters.
4.9.8's service also checks every held pull once a round (``checkHoldRequest``: every 5 s with
``longPollingEnable``, else every ``shortPollingTimeMills``), rounds counted from its start;
``next_check`` gives the time of the next round.
"""

from __future__ import annotations

import asyncio
import enum
import math
import time


class Woken(enum.Enum):
    """Why a held pull's wait ended."""

    ARRIVED = enum.auto()  # a message reached its queue
    RELEASED = enum.auto()  # the group's master is back: answer now (``release_all``)
    TIMEOUT = enum.auto()  # the wait's time passed


class HoldService:
    """``PullRequestHoldService``: the waiters of held pulls per queue, woken when a message arrives.
    A waiter leaves its queue's list when its wait ends, however it ends."""

    def __init__(self, check_interval: float = 5.0) -> None:
        self.waiters: dict[tuple[str, int], list[asyncio.Future[bool]]] = {}
        self.check_interval = max(check_interval, 0.01)  # a round at most every 10 ms
        self.started = time.monotonic()

    def next_check(self, now: float) -> float:
        """The monotonic time of the service's next ``checkHoldRequest`` round after ``now``."""
        rounds = math.floor((now - self.started) / self.check_interval) + 1
        return self.started + rounds * self.check_interval

    async def wait(self, topic: str, queue_id: int, timeout: float) -> Woken:
        """Hold until a message arrives in the queue, ``release_all``, or ``timeout`` seconds."""
        key = (topic, queue_id)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(key, []).append(future)
        try:
            released = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return Woken.TIMEOUT
        finally:
            held = self.waiters.get(key)
            if held is not None and future in held:
                held.remove(future)
                if not held:
                    del self.waiters[key]
        return Woken.RELEASED if released else Woken.ARRIVED

    def arrived(self, topic: str, queue_id: int) -> None:
        """``NotifyMessageArrivingListener.arriving``."""
        for future in self.waiters.pop((topic, queue_id), []):
            if not future.done():
                future.set_result(False)

    def release_all(self) -> None:
        """``notifyMasterOnline``: every held pull is answered now, whatever its queue holds, so
        that its consumer pulls from the master again."""
        waiters, self.waiters = self.waiters, {}
        for futures in waiters.values():
            for future in futures:
                if not future.done():
                    future.set_result(True)
