"""The families of apache/rocketmq-exporter that ``rmq exporter`` writes: names, declared help texts,
label names (``metrics.md §4.3``), and the broker runtime table's keys behind the
``rocketmq_brokeruntime_*`` families with the way each value is read.

A family is written with ``# HELP`` (the exporter's declared text) and ``# TYPE gauge`` (the
exporter writes neither, so Prometheus takes its families untyped; everything it exports is a
gauge in intent), labels in the exporter's order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    labels: tuple[str, ...]


def _f(name: str, help: str, *labels: str) -> Family:
    return Family(name, help, labels)


BROKER_LABELS = ("cluster", "brokerIP", "broker")
TOPIC_LABELS = ("cluster", "broker", "topic")
GROUP_LABELS = ("cluster", "broker", "topic", "group")
DIFF_LABELS = ("group", "topic", "countOfOnlineConsumers", "msgModel")
RUNTIME_LABELS = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")

GROUP_DIFF = _f("rocketmq_group_diff", "GroupDiff", *DIFF_LABELS)
GROUP_RETRY_DIFF = _f("rocketmq_group_retrydiff", "GroupRetryDiff", *DIFF_LABELS)
GROUP_COUNT = _f("rocketmq_group_count", "GroupCount", "caddr", "localaddr", "group")
PRODUCER_OFFSET = _f("rocketmq_producer_offset", "TopicOffset", *TOPIC_LABELS)
TOPIC_RETRY_OFFSET = _f("rocketmq_topic_retry_offset", "TopicRetryOffset", *TOPIC_LABELS)
TOPIC_DLQ_OFFSET = _f("rocketmq_topic_dlq_offset", "TopicRetryOffset", "cluster", "broker", "group")
PRODUCER_TPS = _f("rocketmq_producer_tps", "TopicPutNums", *TOPIC_LABELS)
PRODUCER_SIZE = _f("rocketmq_producer_message_size", "TopicPutMessageSize", *TOPIC_LABELS)
CONSUMER_TPS = _f("rocketmq_consumer_tps", "GroupGetNums", *GROUP_LABELS)
CONSUMER_SIZE = _f("rocketmq_consumer_message_size", "GroupGetMessageSize", *GROUP_LABELS)
SEND_BACK = _f("rocketmq_send_back_nums", "SendBackNums", *GROUP_LABELS)
CONSUMER_OFFSET = _f("rocketmq_consumer_offset", "GroupBrokerTotalOffset", *GROUP_LABELS)
GET_LATENCY = _f("rocketmq_group_get_latency_by_storetime", "GroupGetLatencyByStoreTime", *GROUP_LABELS)
BROKER_TPS = _f("rocketmq_broker_tps", "BrokerPutNums", *BROKER_LABELS)
BROKER_QPS = _f("rocketmq_broker_qps", "BrokerGetNums", *BROKER_LABELS)
COMMITLOG_DIFF = _f("rocketmq_broker_commitlog_diff", "brokerCommitLogDiffGauge", *BROKER_LABELS)
# rmq's own: whether each broker answered this scrape, and how long the scrape took
BROKER_UP = _f(
    "rmq_exporter_broker_up", "1 when the broker answered this scrape's requests, else 0", *BROKER_LABELS
)
SCRAPE_SECONDS = _f("rmq_exporter_scrape_duration_seconds", "Seconds the collection of this scrape took")
SCRAPE_ERRORS = _f("rmq_exporter_scrape_errors", "Requests of this scrape that failed, by kind", "kind")

ORDER = (
    GROUP_DIFF,
    GROUP_RETRY_DIFF,
    GROUP_COUNT,
    PRODUCER_OFFSET,
    TOPIC_RETRY_OFFSET,
    TOPIC_DLQ_OFFSET,
    PRODUCER_TPS,
    PRODUCER_SIZE,
    CONSUMER_TPS,
    CONSUMER_SIZE,
    SEND_BACK,
    CONSUMER_OFFSET,
    GET_LATENCY,
    BROKER_TPS,
    BROKER_QPS,
    COMMITLOG_DIFF,
)  # fmt: skip  (the exporter's order of §4.2; the runtime families follow, then rmq's own)

_NUMBER = re.compile(r"^-?\d+(\.\d+)?")
_CAPACITY = re.compile(r"Total : ([\d.]+) (\w+), Free : ([\d.]+) (\w+)\.")
_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


def _number(text: str) -> float | None:
    match = _NUMBER.match(text.strip())
    return float(match.group(0)) if match else None


def _rate(index: int) -> Callable[[str], float | None]:
    """The ``index``-th of the space-separated rates (10 s, 60 s, 600 s)."""

    def read(text: str) -> float | None:
        parts = text.split()
        return _number(parts[index]) if len(parts) > index else None

    return read


def _capacity(part: int) -> Callable[[str], float | None]:
    """``commitLogDirCapacity`` (``Total : 252.0 GiB, Free : 226.3 GiB.``): total or free, in bytes."""

    def read(text: str) -> float | None:
        match = _CAPACITY.search(text)
        if match is None:
            return None
        value, unit = match.group(1 + 2 * part), match.group(2 + 2 * part)
        return float(value) * _UNITS.get(unit, 1)

    return read


# family suffix -> (runtime key(s), reader): the first key present is read
_PLAIN = {
    "msg_put_total_today_now": "msgPutTotalTodayNow",
    "msg_gettotal_today_now": "msgGetTotalTodayNow",
    "msg_puttotal_todaymorning": "msgPutTotalTodayMorning",
    "msg_gettotal_todaymorning": "msgGetTotalTodayMorning",
    "msg_puttotal_yesterdaymorning": "msgPutTotalYesterdayMorning",
    "msg_gettotal_yesterdaymorning": "msgGetTotalYesterdayMorning",
    "dispatch_behind_bytes": "dispatchBehindBytes",
    "dispatch_maxbuffer": "dispatchMaxBuffer",
    "put_message_size_total": "putMessageSizeTotal",
    "put_message_average_size": "putMessageAverageSize",
    "putmessage_times_total": "putMessageTimesTotal",
    "putmessage_entire_time_max": "putMessageEntireTimeMax",
    "getmessage_entire_time_max": "getMessageEntireTimeMax",
    "send_threadpool_queue_size": "sendThreadPoolQueueSize",
    "send_threadpoolqueue_capacity": "sendThreadPoolQueueCapacity",
    "send_threadpoolqueue_headwait_timemills": "sendThreadPoolQueueHeadWaitTimeMills",
    "pull_threadpoolqueue_size": "pullThreadPoolQueueSize",
    "pull_threadpoolqueue_capacity": "pullThreadPoolQueueCapacity",
    "pull_threadpoolqueue_headwait_timemills": "pullThreadPoolQueueHeadWaitTimeMills",
    "query_threadpoolqueue_size": "queryThreadPoolQueueSize",
    "query_threadpool_queue_capacity": "queryThreadPoolQueueCapacity",
    "query_threadpoolqueue_headwait_timemills": "queryThreadPoolQueueHeadWaitTimeMills",
    "remain_transientstore_buffer_numbs": "remainTransientStoreBufferNumbs",
    "earliest_message_timestamp": "earliestMessageTimeStamp",
    "start_accept_sendrequest_time": "startAcceptSendRequestTimeStamp",
    "pagecache_lock_time_mills": "pageCacheLockTimeMills",
    "commitlog_disk_ratio": "commitLogDiskRatio",
    "consumequeue_disk_ratio": "consumeQueueDiskRatio",
    "commitlog_maxoffset": "commitLogMaxOffset",
    "commitlog_minoffset": "commitLogMinOffset",
    "remain_howmanydata_toflush": "remainHowManyDataToFlush",
    "put_latency_99": "putLatency99",
    "put_latency_999": "putLatency999",
}
_PMDT = (
    ("pmdt_0ms", 0), ("pmdt_0to10ms", 1), ("pmdt_10to50ms", 2), ("pmdt_50to100ms", 3),
    ("pmdt_100to200ms", 4), ("pmdt_200to500ms", 5), ("pmdt_500to1s", 6), ("pmdt_1to2s", 7),
    ("pmdt_2to3s", 8), ("pmdt_3to4s", 9), ("pmdt_4to5s", 10), ("pmdt_5to10s", 11), ("pmdt_10stomore", 12),
)  # fmt: skip
_TPS = {
    "put_tps": ("putTps",),
    "getfound_tps": ("getFoundTps",),
    "getmiss_tps": ("getMissTps",),
    "gettotal_tps": ("getTotalTps",),
    "gettransfered_tps": ("getTransferredTps", "getTransferedTps"),
}


def _pmdt(index: int) -> Callable[[str], float | None]:
    """One bucket of ``putMessageDistributeTime`` (``[<=0ms]:0 [0~10ms]:5 ...``)."""

    def read(text: str) -> float | None:
        values = re.findall(r"\]:(\d+)", text)
        return float(values[index]) if len(values) > index else None

    return read


RUNTIME: dict[str, tuple[tuple[str, ...], Callable[[str], float | None]]] = {
    **{suffix: ((key,), _number) for suffix, key in _PLAIN.items()},
    **{suffix: (("putMessageDistributeTime",), _pmdt(i)) for suffix, i in _PMDT},
    **{
        f"{suffix}{span}": (keys, _rate(i))
        for suffix, keys in _TPS.items()
        for i, span in enumerate((10, 60, 600))
    },
    "commitlogdir_capacity_total": (("commitLogDirCapacity",), _capacity(0)),
    "commitlogdir_capacity_free": (("commitLogDirCapacity",), _capacity(1)),
}
RUNTIME_FAMILIES = {suffix: _f(f"rocketmq_brokeruntime_{suffix}", f"brokerRuntime {suffix}", *RUNTIME_LABELS)
                    for suffix in RUNTIME}  # fmt: skip


def runtime_values(table: dict[str, str]) -> dict[str, float]:
    """The ``rocketmq_brokeruntime_*`` values a runtime table gives (suffix -> value); a key the
    table lacks or cannot be read leaves its family out (rocketmq-exporter drops them all)."""
    out = {}
    for suffix, (keys, read) in RUNTIME.items():
        text = next((table[k] for k in keys if k in table), None)
        if text is None:
            continue
        value = read(text)
        if value is not None:
            out[suffix] = value
    return out
