"""The timer families of a 5.1.1 broker (``TimerMetricManager`` via ``DefaultStoreMetricsManager``,
``metrics.md §3.10``), over rmq's timer service (``rmqcli.broker.timer.service``): only with
``timerWheelEnable=true``.

``rocketmq_timer_enqueue_lag``: timer-queue units not yet read; ``..._enqueue_latency``: seconds
(as 5.1.1 computes it, though declared ms) from the store time of the last timer that was due
when read, when that was within the last 2 s, else 0; ``..._dequeue_lag``: timers held and due
now; ``..._dequeue_latency``: seconds the reading is behind the clock; ``rocketmq_timing_messages``:
per topic, the timers waiting (the timer metrics file's counts); the two counters: timers read
into the wheel and delivered, by real topic.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rmqcli.metrics.registry import Counter, Meter, Point

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.broker.timer.service import TimerService

RECENT_MS = 2000


class TimerGauges:
    def __init__(self, ctl: BrokerContext, meter: Meter, labels: dict[str, str]):
        self.ctl = ctl
        meter.gauge("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag", self._enqueue_lag, **labels)
        meter.gauge(
            "rocketmq_timer_enqueue_latency", "Timer enqueue latency", self._enqueue_latency, **labels
        )
        meter.gauge("rocketmq_timer_dequeue_lag", "Timer dequeue messages lag", self._dequeue_lag, **labels)
        meter.gauge(
            "rocketmq_timer_dequeue_latency", "Timer dequeue latency", self._dequeue_latency, **labels
        )
        meter.gauge("rocketmq_timing_messages", "Current message number in timing", self._timing, **labels)
        self.enqueued: Counter = meter.counter(
            "rocketmq_timer_enqueue_total", "Total number of timer enqueue", **labels
        )
        self.dequeued: Counter = meter.counter(
            "rocketmq_timer_dequeue_total", "Total number of timer dequeue", **labels
        )

    def _service(self) -> TimerService:
        from rmqcli.broker.timer.service import timer_service

        return timer_service(self.ctl)

    def _enqueue_lag(self) -> Iterable[Point]:
        from rmqcli.broker.timer.message import TIMER_TOPIC

        scanned = self._service().scanned
        high = self.ctl.store.max_offset(TIMER_TOPIC, 0)
        return [({}, max(high - (high if scanned is None else scanned), 0))]

    def _enqueue_latency(self) -> Iterable[Point]:
        last = self._service().due_enqueued
        now = int(time.time() * 1000)
        if last is None or now - last[0] > RECENT_MS:
            return [({}, 0)]
        return [({}, (now - last[1]) // 1000)]

    def _dequeue_lag(self) -> Iterable[Point]:
        heap, now = self._service().heap, int(time.time() * 1000)
        due, todo = 0, [0] if heap else []
        while todo:  # the held timers due by now: a walk of the heap's top, never all of it
            i = todo.pop()
            if i < len(heap) and heap[i][0] <= now:
                due += 1
                todo += (2 * i + 1, 2 * i + 2)
        return [({}, due)]

    def _dequeue_latency(self) -> Iterable[Point]:
        service, now = self._service(), int(time.time() * 1000)
        read = service.files.read_time(now) if service.files is not None else now
        return [({}, max(now - read, 0) // 1000)]

    def _timing(self) -> Iterable[Point]:
        files = self._service().files
        counts = files.metrics if files is not None else {}
        return [({"topic": topic}, n) for topic, n in sorted(counts.items())]
