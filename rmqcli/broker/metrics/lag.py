"""The five consumer gauges of a 5.1.1 broker (``ConsumerLagCalculator``, ``metrics.md §3.6``):
lag messages and latency, in-flight messages, queueing latency, ready messages, per online
consumer group and subscribed topic.

Enumeration as ``processAllGroup`` with ``useStaticSubscription=false``: every subscription group
with an online consumer, each topic its consumers subscribe to but retry topics, topics without a
config and topics neither readable nor writable (with the broker's permission); per write queue.
rmq counts a POP group as any other (by its committed offsets; 5.1.1 adds its pop buffer's
in-flight messages), and counts tag-filtered lag exactly (5.1.1 estimates it by filtering
``estimateAccumulation``'s consume-queue sample: the same when every unit is scanned).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from formats.names import PERM_READ, PERM_WRITE
from rmqcli.metrics.registry import Point

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

RETRY_PREFIX = "%RETRY%"


@dataclass(frozen=True)
class _Queue:
    group: str
    topic: str
    queue_id: int
    max: int
    commit: int  # -1: none
    pull: int  # -1: none


class LagGauges:
    """The gauges' callbacks over the broker ``ctl``; ``is_system(topic, group)`` as the broker's
    metrics count it (``BrokerMetricsManager.isSystem``)."""

    def __init__(self, ctl: BrokerContext, is_system: Callable[[str, str], bool]):
        self.ctl = ctl
        self.is_system = is_system

    def _pairs(self) -> Iterator[tuple[str, str]]:
        ctl = self.ctl
        broker_perm = ctl.config.broker_permission
        for group, info in list(ctl.clients.consumers.items()):
            if ctl.groups.find(group) is None or not info.channels:
                continue
            for topic in list(info.subscriptions):
                if topic.startswith(RETRY_PREFIX):
                    continue
                config = ctl.topics.get(topic)
                if config is None or not config.get("perm", 0) & broker_perm & (PERM_READ | PERM_WRITE):
                    continue
                yield group, topic

    def _queues(self, group: str, topic: str) -> Iterator[_Queue]:
        ctl = self.ctl
        config = ctl.topics.get(topic) or {}
        for queue_id in range(int(config.get("writeQueueNums", 0))):
            high = max(ctl.store.max_offset(topic, queue_id), 0)
            yield _Queue(
                group,
                topic,
                queue_id,
                high,
                ctl.offsets.query(group, topic, queue_id),
                ctl.offsets.query_pull(group, topic, queue_id),
            )

    def _labels(self, group: str, topic: str) -> dict[str, object]:
        system = self.is_system(topic, group)
        return {"consumer_group": group, "topic": topic, "is_retry": False, "is_system": system}

    def _each(
        self, per_queue: Callable[[_Queue], int], combine: Callable[[list[int]], int]
    ) -> Iterable[Point]:
        points = []
        for group, topic in self._pairs():
            values = [per_queue(q) for q in self._queues(group, topic)]
            points.append((self._labels(group, topic), combine(values)))
        return points

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int | None:
        units = self.ctl.store.units(topic, queue_id, offset, 1)
        return self.ctl.store.store_timestamp(units[0]) if units else None

    def _latency(self, q: _Queue, offset: int) -> int:
        """now - the store time of the message at ``offset``; 0 when there is none."""
        if offset >= q.max:
            return 0
        stored = self._store_time(q.topic, q.queue_id, offset)
        return 0 if stored is None else max(int(time.time() * 1000) - stored, 0)

    # --- the callbacks ------------------------------------------------------------------------------
    def lag_messages(self) -> Iterable[Point]:
        return self._each(lambda q: max(q.max - (q.max if q.commit < 0 else q.commit), 0), sum)

    def lag_latency(self) -> Iterable[Point]:
        return self._each(lambda q: self._latency(q, q.max if q.commit < 0 else q.commit), _earliest)

    def inflight_messages(self) -> Iterable[Point]:
        def inflight(q: _Queue) -> int:
            pull = max(q.pull, 0)
            commit = pull if q.commit < 0 else q.commit
            return max(pull - commit, 0)

        return self._each(inflight, sum)

    def queueing_latency(self) -> Iterable[Point]:
        return self._each(lambda q: self._latency(q, max(q.pull, 0)), _earliest)

    def ready_messages(self) -> Iterable[Point]:
        return self._each(lambda q: max(q.max - (q.max if q.pull < 0 else q.pull), 0), sum)


def _earliest(latencies: list[int]) -> int:
    """The latency of the queue whose message waits longest (the minimum store time)."""
    return max(latencies, default=0)
