"""POP names and the "extra info" string (RocketMQ 5.1.1: ``PopAckConstants``, ``KeyBuilder``,
``ExtraInfoUtil``, ``ReceiptHandle``; research notes issue21 §2, §3).

Extra info, space separated: ``ckQueueOffset popTime invisibleTime reviveQid topicType brokerName
queueId [msgQueueOffset [commitLogOffset]]``; topicType ``0`` normal, ``1`` pop-retry. Parsing is
strict and bounded: a bad string raises ``ExtraInfoError`` (answered as a refusal, never a traceback).
"""

from __future__ import annotations

from dataclasses import dataclass

from formats.names import RETRY_PREFIX

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"  # + cluster name (PopAckConstants.buildClusterReviveTopic)
RETRY_PREFIX_POP = RETRY_PREFIX  # pop-retry topics start like 4.x retry topics
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"  # its offsets: the revive queues' progress
CK_TAG = "ck"
ACK_TAG = "ack"
SPLIT = "@"
ACK_TIME_INTERVAL = 1000  # ms: a ck is delivered this long before its revive time
RETRY_QUEUE_NUM = 1  # queues of a pop-retry topic
ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: "orderly pop", no ck
REVIVE_PERM = 6
MAX_POP_NUMS = 32  # a POP asks for at most this many messages (PopMessageProcessor)
MAX_EXTRA_INFO_LENGTH = 1024  # rmq's own bound on a handle string from the wire

PROPERTY_POP_CK = "POP_CK"
PROPERTY_POP_CK_OFFSET = "POP_CK_OFFSET"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"

INIT_MODE_MIN = 0  # ConsumeInitMode
INIT_MODE_MAX = 1


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str) -> str:
    """``KeyBuilder.buildPopRetryTopic``: ``%RETRY%<group>_<topic>``."""
    return f"{RETRY_PREFIX}{group}_{topic}"


def normal_topic(topic: str, group: str) -> str:
    """``KeyBuilder.parseNormalTopic``: the topic a pop-retry topic retries."""
    prefix = f"{RETRY_PREFIX}{group}_"
    return topic[len(prefix) :] if topic.startswith(prefix) else topic


def is_retry(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX)


def lock_key(topic: str, group: str, queue_id: int) -> str:
    """``topic@group@queueId``: the queue lock and the long-polling key."""
    return f"{topic}{SPLIT}{group}{SPLIT}{queue_id}"


class ExtraInfoError(ValueError):
    """An extra-info string that does not parse."""


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """One parsed extra-info string."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: bool
    broker_name: str
    queue_id: int
    msg_queue_offset: int | None = None
    commit_log_offset: int | None = None

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        """``ExtraInfoUtil.getRealTopic``: the pop-retry topic for a retried message."""
        return pop_retry_topic(topic, group) if self.retry else topic

    def encode(self) -> str:
        fields = [self.ck_queue_offset, self.pop_time, self.invisible_time, self.revive_qid]
        parts = [str(x) for x in fields] + ["1" if self.retry else "0", self.broker_name, str(self.queue_id)]
        if self.msg_queue_offset is not None:
            parts.append(str(self.msg_queue_offset))
            if self.commit_log_offset is not None:
                parts.append(str(self.commit_log_offset))
        return " ".join(parts)


def build_extra_info(
    ck_queue_offset: int,
    pop_time: int,
    invisible_time: int,
    revive_qid: int,
    topic: str,
    broker_name: str,
    queue_id: int,
    msg_queue_offset: int | None = None,
) -> str:
    """``ExtraInfoUtil.buildExtraInfo`` (7 or 8 fields; the type from the topic's name)."""
    return ExtraInfo(
        ck_queue_offset,
        pop_time,
        invisible_time,
        revive_qid,
        is_retry(topic),
        broker_name,
        queue_id,
        msg_queue_offset,
    ).encode()


def _int(text: str, what: str) -> int:
    if not text or len(text) > 20 or not text.lstrip("-").isdigit():
        raise ExtraInfoError(f"extraInfo: {what} is not a number: {text[:40]!r}")
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise ExtraInfoError(f"extraInfo: {what} is out of range")
    return value


def parse_extra_info(text: str) -> ExtraInfo:
    """``ExtraInfoUtil.split`` and its getters; at least 7 fields."""
    if len(text) > MAX_EXTRA_INFO_LENGTH:
        raise ExtraInfoError(f"extraInfo is longer than {MAX_EXTRA_INFO_LENGTH} characters")
    parts = text.split(" ")
    if len(parts) < 7:
        raise ExtraInfoError(f"extraInfo has {len(parts)} fields, at least 7 wanted: {text[:80]!r}")
    return ExtraInfo(
        ck_queue_offset=_int(parts[0], "ckQueueOffset"),
        pop_time=_int(parts[1], "popTime"),
        invisible_time=_int(parts[2], "invisibleTime"),
        revive_qid=_int(parts[3], "reviveQid"),
        retry=parts[4] == "1",
        broker_name=parts[5],
        queue_id=_int(parts[6], "queueId"),
        msg_queue_offset=_int(parts[7], "msgQueueOffset") if len(parts) > 7 else None,
        commit_log_offset=_int(parts[8], "commitLogOffset") if len(parts) > 8 else None,
    )


def type_tag(retry: bool) -> str:
    return "1" if retry else "0"


def start_offset_info(parts: list[str], retry: bool, queue_id: int, start: int) -> None:
    """``ExtraInfoUtil.buildStartOffsetInfo``: ``type qid startOffset``, ``;``-joined."""
    parts.append(f"{type_tag(retry)} {queue_id} {start}")


def msg_offset_info(parts: list[str], retry: bool, queue_id: int, offsets: list[int]) -> None:
    """``ExtraInfoUtil.buildMsgOffsetInfo``: ``type qid o1,o2,...``."""
    parts.append(f"{type_tag(retry)} {queue_id} {','.join(str(o) for o in offsets)}")
