"""JSON bodies the group and message commands need beyond ``rmqcli.remoting.json_body`` (protocol.md
B.4, B.9), declared with the same ``bean``/``prop`` helpers, plus the small Java conventions the
commands print: ``MessageQueue`` order and ``HashSet`` order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rmqcli.remoting.json_body import (
    MessageQueue,
    SubscriptionData,
    bean,
    prop,
)


@bean
class ProcessQueueInfo:
    cached_msg_count: int = prop(0)
    cached_msg_max_offset: int = prop(0)
    cached_msg_min_offset: int = prop(0)
    cached_msg_size_in_mi_b: int = prop(0, name="cachedMsgSizeInMiB")
    commit_offset: int = prop(0)
    droped: bool = prop(False)
    last_consume_timestamp: int = prop(0)
    last_lock_timestamp: int = prop(0)
    last_pull_timestamp: int = prop(0)
    locked: bool = prop(False)
    transaction_msg_count: int = prop(0)
    transaction_msg_max_offset: int = prop(0)
    transaction_msg_min_offset: int = prop(0)
    try_unlock_times: int = prop(0)


@bean
class ConsumeStatus:
    consume_failed_msgs: int = prop(0)
    consume_failed_tps: float = prop(0.0, name="consumeFailedTPS")
    consume_ok_tps: float = prop(0.0, name="consumeOKTPS")
    consume_rt: float = prop(0.0, name="consumeRT")
    pull_rt: float = prop(0.0, name="pullRT")
    pull_tps: float = prop(0.0, name="pullTPS")


@bean
class ConsumerRunningInfo:
    """GET_CONSUMER_RUNNING_INFO (307), relayed by the broker from the client (B.4, B.5)."""

    jstack: str | None = prop(None)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = prop(factory=dict)
    properties: dict[str, str] = prop(factory=dict)
    status_table: dict[str, ConsumeStatus] = prop(factory=dict)
    subscription_set: list[SubscriptionData] = prop(factory=list)


@bean
class ConsumeMessageDirectlyResult:
    """CONSUME_MESSAGE_DIRECTLY (309) answer."""

    auto_commit: bool = prop(True)
    consume_result: str | None = prop(None)
    order: bool = prop(False)
    remark: str | None = prop(None)
    spent_time_mills: int = prop(0)

    def java_string(self) -> str:
        return (
            f"ConsumeMessageDirectlyResult [order={_jb(self.order)}, autoCommit={_jb(self.auto_commit)}, "
            f"consumeResult={_js(self.consume_result)}, remark={_js(self.remark)}, "
            f"spentTimeMills={self.spent_time_mills}]"
        )


def _js(value: object) -> str:
    return "null" if value is None else str(value)


def _jb(value: bool) -> str:
    return "true" if value else "false"


# --- MessageQueue ------------------------------------------------------------------------------
def mq_key(mq: MessageQueue) -> tuple[str, str, int]:
    """``MessageQueue.compareTo``: topic, broker name, queue id."""
    return (mq.topic, mq.broker_name, mq.queue_id)


def mq_string(mq: MessageQueue) -> str:
    """``MessageQueue.toString``."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def mq_hash(broker_name: str, queue_id: int, topic: str) -> int:
    """``MessageQueue.hashCode``: brokerName, queueId, topic (Eclipse-generated, prime 31)."""
    from formats.javahash import objects_hash, string_hash

    return objects_hash(string_hash(broker_name), queue_id, string_hash(topic))


def hash_order(mqs: Iterable[MessageQueue]) -> list[MessageQueue]:
    """The iteration order of a ``HashMap``/``HashSet`` of these queues (insertion order given)."""
    from formats.javahash import hashmap_order

    return hashmap_order(mqs, lambda mq: mq_hash(mq.broker_name, mq.queue_id, mq.topic))


def plain(value: Any) -> Any:
    """A bean or structure as JSON-ready data (``MessageQueue`` keys become ``topic/broker/qid``)."""
    import dataclasses

    from rmqcli.remoting.json_body import to_fastjson_value

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: plain(v) for k, v in _items(to_fastjson_value(value))}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in _items(value)}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _items(mapping: dict[Any, Any]) -> list[tuple[str, Any]]:
    from formats.fastjson import ObjectKey

    out = []
    for key, value in mapping.items():
        if isinstance(key, ObjectKey):
            d = key.as_dict()
            key = f"{d.get('topic')}/{d.get('brokerName')}/{d.get('queueId')}"
        elif isinstance(key, MessageQueue):
            key = f"{key.topic}/{key.broker_name}/{key.queue_id}"
        out.append((key if isinstance(key, str) else str(key), value))
    return out


def process_queue_string(p: ProcessQueueInfo) -> str:
    """``ProcessQueueInfo.toString()`` (4.9.7 field order)."""
    return (
        f"ProcessQueueInfo [commitOffset={p.commit_offset}, cachedMsgMinOffset={p.cached_msg_min_offset}, "
        f"cachedMsgMaxOffset={p.cached_msg_max_offset}, cachedMsgCount={p.cached_msg_count}, "
        f"cachedMsgSizeInMiB={p.cached_msg_size_in_mi_b}, "
        f"transactionMsgMinOffset={p.transaction_msg_min_offset}, "
        f"transactionMsgMaxOffset={p.transaction_msg_max_offset}, "
        f"transactionMsgCount={p.transaction_msg_count}, "
        f"locked={_jb(p.locked)}, tryUnlockTimes={p.try_unlock_times}, "
        f"lastLockTimestamp={_human(p.last_lock_timestamp)}, droped={_jb(p.droped)}, "
        f"lastPullTimestamp={_human(p.last_pull_timestamp)}, "
        f"lastConsumeTimestamp={_human(p.last_consume_timestamp)}]"
    )


def _human(millis: int) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in local time."""
    from datetime import datetime

    try:
        moment = datetime.fromtimestamp(millis / 1000)
    except (ValueError, OverflowError, OSError):  # a client's uninitialised field (C++ sends some)
        return str(millis)
    return moment.strftime("%Y%m%d%H%M%S") + f"{millis % 1000:03d}"


def running_info_string(info: ConsumerRunningInfo) -> str:
    """``ConsumerRunningInfo.formatString()``: properties, subscriptions, offsets, queue details,
    RT and TPS, jstack (queues sorted, subscriptions by topic)."""
    out = ["#Consumer Properties#\n"]
    out.extend(f"{k:<40}: {v}\n" for k, v in info.properties.items())
    out.append("\n\n#Consumer Subscription#\n")
    for i, sub in enumerate(sorted(info.subscription_set, key=lambda s: (s.topic, s.sub_string)), 1):
        out.append(
            f"{i:03d} Topic: {sub.topic:<40} ClassFilter: {_jb(sub.class_filter_mode):<8} "
            f"SubExpression: {sub.sub_string}\n"
        )
    queues = sorted(info.mq_table, key=mq_key)
    out.append("\n\n#Consumer Offset#\n")
    out.append(f"{'#Topic':<64} {'#Broker Name':<32} {'#QID':<4} {'#Consumer Offset':<20}\n")
    for mq in queues:
        out.append(
            f"{mq.topic:<32} {mq.broker_name:<32} {mq.queue_id:<4} {info.mq_table[mq].commit_offset:<20}\n"
        )
    out.append("\n\n#Consumer MQ Detail#\n")
    out.append(f"{'#Topic':<64} {'#Broker Name':<32} {'#QID':<4} {'#ProcessQueueInfo':<20}\n")
    for mq in queues:
        out.append(
            f"{mq.topic:<64} {mq.broker_name:<32} {mq.queue_id:<4} "
            f"{process_queue_string(info.mq_table[mq])}\n"
        )
    out.append("\n\n#Consumer RT&TPS#\n")
    out.append(
        f"{'#Topic':<64} {'#Pull RT':>14} {'#Pull TPS':>14} {'#Consume RT':>14} {'#ConsumeOK TPS':>14} "
        f"{'#ConsumeFailed TPS':>18} {'#ConsumeFailedMsgsInHour':>25}\n"
    )
    for topic in sorted(info.status_table):
        s = info.status_table[topic]
        out.append(
            f"{topic:<32} {s.pull_rt:14.2f} {s.pull_tps:14.2f} {s.consume_rt:14.2f} {s.consume_ok_tps:14.2f} "
            f"{s.consume_failed_tps:18.2f} {s.consume_failed_msgs:25d}\n"
        )
    if info.jstack is not None:
        out.append("\n\n#Consumer jstack#\n")
        out.append(info.jstack)
    return "".join(out)
