"""JSON bodies of remoting commands, shaped as fastjson shapes RocketMQ's beans (protocol.md A.9, B.9).

Each body is a keyword-only dataclass whose fields carry the Java property name (camelCase of the
Python name unless given). ``encode`` writes fastjson's compact form: properties sorted by name,
``None`` dropped, ``bytes`` in Base64 (``byte[]``), integer map keys bare (``{0:"host:port"}``),
``MessageQueue`` keys written as objects (``{{"brokerName":…}:…}``); maps and lists keep the order
they have in Python, except integer-keyed maps, which come out ascending as a Java ``HashMap`` of
small longs iterates. ``decode`` accepts that dialect, standard JSON (quoted numeric keys, object
keys as JSON text) and the C++ variants (enum ordinals, numbers for strings), and ignores unknown
properties.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import types
import typing
from typing import Any, TypeVar, Union

from formats import fastjson
from formats.fastjson import ObjectKey
from formats.javatext import parse_boolean
from rmqcli.errors import RmqError
from rmqcli.remoting.javanames import camel, java_text


class BodyError(RmqError):
    """A body that does not parse as the expected JSON bean."""

    exit_code = 5


T = TypeVar("T")


def prop(
    default: Any = dataclasses.MISSING,
    *,
    name: str | None = None,
    factory: Any = None,
    enum: tuple[str, ...] | None = None,
) -> Any:
    """A bean property: ``name`` overrides the camelCase JSON name, ``enum`` lists a Java enum's
    names by ordinal (a number on input is read as that ordinal, A.9 #7)."""
    metadata = {"json": name, "enum": enum}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def bean(cls: type[T] | None = None, *, frozen: bool = False) -> Any:
    """Declare a body bean: a keyword-only dataclass with slots."""

    def wrap(c: type[T]) -> type[T]:
        return dataclasses.dataclass(kw_only=True, slots=True, frozen=frozen)(c)

    return wrap(cls) if cls is not None else wrap


_PLAN: dict[type, tuple[tuple[str, str, Any, tuple[str, ...] | None], ...]] = {}


def _plan(cls: type) -> tuple[tuple[str, str, Any, tuple[str, ...] | None], ...]:
    """``(python name, JSON name, type, enum names)`` sorted by JSON name, as fastjson orders them."""
    plan = _PLAN.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        plan = tuple(
            sorted(
                (
                    (f.name, f.metadata.get("json") or camel(f.name), hints[f.name], f.metadata.get("enum"))
                    for f in dataclasses.fields(cls)
                ),
                key=lambda item: item[1],
            )
        )
        _PLAN[cls] = plan
    return plan


# --- encoding ----------------------------------------------------------------------------------
def to_fastjson_value(value: Any) -> Any:
    """A bean (or a structure holding beans) as the plain values ``fastjson.dumps`` writes."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for name, key, _, _ in _plan(type(value)):
            item = getattr(value, name)
            if item is not None:
                out[key] = to_fastjson_value(item)
        return out
    if isinstance(value, dict):
        items = list(value.items())
        if items and all(isinstance(k, int) and not isinstance(k, bool) for k, _ in items):
            items.sort(key=lambda kv: kv[0])
        return {_encode_key(k): to_fastjson_value(v) for k, v in items}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_fastjson_value(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")  # fastjson's byte[]
    return value


def _encode_key(key: Any) -> Any:
    if dataclasses.is_dataclass(key):
        return ObjectKey.of(to_fastjson_value(key))
    return key


def encode(value: Any, *, pretty: bool = False) -> bytes:
    """``RemotingSerializable.encode()`` / ``toJson(pretty)`` of a bean: fastjson's bytes (A.9)."""
    return fastjson.dumps(to_fastjson_value(value), pretty=pretty).encode("utf-8")


def _standard(value: Any) -> Any:
    if isinstance(value, dict):
        pairs = [(k if isinstance(k, str) else fastjson.dumps(k), _standard(v)) for k, v in value.items()]
        numeric = all(isinstance(k, int) for k in value)
        pairs.sort(key=(lambda kv: int(kv[0])) if numeric and value else (lambda kv: kv[0]))
        return dict(pairs)
    if isinstance(value, list):
        return [_standard(v) for v in value]
    return value


def _browser_escape(text: str) -> str:
    out = []
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "/":
            out.append("\\/")
        elif code < 0x20 or code >= 0x7F:
            out.extend(f"\\u{unit:04X}" for unit in _utf16(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _utf16(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _dump_standard(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{_browser_escape(k)}:{_dump_standard(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump_standard(v) for v in value) + "]"
    if isinstance(value, str):
        return _browser_escape(value)
    return json.dumps(value)


def encode_standard(value: Any) -> bytes:
    """The route body for peers with version >= 401 or ``acceptStandardJsonOnly`` (A.9 #4): keys
    quoted, maps sorted, non-ASCII and control characters as ``\\uXXXX``, ``/`` as ``\\/``."""
    return _dump_standard(_standard(to_fastjson_value(value))).encode("ascii")


# --- decoding ----------------------------------------------------------------------------------
def decode(cls: type[T], data: bytes | bytearray | memoryview | str) -> T:
    """Parse a body into ``cls``; raises ``BodyError`` (never a bare exception) on bad input."""
    try:
        raw = fastjson.loads(bytes(data) if not isinstance(data, str) else data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BodyError(f"{cls.__name__} body does not parse: {exc}") from None
    return from_value(cls, raw)


def decode_or_empty(cls: type[T], data: bytes | bytearray | memoryview | str | None) -> T:
    """``decode``, or an empty ``cls()`` for an answer without a body (a broker with nothing to say)."""
    return decode(cls, data) if data else cls()


def from_value(cls: type[T], raw: Any) -> T:
    """Convert an already parsed JSON value into ``cls`` (or any supported type)."""
    try:
        return _convert(cls, raw, None)
    except BodyError as exc:
        raise BodyError(f"{getattr(cls, '__name__', cls)} body: {exc}") from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise BodyError(f"{getattr(cls, '__name__', cls)} body: {exc}") from None


def _convert(tp: Any, value: Any, enum: tuple[str, ...] | None) -> Any:
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(args[0], value, enum)
    if value is None:
        return None
    if origin is list:
        (arg,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise BodyError(f"expected a list, got {type(value).__name__}")
        return [_convert(arg, v, enum) for v in value]
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if not isinstance(value, dict):
            raise BodyError(f"expected an object, got {type(value).__name__}")
        return {_convert_key(key_type, k): _convert(value_type, v, None) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise BodyError(f"expected a {tp.__name__} object, got {type(value).__name__}")
        kwargs = {}
        for name, key, field_type, field_enum in _plan(tp):
            if key in value:
                kwargs[name] = _convert(field_type, value[key], field_enum)
        return tp(**kwargs)
    if tp is bool:
        if isinstance(value, str):
            return parse_boolean(value)
        return bool(value)
    if tp is int:
        if isinstance(value, float) and not value.is_integer():
            raise BodyError(f"expected an integer, got {value!r}")
        return int(value)
    if tp is float:
        return float(value)
    if tp is bytes:
        if not isinstance(value, str):
            raise BodyError(f"expected Base64 text, got {type(value).__name__}")
        try:
            return base64.b64decode(value, validate=True)
        except ValueError as exc:
            raise BodyError(f"bad Base64 text: {exc}") from None
    if tp is str:
        if enum is not None and isinstance(value, int) and not isinstance(value, bool):
            return enum[value] if 0 <= value < len(enum) else str(value)
        return java_text(value)
    raise BodyError(f"unsupported type {tp!r}")


def _convert_key(key_type: Any, key: Any) -> Any:
    if dataclasses.is_dataclass(key_type):
        if isinstance(key, ObjectKey):
            key = key.as_dict()
        elif isinstance(key, str):  # fastjson >= 1.2.66 / serde_json_any_key: the object as JSON text
            key = fastjson.loads(key)
        return _convert(key_type, key, None)
    if key_type is int:
        return int(key)
    if key_type is str:
        return key if isinstance(key, str) else fastjson.dumps(key)
    return key


# --- the beans (B.9) ---------------------------------------------------------------------------
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM_WHERE = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)


@bean(frozen=True)
class MessageQueue:
    """Hashable: used as a map key in ConsumeStats, TopicStatsTable, ResetOffsetBody (A.9 #3)."""

    broker_name: str = prop("")
    queue_id: int = prop(0)
    topic: str = prop("")


@bean
class DataVersion:
    counter: int = prop(0)
    state_version: int | None = prop(None)  # 5.x
    timestamp: int = prop(0)


@bean
class TopicConfig:
    attributes: dict[str, str] | None = prop(None)  # 5.x
    order: bool = prop(False)
    perm: int = prop(6)
    read_queue_nums: int = prop(16)
    topic_filter_type: str = prop("SINGLE_TAG")
    topic_name: str = prop("")
    topic_sys_flag: int = prop(0)
    write_queue_nums: int = prop(16)


@bean
class TopicConfigSerializeWrapper:
    data_version: DataVersion = prop(factory=DataVersion)
    topic_config_table: dict[str, TopicConfig] = prop(factory=dict)


@bean
class RegisterBrokerBody:
    filter_server_list: list[str] = prop(factory=list)
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = prop(factory=TopicConfigSerializeWrapper)


@bean
class BrokerData:
    broker_addrs: dict[int, str] = prop(factory=dict)
    broker_name: str = prop("")
    cluster: str = prop("")
    enable_acting_master: bool | None = prop(None)  # 5.x: the group's SlaveActingMaster flag
    zone_name: str | None = prop(None)  # 5.x


@bean
class QueueData:
    broker_name: str = prop("")
    perm: int = prop(0)
    read_queue_nums: int = prop(0)
    topic_sys_flag: int = prop(0)
    write_queue_nums: int = prop(0)


@bean
class TopicRouteData:
    broker_datas: list[BrokerData] = prop(factory=list)
    filter_server_table: dict[str, list[str]] = prop(factory=dict)
    order_topic_conf: str | None = prop(None)
    queue_datas: list[QueueData] = prop(factory=list)
    topic_queue_mapping_by_broker: dict[str, Any] | None = prop(None)  # 5.x


@bean
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = prop(factory=dict)
    cluster_addr_table: dict[str, list[str]] = prop(factory=dict)


@bean
class TopicList:
    broker_addr: str | None = prop(None)
    topic_list: list[str] = prop(factory=list)


@bean
class GroupList:
    group_list: list[str] = prop(factory=list)


@bean
class KVTable:
    table: dict[str, str] = prop(factory=dict)


@bean
class GetConsumerListByGroupResponseBody:
    consumer_id_list: list[str] = prop(factory=list)


@bean
class TopicOffset:
    last_update_timestamp: int = prop(0)
    max_offset: int = prop(0)
    min_offset: int = prop(0)


@bean
class TopicStatsTable:
    offset_table: dict[MessageQueue, TopicOffset] = prop(factory=dict)
    topic_put_tps: float | None = prop(None)  # 5.x


@bean
class OffsetWrapper:
    broker_offset: int = prop(0)
    consumer_offset: int = prop(0)
    last_timestamp: int = prop(0)
    pull_offset: int | None = prop(None)  # 5.x


@bean
class ConsumeStats:
    consume_tps: float = prop(0.0)
    offset_table: dict[MessageQueue, OffsetWrapper] = prop(factory=dict)


@bean
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS (317): ``[{group: [ConsumeStats]}]`` and the broker's total diff."""

    broker_addr: str | None = prop(None)
    consume_stats_list: list[dict[str, list[ConsumeStats]]] = prop(factory=list)
    total_diff: int = prop(0)


@bean
class ResetOffsetBody:
    offset_table: dict[MessageQueue, int] = prop(factory=dict)


@bean(frozen=True)
class MessageQueueForC:
    """An entry of ``ResetOffsetBodyForC``: C++ clients cannot read ``ResetOffsetBody``'s object keys."""

    broker_name: str = prop("")
    offset: int = prop(0)
    queue_id: int = prop(0)
    topic: str = prop("")


@bean
class ResetOffsetBodyForC:
    """RESET_CONSUMER_CLIENT_OFFSET (220) body for C++ clients: ``{"offsetTable":[…]}``."""

    offset_table: list[MessageQueueForC] = prop(factory=list)


@bean
class ConsumerOffsetSerializeWrapper:
    """``consumerOffset.json`` and GET_ALL_CONSUMER_OFFSET: ``{"topic@group":{queueId:offset}}``."""

    offset_table: dict[str, dict[int, int]] = prop(factory=dict)


@bean
class DelayOffsetSerializeWrapper:
    """``delayOffset.json`` and GET_ALL_DELAY_OFFSET: ``{"offsetTable":{delayLevel:offset}}``."""

    offset_table: dict[int, int] = prop(factory=dict)


@bean
class BrokerStatsItem:
    avgpt: float = prop(0.0)
    sum: int = prop(0)
    tps: float = prop(0.0)


@bean
class BrokerStatsData:
    stats_day: BrokerStatsItem = prop(factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = prop(factory=BrokerStatsItem)
    stats_minute: BrokerStatsItem = prop(factory=BrokerStatsItem)


@bean
class SubscriptionData:
    class_filter_mode: bool = prop(False)
    code_set: list[int] = prop(factory=list)
    expression_type: str | None = prop("TAG")
    sub_string: str = prop("")
    sub_version: int = prop(0)
    tags_set: list[str] = prop(factory=list)
    topic: str = prop("")


@bean
class SubscriptionGroupConfig:
    attributes: dict[str, str] | None = prop(None)  # 5.x
    broker_id: int = prop(0)
    consume_broadcast_enable: bool = prop(True)
    consume_enable: bool = prop(True)
    consume_from_min_enable: bool = prop(True)
    consume_message_orderly: bool | None = prop(None)  # 5.x
    consume_timeout_minute: int | None = prop(None)  # 5.x
    group_name: str = prop("")
    group_retry_policy: dict[str, Any] | None = prop(None)  # 5.x
    group_sys_flag: int | None = prop(None)  # 5.x
    notify_consumer_ids_changed_enable: bool = prop(True)
    retry_max_times: int = prop(16)
    retry_queue_nums: int = prop(1)
    subscription_data_set: list[Any] | None = prop(None)  # 5.x
    which_broker_when_consume_slowly: int = prop(1)


@bean
class SubscriptionGroupWrapper:
    data_version: DataVersion = prop(factory=DataVersion)
    forbidden_table: dict[str, Any] | None = prop(None)  # 5.x
    subscription_group_table: dict[str, SubscriptionGroupConfig] = prop(factory=dict)


@bean
class ConsumerData:
    consume_from_where: str = prop("CONSUME_FROM_LAST_OFFSET", enum=CONSUME_FROM_WHERE)
    consume_type: str = prop("CONSUME_PASSIVELY", enum=CONSUME_TYPES)
    group_name: str = prop("")
    message_model: str = prop("CLUSTERING", enum=MESSAGE_MODELS)
    subscription_data_set: list[SubscriptionData] = prop(factory=list)
    unit_mode: bool = prop(False)


@bean
class ProducerData:
    group_name: str = prop("")


@bean
class HeartbeatData:
    client_id: str = prop("", name="clientID")
    consumer_data_set: list[ConsumerData] = prop(factory=list)
    producer_data_set: list[ProducerData] = prop(factory=list)


@bean
class Connection:
    client_addr: str = prop("")
    client_id: str = prop("")
    language: str = prop("JAVA")
    version: int = prop(0)


@bean
class ConsumerConnection:
    connection_set: list[Connection] = prop(factory=list)
    consume_from_where: str | None = prop(None, enum=CONSUME_FROM_WHERE)
    consume_type: str | None = prop(None, enum=CONSUME_TYPES)
    message_model: str | None = prop(None, enum=MESSAGE_MODELS)
    subscription_table: dict[str, SubscriptionData] = prop(factory=dict)


@bean
class ProducerConnection:
    connection_set: list[Connection] = prop(factory=list)


@bean
class LockBatchRequestBody:
    """Also ``UnlockBatchRequestBody`` (B.3 codes 41, 42)."""

    client_id: str = prop("")
    consumer_group: str = prop("")
    mq_set: list[MessageQueue] = prop(factory=list)
    only_this_broker: bool | None = prop(None)  # 5.x


UnlockBatchRequestBody = LockBatchRequestBody


@bean
class LockBatchResponseBody:
    lock_ok_mq_set: list[MessageQueue] = prop(factory=list, name="lockOKMQSet")


@bean
class ConsumeQueueData:
    bit_map: str | None = prop(None)
    eval: bool = prop(False)
    extend_data_json: str | None = prop(None)
    msg: str | None = prop(None)
    physic_offset: int = prop(0)
    physic_size: int = prop(0)
    tags_code: int = prop(0)


@bean
class CheckClientRequestBody:
    """The body of CHECK_CLIENT_CONFIG (46): a consumer's subscription to check before it starts."""

    client_id: str | None = prop(None)
    group: str | None = prop(None)
    subscription_data: SubscriptionData | None = prop(None)


@bean
class QueryConsumeQueueResponseBody:
    filter_data: str | None = prop(None)
    max_queue_index: int = prop(0)
    min_queue_index: int = prop(0)
    queue_data: list[ConsumeQueueData] = prop(factory=list)
    subscription_data: SubscriptionData | None = prop(None)


@bean
class HAConnectionRuntimeInfo:
    """One slave as its master sees it (RocketMQ 5's ``HARuntimeInfo.HAConnectionRuntimeInfo``)."""

    addr: str = prop("")
    diff: int = prop(0)
    in_sync: bool = prop(False)
    slave_ack_offset: int = prop(0)
    transfer_from_where: int = prop(0)
    transferred_byte_in_second: int = prop(0)


@bean
class HAClientRuntimeInfo:
    """A slave's link to its master (``HARuntimeInfo.HAClientRuntimeInfo``)."""

    activated: bool = prop(False)
    last_read_timestamp: int = prop(0)
    last_write_timestamp: int = prop(0)
    master_addr: str | None = prop(None)
    master_flush_offset: int = prop(0)
    max_offset: int = prop(0)
    transferred_byte_in_second: int = prop(0)


@bean
class QueueLock:
    """One queue lock of an orderly consumer (rmq's RMQ_GET_QUEUE_LOCKS, not a RocketMQ body)."""

    age_millis: int = prop(0)  # since it was taken or renewed
    client_id: str = prop("")
    consumer_group: str = prop("")
    mq: MessageQueue = prop(factory=MessageQueue)


@bean
class QueueLockTable:
    locks: list[QueueLock] = prop(factory=list)


@bean
class BrokerMemberGroup:
    """A broker group's live members (5.x ``BrokerMemberGroup``: GET_BROKER_MEMBER_GROUP)."""

    broker_addrs: dict[int, str] = prop(factory=dict)
    broker_name: str = prop("")
    cluster: str = prop("")


@bean
class GetBrokerMemberGroupResponseBody:
    broker_member_group: BrokerMemberGroup = prop(factory=BrokerMemberGroup)


@bean
class EpochEntry:
    """One entry of a controller-mode broker's ``epochFileCheckpoint`` (5.x ``EpochEntry``)."""

    end_offset: int = prop(0)
    epoch: int = prop(0)
    start_offset: int = prop(0)


@bean
class EpochEntryCache:
    """GET_BROKER_EPOCH_CACHE (1007, RocketMQ 5 controller mode): the broker's epochs and CommitLog
    max offset (docs/controller.md §2.11)."""

    broker_id: int = prop(0)
    broker_name: str | None = prop(None)
    cluster_name: str | None = prop(None)
    epoch_list: list[EpochEntry] = prop(factory=list)
    max_offset: int = prop(0)


@bean
class HARuntimeInfo:
    """GET_BROKER_HA_STATUS (907, RocketMQ 5): what ``mqadmin haStatus`` prints."""

    ha_client_runtime_info: HAClientRuntimeInfo = prop(factory=HAClientRuntimeInfo)
    ha_connection_info: list[HAConnectionRuntimeInfo] = prop(factory=list)
    in_sync_slave_nums: int = prop(0)
    master: bool = prop(False)
    master_commit_log_max_offset: int = prop(0)
