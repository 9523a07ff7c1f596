"""``PullRequestHoldService``: the long-polling pulls waiting for a message (PROTOCOL.md B.7).

``pull.hold`` waits on a future per queue; the message store's arrival listener completes them.
"""

from __future__ import annotations

import asyncio


class HoldService:
    """``PullRequestHoldService``: futures of held pulls per queue, completed when a message arrives."""

    def __init__(self) -> None:
        self.waiters: dict[tuple[str, int], list[asyncio.Future[bool | None]]] = {}

    def wait(self, topic: str, queue_id: int) -> asyncio.Future[bool | None]:
        future = asyncio.get_running_loop().create_future()
        self.waiters.setdefault((topic, queue_id), []).append(future)
        return future

    def arrived(self, topic: str, queue_id: int) -> None:
        """``NotifyMessageArrivingListener.arriving``."""
        for future in self.waiters.pop((topic, queue_id), []):
            if not future.done():
                future.set_result(None)

    def release_all(self) -> None:
        """``notifyMasterOnline``: every held pull is answered now, whatever its queue holds
        (a waiter's result is True), so that its consumer pulls from the master again."""
        waiters, self.waiters = self.waiters, {}
        for futures in waiters.values():
            for future in futures:
                if not future.done():
                    future.set_result(True)
