"""A gRPC ``apache.rocketmq.v2.Message`` as the broker stores it: properties, sysFlag and the
message's type (the 5.1 proxy's ``SendMessageActivity.buildMessageProperty`` / ``buildSysFlag``
and ``TopicMessageType.parseFromMessageProperty``).

Properties, in the proxy's order: the user properties (a system key such as ``TAGS`` is refused:
ILLEGAL_MESSAGE_PROPERTY_KEY; at most 128 of them, 16 KiB with tag and keys:
MESSAGE_PROPERTIES_TOO_LARGE), ``TAGS``, ``KEYS`` (space-joined), ``UNIQ_KEY`` = the client's
message id (blank: ILLEGAL_MESSAGE_ID), ``TRAN_MSG=true`` (and ``CHECK_IMMUNITY_TIME_IN_SECONDS``
from ``orphaned_transaction_recovery_duration``, at most an hour) for a TRANSACTION message,
``TIMER_DELIVER_MS`` from ``delivery_timestamp`` (at most a day ahead: ILLEGAL_DELIVERY_TIME),
``RECONSUME_TIME`` = ``delivery_attempt``, ``PGROUP`` = the topic (the producer group of a gRPC
producer), ``__SHARDINGKEY`` = the message group (under 64 bytes: ILLEGAL_MESSAGE_GROUP),
``TRACE_CONTEXT``, ``__BORNHOST`` (the message's born_host, else the peer's address) and
``BORN_TIMESTAMP`` (ms). sysFlag: COMPRESSED for a GZIP body, TRANSACTION_PREPARED for a
TRANSACTION message; the body is stored as sent.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any

from formats import commitlog as fmt
from rmqcli.broker.grpc import status as st
from rmqcli.broker.grpc.context import CallContext
from rmqcli.broker.names import is_system_topic, validate_topic

# MessageConst names
TAGS = "TAGS"
KEYS = "KEYS"
UNIQ_KEY = "UNIQ_KEY"
TRAN_MSG = "TRAN_MSG"
CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
DELAY = "DELAY"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
RECONSUME_TIME = "RECONSUME_TIME"
PGROUP = "PGROUP"
SHARDING_KEY = "__SHARDINGKEY"
TRACE_CONTEXT = "TRACE_CONTEXT"
TRANSACTION_ID = "__transactionId__"  # MessageConst.PROPERTY_TRANSACTION_ID: not a system key
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"

# MessageConst.STRING_HASH_SET (5.1.1): keys a user property may not use
SYSTEM_KEYS = frozenset(
    """TRACE_ON MSG_REGION KEYS TAGS WAIT DELAY RETRY_TOPIC REAL_TOPIC REAL_QID TRAN_MSG PGROUP MIN_OFFSET
    MAX_OFFSET BUYER_ID ORIGIN_MESSAGE_ID TRANSFER_FLAG CORRECTION_FLAG MQ2_FLAG RECONSUME_TIME UNIQ_KEY
    MAX_RECONSUME_TIMES CONSUME_START_TIME POP_CK POP_CK_OFFSET 1ST_POP_TIME TRAN_PREPARED_QUEUE_OFFSET
    DUP_INFO EXTEND_UNIQ_INFO INSTANCE_ID CORRELATION_ID REPLY_TO_CLIENT TTL ARRIVE_TIME PUSH_REPLY_TIME
    CLUSTER MSG_TYPE INNER_MULTI_QUEUE_OFFSET TIMER_DELAY_MS TIMER_DELAY_SEC TIMER_DELIVER_MS
    TIMER_ENQUEUE_MS TIMER_DEQUEUE_MS TIMER_ROLL_TIMES TIMER_OUT_MS TIMER_DEL_UNIQKEY TIMER_DELAY_LEVEL
    __BORNHOST BORN_TIMESTAMP DLQ_ORIGIN_TOPIC DLQ_ORIGIN_MESSAGE_ID""".split()
)

# ProxyConfig defaults
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
MAX_USER_PROPERTY_SIZE = 16 * 1024
USER_PROPERTY_MAX_NUM = 128
MAX_MESSAGE_GROUP_SIZE = 64
MAX_DELAY_MS = 24 * 3600 * 1000
MAX_TRANSACTION_RECOVERY_SECONDS = 3600

# definition.proto enums (MessageType, Encoding)
NORMAL, FIFO, DELAY_TYPE, TRANSACTION = 1, 2, 3, 4
TYPE_NAMES = {
    0: "UNSPECIFIED",
    NORMAL: "NORMAL",
    FIFO: "FIFO",
    DELAY_TYPE: "DELAY",
    TRANSACTION: "TRANSACTION",
}
TYPE_OF_NAME = {name: value for value, name in TYPE_NAMES.items()}
GZIP = 2
TOPIC_TYPE_ATTRIBUTE = "message.type"  # TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE


@dataclass
class Outgoing:
    """A gRPC message as the broker's send path takes it."""

    topic: str
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int  # ms: the message's, else now (ProducerProcessor.buildSendMessageRequestHeader)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def has_control_character(text: str) -> bool:
    """Guava's ``CharMatcher.javaIsoControl``: U+0000-U+001F and U+007F-U+009F."""
    return _CONTROL.search(text) is not None


def check_topic(topic: str) -> None:
    """``GrpcValidator.validateTopic``: a legal name, not a system topic (ILLEGAL_TOPIC). The names
    that passed are remembered (at most ``MAX_CHECKED``): the check is of the name alone."""
    if topic in _checked:
        return
    problem = validate_topic(topic)
    if problem:
        raise st.GrpcStatusError(st.ILLEGAL_TOPIC, problem)
    if is_system_topic(topic):
        raise st.GrpcStatusError(st.ILLEGAL_TOPIC, "cannot access system topic")
    if len(_checked) >= MAX_CHECKED:
        _checked.clear()
    _checked.add(topic)


MAX_CHECKED = 4096
_checked: set[str] = set()


def _check_text(text: str, code: int, what: str, *, bar: bool = False) -> None:
    """A message's tag (``what`` "tag", ``bar``: no '|' either) or key: nothing, or text that is
    not all whitespace and has no control character."""
    if text:
        if not text.strip():
            raise st.GrpcStatusError(code, f"{what} cannot be the char sequence of whitespace")
        if bar and "|" in text:
            raise st.GrpcStatusError(code, f"{what} cannot contain '|'")
        if has_control_character(text):
            raise st.GrpcStatusError(code, f"{what} cannot contain control character")


def _check_group(group: str) -> None:
    if not group.strip():
        raise st.GrpcStatusError(
            st.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace"
        )
    if len(group.encode("utf-8")) >= MAX_MESSAGE_GROUP_SIZE:
        raise st.GrpcStatusError(
            st.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {MAX_MESSAGE_GROUP_SIZE}"
        )
    if has_control_character(group):
        raise st.GrpcStatusError(st.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def _millis(timestamp: Any) -> int:
    return int(timestamp.seconds) * 1000 + int(timestamp.nanos) // 1_000_000


def _valid_timestamp(timestamp: Any) -> bool:
    """``Timestamps.isValid``: seconds within years 1-9999, nanos within [0, 1e9)."""
    return -62135596800 <= timestamp.seconds <= 253402300799 and 0 <= timestamp.nanos < 1_000_000_000


def properties_of(
    message: Any, ctx: CallContext, producer_group: str, now_ms: int | None = None
) -> dict[str, str]:
    """``buildMessageProperty``: the stored properties of one gRPC message."""
    sp = message.system_properties
    user = dict(message.user_properties)
    if len(user) > USER_PROPERTY_MAX_NUM:
        raise st.GrpcStatusError(
            st.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {USER_PROPERTY_MAX_NUM}"
        )
    size = 0
    for key, value in user.items():
        if key in SYSTEM_KEYS:
            raise st.GrpcStatusError(st.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if has_control_character(key):
            raise st.GrpcStatusError(
                st.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character"
            )
        if has_control_character(value):
            raise st.GrpcStatusError(
                st.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character"
            )
        size += len(key.encode("utf-8")) + len(value.encode("utf-8"))
    props = user
    _check_text(sp.tag, st.ILLEGAL_MESSAGE_TAG, "tag", bar=True)
    props[TAGS] = sp.tag  # Message.setTags: an empty tag is put too
    size += len(sp.tag.encode("utf-8"))
    keys = list(sp.keys)
    for key in keys:
        _check_text(key, st.ILLEGAL_MESSAGE_KEY, "key")
        size += len(key.encode("utf-8"))
    if keys:
        props[KEYS] = " ".join(keys)
    if size > MAX_USER_PROPERTY_SIZE:
        raise st.GrpcStatusError(
            st.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {MAX_USER_PROPERTY_SIZE}",
        )
    if not sp.message_id.strip():
        raise st.GrpcStatusError(st.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[UNIQ_KEY] = sp.message_id
    if sp.message_type == TRANSACTION:
        props[TRAN_MSG] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = int(sp.orphaned_transaction_recovery_duration.seconds)
            if seconds > MAX_TRANSACTION_RECOVERY_SECONDS:
                raise st.GrpcStatusError(
                    st.BAD_REQUEST,
                    "the max transaction recovery time of message is too large, max is "
                    f"{MAX_TRANSACTION_RECOVERY_SECONDS}",
                )
            props[CHECK_IMMUNITY] = str(seconds)
    if sp.HasField("delivery_timestamp"):
        deliver = _millis(sp.delivery_timestamp)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if deliver - now > MAX_DELAY_MS:
            raise st.GrpcStatusError(
                st.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {MAX_DELAY_MS}"
            )
        props[TIMER_DELIVER_MS] = str(deliver)
    props[RECONSUME_TIME] = str(sp.delivery_attempt)
    props[PGROUP] = producer_group
    if sp.message_group:
        _check_group(sp.message_group)
        props[SHARDING_KEY] = sp.message_group
    if sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    born_host = sp.born_host if sp.born_host.strip() else ctx.remote_address
    if born_host.strip():
        props[BORN_HOST] = born_host
    if sp.HasField("born_timestamp") and _valid_timestamp(sp.born_timestamp):
        props[BORN_TIMESTAMP] = str(_millis(sp.born_timestamp))
    return props


def sys_flag_of(message: Any) -> int:
    """``buildSysFlag``: COMPRESSED for a GZIP body, TRANSACTION_PREPARED for a transaction."""
    flag = 0
    if message.system_properties.body_encoding == GZIP:
        flag |= fmt.COMPRESSED_FLAG
    if message.system_properties.message_type == TRANSACTION:
        flag |= int(fmt.TransactionType.PREPARED)
    return flag


def outgoing(message: Any, ctx: CallContext, now_ms: int | None = None) -> Outgoing:
    """One message of a SendMessageRequest, checked, as the broker stores it."""
    topic = message.topic.name
    if len(message.body) > MAX_MESSAGE_SIZE:
        raise st.GrpcStatusError(
            st.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {MAX_MESSAGE_SIZE}"
        )
    props = properties_of(message, ctx, topic, now_ms)
    try:
        born = int(props[BORN_TIMESTAMP])
    except (KeyError, ValueError):
        born = int(time.time() * 1000) if now_ms is None else now_ms
    return Outgoing(topic, bytes(message.body), props, sys_flag_of(message), born)


def message_type_of(props: dict[str, str]) -> int:
    """``TopicMessageType.parseFromMessageProperty``."""
    if props.get(TRAN_MSG) == "true":
        return TRANSACTION
    if DELAY in props or TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props:
        return DELAY_TYPE
    if SHARDING_KEY in props:
        return FIFO
    return NORMAL


def topic_type(config: dict | None) -> int | None:
    """The topic's ``message.type`` attribute (5.x ``TopicConfig.attributes``): None when the topic
    has none (a topic made by 4.x tools), 0 (UNSPECIFIED) for a value that names no type."""
    if config is None:
        return None
    attributes = config.get("attributes")
    if not isinstance(attributes, dict) or TOPIC_TYPE_ATTRIBUTE not in attributes:
        return None
    return TYPE_OF_NAME.get(str(attributes[TOPIC_TYPE_ATTRIBUTE]).upper(), 0)


def check_type(topic: str, config: dict | None, props: dict[str, str]) -> None:
    """``DefaultTopicMessageTypeValidator`` when the topic names its type (retry and DLQ topics are
    not checked): MESSAGE_PROPERTY_CONFLICT_WITH_TYPE."""
    if topic.startswith(("%RETRY%", "%DLQ%")):
        return
    expected = topic_type(config)
    if expected is None:
        return
    actual = message_type_of(props)
    if actual != expected:
        raise st.GrpcStatusError(
            st.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"TopicMessageType validate failed, topic type is {TYPE_NAMES[expected]}, "
            f"message type is {TYPE_NAMES[actual]}",
            wrapped=True,  # a ProxyException of DefaultTopicMessageTypeValidator
        )


TIMESTAMP_SECONDS = (-62135596800, 253402300799)  # Timestamp's range: years 1 to 9999


def set_millis(timestamp: Any, millis: int) -> None:
    """``Timestamp.FromMilliseconds`` (its ValueError out of range), without its Python call."""
    seconds, rest = divmod(millis, 1000)
    if not TIMESTAMP_SECONDS[0] <= seconds <= TIMESTAMP_SECONDS[1]:
        timestamp.FromMilliseconds(millis)  # raises as it would have
    timestamp.seconds = seconds
    timestamp.nanos = rest * 1_000_000


def message_of_record(d: Any, record: Any, topic: str | None = None, into: Any = None) -> Any:
    """A stored message as the proxy hands it to a client (``GrpcConverter.buildMessage``): the
    non-system properties as user properties; tag, keys, message id (``UNIQ_KEY``, else the offset
    id), the body's MD5 (upper-case hex) and encoding, the type its properties make, born and store
    time and host, delivery time, message group, queue, offset and delivery attempt
    (``reconsumeTimes`` + 1). ``record`` is a ``formats.records.Record``. Built in ``into`` (an
    empty ``Message``, e.g. a response's field: no copy) when given."""
    props = record.properties
    body = record.stored_body
    message = d.Message() if into is None else into
    message.topic.name = topic or record.topic
    message.body = body
    user = {key: value for key, value in props.items() if key not in SYSTEM_KEYS}
    if user:
        message.user_properties.update(user)
    sp = message.system_properties
    if props.get(TAGS):
        sp.tag = props[TAGS]
    keys = props.get(KEYS, "")
    if keys:
        sp.keys.extend(k for k in keys.split(" ") if k)
    sp.message_id = props.get(UNIQ_KEY) or record.msg_id
    digest = sp.body_digest
    digest.type = d.MD5
    digest.checksum = hashlib.md5(body).hexdigest().upper()
    sp.body_encoding = GZIP if record.sys_flag & fmt.COMPRESSED_FLAG else 1  # IDENTITY
    sp.message_type = message_type_of(props)
    set_millis(sp.born_timestamp, record.born_timestamp)
    sp.born_host = props.get(BORN_HOST) or record.born_host
    set_millis(sp.store_timestamp, record.store_timestamp)
    sp.store_host = record.store_host
    deliver = props.get(TIMER_DELIVER_MS, "")
    if deliver.isdigit():
        set_millis(sp.delivery_timestamp, int(deliver))
    if props.get(SHARDING_KEY):
        sp.message_group = props[SHARDING_KEY]
    sp.queue_id = record.queue_id
    sp.queue_offset = record.queue_offset
    sp.delivery_attempt = record.reconsume_times + 1
    if props.get(TRACE_CONTEXT):
        sp.trace_context = props[TRACE_CONTEXT]
    return message
