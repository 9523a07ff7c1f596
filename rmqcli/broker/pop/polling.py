"""``PopLongPollingService`` (RocketMQ 5.1.1): POP and NOTIFICATION requests held until a message
may be there, or their poll time ends.

A held request waits on a future under ``topic@group@queueId`` (queueId -1 for "every queue").
A new message in a queue wakes every group known to poll its topic (``arrived``, the store's
arrival listener); the revive service, an orderly ack and an expired order block wake one
``topic@group`` (``notify``). Bounded as 5.1.1: at most ``maxPopPollingSize`` held in all, at most
``popPollingSize`` + 1 per key; past either, POLLING_FULL.
"""

from __future__ import annotations

import asyncio
import enum

from rmqcli.broker.pop import constants as k


class Polling(enum.Enum):
    NOT_POLLING = 0
    SUSPENDED = 1
    FULL = 2
    TIMEOUT = 3


class PopLongPolling:
    def __init__(self, per_key: int, total: int):
        self.per_key = per_key
        self.max_total = total
        self.total = 0
        self.waiters: dict[str, list[asyncio.Future[None]]] = {}
        self.topic_groups: dict[str, set[str]] = {}  # topic -> groups that polled it

    def count(self, topic: str, group: str, queue_id: int) -> int:
        """Requests held under ``topic@group@queueId`` (POLLING_INFO)."""
        return sum(1 for f in self.waiters.get(k.lock_key(topic, group, queue_id), []) if not f.done())

    def check(self, topic: str, group: str, queue_id: int, poll_ms: int, remaining_ms: float) -> Polling:
        """``polling``'s decision before a request is held."""
        if poll_ms <= 0:
            return Polling.NOT_POLLING
        if self.total >= self.max_total:
            return Polling.FULL
        if remaining_ms <= 50:  # PopRequest.isTimeout: 50 ms before it expires
            return Polling.TIMEOUT
        held = self.waiters.get(k.lock_key(topic, group, queue_id))
        if held is not None and len(held) > self.per_key:
            return Polling.FULL
        return Polling.SUSPENDED

    async def wait(self, topic: str, group: str, queue_id: int, timeout: float) -> None:
        """Hold one request until woken or ``timeout`` seconds; ``check`` said SUSPENDED."""
        if len(self.topic_groups) < 100_000 or topic in self.topic_groups:  # popPollingMapSize
            self.topic_groups.setdefault(topic, set()).add(group)
        key = k.lock_key(topic, group, queue_id)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(key, []).append(future)
        self.total += 1
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            pass
        finally:
            self.total -= 1
            held = self.waiters.get(key)
            if held is not None:
                if future in held:
                    held.remove(future)
                if not held:
                    del self.waiters[key]
            if not future.done():
                future.cancel()

    def _wake(self, key: str) -> None:
        for future in self.waiters.pop(key, []):
            if not future.done():
                future.set_result(None)

    def notify(self, topic: str, group: str, queue_id: int = -1) -> None:
        """Wake ``topic@group@queueId`` and ``topic@group@-1`` (every queue when ``queue_id`` < 0)."""
        if queue_id < 0:
            prefix = f"{topic}{k.SPLIT}{group}{k.SPLIT}"
            for key in [key for key in self.waiters if key.startswith(prefix)]:
                self._wake(key)
            return
        self._wake(k.lock_key(topic, group, queue_id))
        self._wake(k.lock_key(topic, group, -1))

    def arrived(self, topic: str, queue_id: int) -> None:
        """The store's arrival listener: a message in ``topic``/``queue_id``."""
        if not self.waiters:
            return
        groups = self.topic_groups.get(topic)
        if groups:
            for group in list(groups):
                self.notify(topic, group, queue_id)
        elif topic.startswith(k.RETRY_PREFIX_POP):
            for normal, groups in self.topic_groups.items():  # %RETRY%<group>_<topic>
                for group in groups:
                    if topic == k.pop_retry_topic(normal, group):
                        self.notify(normal, group, -1)
                        return

    def release_all(self) -> None:
        for key in list(self.waiters):
            self._wake(key)
