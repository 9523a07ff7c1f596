"""The broker's metrics with RocketMQ 5.1.1's names, types, help texts and labels
(``BrokerMetricsManager``, ``RemotingMetricsManager``, ``DefaultStoreMetricsManager``;
``metrics.md §3``).

``BrokerMetrics`` is made by the controller when ``metricsExporterType=PROM``; else ``NO_METRICS``,
whose recording methods do nothing (as 5.1.1's no-op instruments). The request paths call
``message_in`` (a send stored), ``message_out`` (a pull answered with messages), ``dlq`` (a message
diverted to its group's DLQ) and ``rpc`` (a request answered); the gauges are read at each scrape
from the broker's own tables: clients, subscription groups and offsets, the store's counters. A
scrape costs O(topics × groups × queues) dictionary reads and one store lookup per lag queue,
never a store scan.

rmq has no processor thread pools: ``rocketmq_processor_watermark`` reports 5.1.1's twelve
processors with 0 queued requests (rmq answers each request on its event loop as it comes).
"""

from __future__ import annotations

import inspect
import shutil
import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import TYPE_CHECKING

from formats import commitlog as fmt
from formats.commitlog import SCHEDULE_TOPIC
from formats.names import SYS_GROUP_PREFIX
from rmqcli.broker.metrics.api import NoMetrics
from rmqcli.broker.metrics.pop import PopMetrics
from rmqcli.broker.metrics.timer import TimerGauges
from rmqcli.broker.names import config_system_topics, is_system_topic
from rmqcli.metrics.registry import Meter, Point
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode, ResponseCode, version_desc

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.remoting.server.connection import Reply

MESSAGE_SIZE_BUCKETS = (1024, 4096, 524288, 1048576, 2097152, 4194304)  # metrics.md §1.5
RPC_LATENCY_BUCKETS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
PROCESSORS = (
    "send", "async_put", "pull", "ack", "query_message", "client_manager", "heartbeat", "lite_pull",
    "transaction", "consumer_manager", "admin", "reply",
)  # fmt: skip
# 209-211: 5.1.1's later names win in RemotingHelper's map (metrics.md §3.8)
_RESPONSE_NAMES = {209: "polling_full", 210: "polling_timeout", 211: "broker_not_exist"}
_DELAY_PROPERTIES = (fmt.PROPERTY_DELAY, "__STARTDELIVERTIME", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC")
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"
SCHEDULE_CONSUMER = "SCHEDULE_CONSUMER"  # the schedule service's group in the metrics (5.1.1)
STORAGE = {"storage_type": "local", "storage_medium": "disk"}


def message_type(properties: Mapping[str, str]) -> str:
    """``BrokerMetricsManager.getMessageType``: transaction, fifo, delay or normal (metrics.md §3.1)."""
    if properties.get("TRAN_MSG", "").lower() == "true":
        return "transaction"
    if "__SHARDINGKEY" in properties:
        return "fifo"
    if any(key in properties for key in _DELAY_PROPERTIES):
        return "delay"
    return "normal"


def is_system_group(group: str) -> bool:
    """``BrokerMetricsManager.isSystemGroup`` (5.1.1): the prefix compared lower-cased, unlike
    ``MixAll.isSysConsumerGroup``."""
    return group.lower().startswith(SYS_GROUP_PREFIX.lower())


def request_name(code: int) -> str:
    try:
        return RequestCode(code).name.lower()
    except ValueError:
        return str(code)


def response_name(code: int) -> str:
    if code in _RESPONSE_NAMES:
        return _RESPONSE_NAMES[code]
    try:
        return ResponseCode(code).name.lower()
    except ValueError:
        return str(code)


class BrokerMetrics(NoMetrics):
    """The 5.1.1 broker meter's instruments over the broker ``ctl``."""

    enabled = True

    def __init__(self, ctl: BrokerContext):
        self.ctl = ctl
        config = ctl.config
        common: dict[str, object] = dict(config.metrics.labels())
        if config.metrics.in_delta:
            common["aggregation"] = "delta"
        common.update(node_type="broker", cluster=config.broker_cluster_name, node_id=config.broker_name)
        self.meter = m = Meter(common)
        self._system_topics = config_system_topics(config)
        self._start_offset = ctl.writer.max_offset
        m.gauge("rocketmq_processor_watermark", "Request processor watermark", self._watermarks)
        m.gauge("rocketmq_broker_permission", "Broker permission", self._permission)
        self.messages_in = m.counter("rocketmq_messages_in_total", "Total number of incoming messages")
        self.throughput_in = m.counter("rocketmq_throughput_in_total", "Total traffic of incoming messages")
        self.message_size = m.histogram(
            "rocketmq_message_size", "Incoming messages size", MESSAGE_SIZE_BUCKETS
        )
        self.messages_out = m.counter("rocketmq_messages_out_total", "Total number of outgoing messages")
        self.throughput_out = m.counter("rocketmq_throughput_out_total", "Total traffic of outgoing messages")
        m.gauge(
            "rocketmq_producer_connections", "Producer connections", self._producers, protocol_type="remoting"
        )
        m.gauge(
            "rocketmq_consumer_connections", "Consumer connections", self._consumers, protocol_type="remoting"
        )
        from rmqcli.broker.metrics.lag import LagGauges

        lag = LagGauges(ctl, self.is_system)
        m.gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", lag.lag_messages)
        m.gauge("rocketmq_consumer_lag_latency", "Consumer lag time", lag.lag_latency)
        m.gauge("rocketmq_consumer_inflight_messages", "Consumer inflight messages", lag.inflight_messages)
        m.gauge("rocketmq_consumer_queueing_latency", "Consumer queueing time", lag.queueing_latency)
        m.gauge("rocketmq_consumer_ready_messages", "Consumer ready messages", lag.ready_messages)
        self.to_dlq = m.counter("rocketmq_send_to_dlq_messages_total", "Consumer send to DLQ messages")
        self.rpc_latency = m.histogram(
            "rocketmq_rpc_latency", "Rpc latency", RPC_LATENCY_BUCKETS, protocol_type="remoting"
        )
        m.gauge("rocketmq_storage_size", "Broker storage size", self._storage_size, **STORAGE)
        m.gauge(
            "rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", self._flush_behind, **STORAGE
        )
        m.gauge(
            "rocketmq_storage_dispatch_behind_bytes",
            "Broker dispatch behind bytes",
            self._dispatch_behind,
            **STORAGE,
        )
        m.gauge(
            "rocketmq_storage_message_reserve_time",
            "Broker message reserve time",
            self._reserve_time,
            **STORAGE,
        )
        self.timer = TimerGauges(ctl, m, STORAGE) if config.timer.wheel_enable else None
        self.pop = PopMetrics(ctl, m)

    def render(self, now_ms: int, openmetrics: bool = False, names: frozenset[str] | None = None) -> str:
        return self.meter.render(now_ms, openmetrics=openmetrics, names=names)

    def is_system_topic(self, topic: str) -> bool:
        return is_system_topic(topic, self._system_topics)

    def is_system(self, topic: str, group: str) -> bool:
        """``BrokerMetricsManager.isSystem``: a system topic or a system group."""
        return self.is_system_topic(topic) or is_system_group(group)

    # --- recorded -------------------------------------------------------------------------------
    def message_in(self, topic: str, properties: Mapping[str, str], count: int, size: int) -> None:
        """A send stored (``handlePutMessageResult``): ``count`` messages, ``size`` CommitLog bytes,
        under the stored topic; sends to retry and DLQ topics are not counted."""
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) or count <= 0:
            return
        labels = {
            "topic": topic,
            "message_type": message_type(properties),
            "is_system": self.is_system_topic(topic),
        }
        self.messages_in.add(count, **labels)
        self.throughput_in.add(size, **labels)
        self.message_size.record(size // count, **labels)

    def message_out(self, topic: str, group: str, count: int, size: int, retry: bool | None = None) -> None:
        """A pull answered with ``count`` messages of ``size`` bytes (not for retry or DLQ topics);
        a POP's (``retry``: from its pop-retry topic) under the topic it asked for, with ``is_retry``."""
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) or count <= 0:
            return
        system = self.is_system(topic, group)
        labels = {"topic": topic, "consumer_group": group, "is_system": system, "is_retry": retry}
        self.messages_out.add(count, **labels)
        self.throughput_out.add(size, **labels)

    def dlq(self, group: str, topic: str) -> None:
        system = self.is_system(topic, group)
        self.to_dlq.add(1, consumer_group=group, topic=topic, is_system=system)

    def scheduled(self, topic: str, read: int, stored: int) -> None:
        """A delay-level message delivered (``ScheduleMessageService``): read from the schedule
        topic by ``SCHEDULE_CONSUMER`` (``read`` bytes), counted in under its real topic as a
        delay message (``stored`` bytes; retry topics too: ``enableScheduleMessageStats``)."""
        self.message_out(SCHEDULE_TOPIC, SCHEDULE_CONSUMER, 1, read)
        labels = {"topic": topic, "message_type": "delay", "is_system": self.is_system_topic(topic)}
        self.messages_in.add(1, **labels)
        self.throughput_in.add(stored, **labels)
        self.message_size.record(stored, **labels)

    def timer_enqueued(self, topic: str) -> None:
        if self.timer is not None:
            self.timer.enqueued.add(1, topic=topic or None)

    def timer_dequeued(self, topic: str) -> None:
        if self.timer is not None:
            self.timer.dequeued.add(1, topic=topic or None)

    def revive_in(self, group: str, topic: str, kind: str, status: str) -> None:
        self.pop.revive_in.add(
            1, consumer_group=group, topic=topic, revive_message_type=kind, put_status=status
        )

    def revive_out(self, group: str, topic: str, queue_id: int, kind: str) -> None:
        self.pop.revive_out.add(
            1, consumer_group=group, topic=topic, queue_id=queue_id, revive_message_type=kind
        )

    def revive_retry(self, group: str, topic: str, status: str) -> None:
        self.pop.revive_retry.add(1, consumer_group=group, topic=topic, put_status=status)

    def rpc(self, code: int, response: int | None, millis: float, long_polling: bool, result: str) -> None:
        labels: dict[str, object] = {"request_code": request_name(code), "result": result}
        if response is not None:
            labels.update(response_code=response_name(response), is_long_polling=long_polling)
        self.rpc_latency.record(int(millis), **labels)

    # --- gauges -----------------------------------------------------------------------------------
    def _watermarks(self) -> Iterable[Point]:
        return [({"processor": name}, 0) for name in PROCESSORS]

    def _permission(self) -> Iterable[Point]:
        return [({}, self.ctl.config.broker_permission)]

    def _producers(self) -> Iterable[Point]:
        counts: dict[tuple[str, str], int] = {}
        for channels in self.ctl.clients.producers.values():
            for channel in channels.values():
                key = (channel.language.lower(), version_desc(channel.version).lower())
                counts[key] = counts.get(key, 0) + 1
        return [({"language": lang, "version": ver}, n) for (lang, ver), n in counts.items()]

    def _consumers(self) -> Iterable[Point]:
        counts: dict[tuple[str, str, str, str], int] = {}
        for group, info in self.ctl.clients.consumers.items():
            mode = _consume_mode(info.consume_type)
            for channel in info.channels.values():
                key = (group, channel.language.lower(), version_desc(channel.version).lower(), mode)
                counts[key] = counts.get(key, 0) + 1
        return [
            (
                {
                    "consumer_group": g,
                    "language": lang,
                    "version": ver,
                    "consume_mode": mode,
                    "is_system": is_system_group(g),
                },
                n,
            )  # fmt: skip
            for (g, lang, ver, mode), n in counts.items()
        ]

    def _storage_size(self) -> Iterable[Point]:
        try:
            usage = shutil.disk_usage(self.ctl.writer.root)
        except OSError:
            return []
        return [({}, usage.total - usage.free)]

    def _flush_behind(self) -> Iterable[Point]:
        # what the broker found at start was on disk already (the store's first flush covers it all)
        flushed = max(self.ctl.store.flushed_offset, self._start_offset)
        return [({}, max(self.ctl.writer.max_offset - flushed, 0))]

    def _dispatch_behind(self) -> Iterable[Point]:
        return [({}, self.ctl.ha.dispatch_behind())]

    def _reserve_time(self) -> Iterable[Point]:
        earliest = self.ctl.store.earliest_message_time()
        if earliest is None or earliest <= 0:
            return []
        return [({}, int(time.time() * 1000) - earliest)]


_HOLDING = frozenset({RequestCode.PULL_MESSAGE, 200050})  # a pull or a POP answered later was held


def timed(
    metrics: NoMetrics, req: RemotingCommand, reply: Reply | Awaitable[Reply]
) -> Reply | Awaitable[Reply]:
    """``reply`` recorded in ``rocketmq_rpc_latency`` once it is there (``writeResponse``): from the
    request's dispatch to its answer; an answer that comes later to a pull or POP was held (long
    polling); a request without an answer records nothing."""
    started = time.monotonic()

    def record(answer: Reply) -> None:
        if answer is None:
            return
        result = "oneway" if req.is_oneway else "success"
        held = req.code in _HOLDING and not isinstance(reply, RemotingCommand)
        metrics.rpc(req.code, answer.code, (time.monotonic() - started) * 1000, held, result)

    if not inspect.isawaitable(reply):
        record(reply)
        return reply

    async def later() -> Reply:
        answer = await reply
        record(answer)
        return answer

    return later()


def _consume_mode(consume_type: str) -> str:
    """``ConsumeType`` lower-cased as 5.1.1 labels it: push, pull, pop."""
    return {"CONSUME_PASSIVELY": "push", "CONSUME_ACTIVELY": "pull", "CONSUME_POP": "pop"}.get(
        consume_type, consume_type.lower()
    )
