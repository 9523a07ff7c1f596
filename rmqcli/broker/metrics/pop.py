"""The POP families of a 5.1.1 broker (``PopMetricsManager``, ``metrics.md §3.11``), over rmq's
POP (``rmqcli.broker.pop``).

The three revive counters as 5.1.1 counts them (a ck or ack put into the revive topic, read back
by the revive service, a message re-put into its pop-retry topic); per revive queue the messages
not yet read (``rocketmq_pop_revive_lag``) and how long the oldest checkpoint whose time has come
has waited (``rocketmq_pop_revive_latency``, ms). rmq puts each ck and ack into the store at once
(5.1.1 buffers them in ``PopBufferMergeService``): its two buffer gauges are 0, and the buffer's
scan histogram (``rocketmq_pop_buffer_scan_time_consume``) is not exported, there being no scan.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rmqcli.metrics.registry import Counter, Meter, Point

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


class PopMetrics:
    def __init__(self, ctl: BrokerContext, meter: Meter):
        self.ctl = ctl
        self.revive_in: Counter = meter.counter(
            "rocketmq_pop_revive_in_message_total", "Total number of put message to revive topic"
        )
        self.revive_out: Counter = meter.counter(
            "rocketmq_pop_revive_out_message_total", "Total number of get message from revive topic"
        )
        self.revive_retry: Counter = meter.counter(
            "rocketmq_pop_revive_retry_messages_total", "Total number of put message to pop retry topic"
        )
        meter.gauge("rocketmq_pop_revive_lag", "The processing lag of revive topic", self._lag)
        meter.gauge("rocketmq_pop_revive_latency", "The processing latency of revive topic", self._latency)
        meter.gauge("rocketmq_pop_offset_buffer_size", "Time number of buffered offset", lambda: [({}, 0)])
        meter.gauge(
            "rocketmq_pop_checkpoint_buffer_size", "The number of buffered checkpoint", lambda: [({}, 0)]
        )

    def _queues(self) -> list[int]:
        return list(range(self.ctl.config.pop.revive_queue_num))

    def _lag(self) -> Iterable[Point]:
        from rmqcli.broker.pop.service import pop_service

        revive = pop_service(self.ctl).revive
        points = []
        for qid in self._queues():
            high = self.ctl.store.max_offset(revive.topic, qid)
            state = revive.queues.get(qid)
            read = state.next_offset if state is not None and state.next_offset >= 0 else high
            points.append(({"queue_id": qid}, max(high - read, 0)))
        return points

    def _latency(self) -> Iterable[Point]:
        from rmqcli.broker.pop.service import pop_service

        revive = pop_service(self.ctl).revive
        now = int(time.time() * 1000)
        points = []
        for qid in self._queues():
            state = revive.queues.get(qid)
            due = [d for d in state.due.values() if d <= now] if state is not None else []
            points.append(({"queue_id": qid}, now - min(due) if due else 0))
        return points
