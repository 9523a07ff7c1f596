"""What the broker's request paths record in its metrics (``rmqcli.broker.metrics.broker``), and
the recorder of a broker whose metrics are off: every recording a no-op, as 5.1.1's no-op
instruments."""

from __future__ import annotations

from collections.abc import Mapping


class NoMetrics:
    """Metrics off: every recording is a no-op."""

    enabled = False

    def message_in(self, topic: str, properties: Mapping[str, str], count: int, size: int) -> None:
        pass

    def message_out(self, topic: str, group: str, count: int, size: int, retry: bool | None = None) -> None:
        pass

    def dlq(self, group: str, topic: str) -> None:
        pass

    def rpc(self, code: int, response: int | None, millis: float, long_polling: bool, result: str) -> None:
        pass

    def scheduled(self, topic: str, read: int, stored: int) -> None:
        pass

    def timer_enqueued(self, topic: str) -> None:
        pass

    def timer_dequeued(self, topic: str) -> None:
        pass

    def revive_in(self, group: str, topic: str, kind: str, status: str) -> None:
        pass

    def revive_out(self, group: str, topic: str, queue_id: int, kind: str) -> None:
        pass

    def revive_retry(self, group: str, topic: str, status: str) -> None:
        pass


NO_METRICS = NoMetrics()
