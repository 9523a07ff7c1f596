"""Typed custom headers: the ``CommandCustomHeader`` classes of PROTOCOL.md B.2-B.7.

Each header is a class of keyword-only fields (``header``, ``req``, ``opt``). A field's wire key is
its Java field name (the camelCase of the Python name unless given), its kind says how Java
converts it (A.5): ``str``, ``int`` (``Integer``), ``long``, ``bool`` (``"true"``/``"false"``;
``Boolean.parseBoolean`` when reading, so C++'s ``"1"`` reads as false, B.6), ``float``. ``None``
fields are omitted. Fields that are Java primitives or have a Java default keep that default here,
so they are always sent, as Java does.
Required fields (``@CFNotNull``) missing on decode raise ``HeaderError`` with Java's message.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar, dataclass_transform

from rmqcli.errors import HeaderError  # defined with the other errors, also importable from here
from rmqcli.remoting.javanames import camel

_INT_RE = re.compile(r"[+-]?\d+\Z")
JAVA_RANGES = {"int": (-(1 << 31), (1 << 31) - 1), "long": (-(1 << 63), (1 << 63) - 1)}


class _Field:
    """What ``req`` / ``opt`` declare about one header field."""

    __slots__ = ("kind", "key", "required", "default")

    def __init__(self, kind: str, key: str | None, required: bool, default: Any) -> None:
        self.kind, self.key, self.required, self.default = kind, key, required, default


_REQUIRED = object()  # the default of a field without one (a required constructor argument)


def req(kind: str = "str", key: str | None = None) -> Any:
    """A ``@CFNotNull`` field: a constructor argument, required on decode."""
    return _Field(kind, key, True, _REQUIRED)


def opt(kind: str = "str", key: str | None = None, default: Any = None) -> Any:
    """An optional field; ``default`` mirrors a Java primitive or initialiser (always sent)."""
    return _Field(kind, key, False, default)


def _to_str(kind: str, value: Any) -> str:
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return repr(float(value))
    if kind in ("int", "long"):
        return str(int(value))
    return str(value)


def _parse(kind: str, text: str) -> Any:
    """``Integer.parseInt`` / ``Long.parseLong`` / ``Boolean.parseBoolean`` / ``Double.parseDouble``."""
    if kind == "str":
        return text
    if kind == "bool":
        return text.lower() == "true"
    if kind in ("int", "long"):
        if not _INT_RE.match(text):
            raise ValueError(text)
        value = int(text)
        low, high = JAVA_RANGES[kind]
        if not low <= value <= high:
            raise ValueError(text)
        return value
    if kind == "float":
        return float(text.strip())
    raise TypeError(kind)


def _parse_int(text: str) -> int:
    if text.isascii() and text.isdigit():  # the common case: no sign, no range check below 2**31
        value = int(text)
        if value <= JAVA_RANGES["int"][1]:
            return value
    return _parse("int", text)


def _parse_long(text: str) -> int:
    if text.isascii() and text.isdigit():
        value = int(text)
        if value <= JAVA_RANGES["long"][1]:
            return value
    return _parse("long", text)


def _parser(kind: str) -> Callable[[str], Any] | None:
    """The ``_parse`` of one kind as a function of the text (``None`` for strings, kept as sent)."""
    if kind == "str":
        return None
    if kind == "int":
        return _parse_int
    if kind == "long":
        return _parse_long
    return functools.partial(_parse, kind)


H = TypeVar("H", bound="CommandHeader")


class CommandHeader:
    """Base of every typed header: ``to_ext_fields`` / ``from_ext_fields`` (A.5).

    ``header`` declares a subclass from its ``req`` / ``opt`` fields; what a dataclass would make
    at import time (``__init__``, the decoder) is made on a class's first use instead, so that
    importing the 60-odd headers costs little (``python -X importtime``).
    """

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # compared by value, so unhashable (as a dataclass)
    _fields: ClassVar[tuple[tuple[str, _Field], ...]] = ()
    _wire: ClassVar[tuple[tuple[str, str, str, bool], ...]] = ()

    def __init__(self, **values: Any) -> None:
        """Keyword arguments only; the class's own ``__init__`` is generated on the first call."""
        cls = type(self)
        init = _initializer(cls)
        type.__setattr__(cls, "__init__", init)
        init(self, **values)

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name, _ in self._fields)
        return f"{type(self).__qualname__}({values})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name, _ in self._fields)

    @classmethod
    def wire_fields(cls) -> tuple[tuple[str, str, str, bool], ...]:
        """``(python name, wire key, kind, required)`` in declaration order."""
        if not cls.__dict__.get("_wire"):
            wire = tuple((name, f.key or camel(name), f.kind, f.required) for name, f in cls._fields)
            type.__setattr__(cls, "_wire", wire)
        return cls._wire

    def to_ext_fields(self) -> dict[str, str]:
        """``makeCustomHeaderToNet``: every non-null field as a string, in declaration order."""
        ext: dict[str, str] = {}
        for name, key, kind, _ in self.wire_fields():
            value = getattr(self, name)
            if value is not None:
                ext[key] = _to_str(kind, value)
        return ext

    @classmethod
    def from_ext_fields(cls: type[H], ext: Mapping[str, str] | None) -> H:
        """``decodeCommandCustomHeader``: missing required fields and unparsable required values
        raise ``HeaderError``; an unparsable optional value is dropped (Java logs it)."""
        decode = cls.__dict__.get("_decode")
        if decode is None:
            decode = _decoder(cls)
            type.__setattr__(cls, "_decode", decode)
        return decode(ext or {})


_DIGITS = {"int": 9, "long": 18}  # this many plain digits always fit the Java type


def _decoder(cls: type[H]) -> Callable[[Mapping[str, str]], H]:
    """``from_ext_fields`` of one class as straight-line code (a header is decoded per request).

    Every field is read with one lookup; plain decimal digits short enough to fit the Java type
    are converted inline, anything else goes through the kind's parser (``_parse``). Missing or
    unparsable optional fields keep their defaults.
    """
    lines = ["def decode(ext):", "    get = ext.get", "    obj = new(cls)"]
    env: dict[str, Any] = {"new": object.__new__, "cls": cls, "HeaderError": HeaderError}
    defaults = {name: f.default for name, f in cls._fields}
    for name, key, kind, required in cls.wire_fields():
        parse = _parser(kind)
        env[f"p_{name}"] = parse
        env[f"d_{name}"] = defaults[name]
        lines.append(f"    text = get({key!r})")
        missing = f"raise HeaderError({f'the custom field <{key}> is null'!r})" if required else None
        if parse is None:
            value = "text"
        elif kind in _DIGITS:
            fits = f"text.isascii() and text.isdigit() and len(text) <= {_DIGITS[kind]}"
            value = f"int(text) if {fits} else p_{name}(text)"
        else:
            value = f"p_{name}(text)"
        if required:
            lines.append(f"    if text is None: {missing}")
            if parse is None:
                lines.append(f"    obj.{name} = text")
            else:
                bad = f"the custom field <{key}> is not a valid {kind}: "
                lines += [
                    "    try:",
                    f"        obj.{name} = {value}",
                    "    except ValueError:",
                    f"        raise HeaderError({bad!r} + repr(text)) from None",
                ]
        elif parse is None:
            lines.append(f"    obj.{name} = d_{name} if text is None else text")
        else:
            lines += [
                f"    obj.{name} = d_{name}",
                "    if text is not None:",
                "        try:",
                f"            obj.{name} = {value}",
                "        except ValueError:",
                "            pass",
            ]
    lines.append("    return obj")
    exec("\n".join(lines), env)  # noqa: S102 - code generated from the class's own field table
    return env["decode"]


def _initializer(cls: type[H]) -> Callable[..., None]:
    """The keyword-only ``__init__`` of one class, as a dataclass would write it."""
    env: dict[str, Any] = {}
    params, body = [], []
    for name, f in cls._fields:
        if f.default is _REQUIRED:
            params.append(name)
        else:
            env[f"d_{name}"] = f.default
            params.append(f"{name}=d_{name}")
        body.append(f"    self.{name} = {name}")
    code = f"def __init__(self, *, {', '.join(params)}):\n" + ("\n".join(body) or "    pass")
    exec(code, env)  # noqa: S102 - code generated from the class's own field table
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


@dataclass_transform(kw_only_default=True, field_specifiers=(req, opt))
def header(cls: type[H]) -> type[H]:
    """Declare a header class: keyword-only fields (``req`` / ``opt``) in slots."""
    fields = tuple((name, cls.__dict__[name]) for name in cls.__dict__.get("__annotations__", {}))
    namespace = {k: v for k, v in cls.__dict__.items() if k not in dict(fields)}
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace["__slots__"] = tuple(name for name, _ in fields)
    namespace["_fields"] = fields
    return type(cls)(cls.__name__, cls.__bases__, namespace)


# --- NameServer (B.2) --------------------------------------------------------------------------
@header
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str = req()
    key: str = req()
    value: str = req()


@header
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str = req()
    key: str = req()


@header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = opt()


@header
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str = req()
    key: str = req()


@header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str = req()


@header
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = req()
    broker_addr: str = req()
    cluster_name: str = req()
    ha_server_addr: str = req()
    broker_id: int = req("long")
    heartbeat_timeout_millis: int | None = opt("long")  # 5.x
    enable_acting_master: bool | None = opt("bool")  # 5.x
    compressed: bool = opt("bool", default=False)
    body_crc32: int = opt("int", default=0)


@header
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = opt()
    master_addr: str | None = opt()


@header
class UnRegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = req()
    broker_addr: str = req()
    cluster_name: str = req()
    broker_id: int = req("long")


@header
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str = req()
    accept_standard_json_only: bool | None = opt("bool")


@header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str = req()


@header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int = req("int")


@header
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str = req()


@header
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int = req("int")


@header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str = req()
    cluster_name: str | None = opt()


@header
class RegisterTopicRequestHeader(CommandHeader):  # 5.x
    topic: str = req()


@header
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str = req()


@header
class QueryDataVersionRequestHeader(CommandHeader):
    broker_name: str = req()
    broker_addr: str = req()
    cluster_name: str = req()
    broker_id: int = req("long")


@header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool = req("bool")


# --- sending (B.3, B.6) ------------------------------------------------------------------------
@header
class SendMessageRequestHeader(CommandHeader):
    """Code 10 (V1 names); what C++ 1.2.x and the Python ``rocketmq`` 0.4.4 client send."""

    producer_group: str = req()
    topic: str = req()
    default_topic: str = req()
    default_topic_queue_nums: int = req("int")
    queue_id: int = req("int")
    sys_flag: int = req("int")
    born_timestamp: int = req("long")
    flag: int = req("int")
    properties: str | None = opt()
    reconsume_times: int | None = opt("int")
    unit_mode: bool = opt("bool", default=False)
    batch: bool = opt("bool", default=False)
    max_reconsume_times: int | None = opt("int")
    bname: str | None = opt()


@header
class SendMessageRequestHeaderV2(CommandHeader):
    """Codes 310 and 320: the V1 fields under one-letter keys (B.6)."""

    a: str = req()  # producerGroup
    b: str = req()  # topic
    c: str = req()  # defaultTopic
    d: int = req("int")  # defaultTopicQueueNums
    e: int = req("int")  # queueId
    f: int = req("int")  # sysFlag
    g: int = req("long")  # bornTimestamp
    h: int = req("int")  # flag
    i: str | None = opt()  # properties
    j: int | None = opt("int")  # reconsumeTimes
    k: bool = opt("bool", default=False)  # unitMode
    l: int | None = opt("int")  # noqa: E741  maxReconsumeTimes
    m: bool = opt("bool", default=False)  # batch
    n: str | None = opt()  # brokerName (bname)

    _V1 = (
        "producer_group topic default_topic default_topic_queue_nums queue_id sys_flag born_timestamp "
        "flag properties reconsume_times unit_mode max_reconsume_times batch bname"
    ).split()

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        """``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2``."""
        return cls(**{short: getattr(v1, name) for name, short in _V2_KEY_OF_V1.items()})

    def to_v1(self) -> SendMessageRequestHeader:
        """``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1``."""
        return SendMessageRequestHeader(
            **{name: getattr(self, short) for name, short in _V2_KEY_OF_V1.items()}
        )


_V2_KEY_OF_V1 = dict(  # V1 field name -> the V2 field (its one-letter name is its wire key)
    zip(
        SendMessageRequestHeaderV2._V1,
        (name for name, _, _, _ in SendMessageRequestHeaderV2.wire_fields()),
        strict=True,
    )
)


def send_header_keys(code: int, names: tuple[str, ...]) -> tuple[str, ...]:
    """The wire keys of the V1 fields ``names`` (Python names) in a send of ``code``: the V1
    header's keys, or the V2 header's letters."""
    if code in SEND_CODES_V2:
        return tuple(_V2_KEY_OF_V1[name] for name in names)
    keys = {name: key for name, key, _, _ in SendMessageRequestHeader.wire_fields()}
    return tuple(keys[name] for name in names)


SEND_CODES_V1 = frozenset({10, 324})
SEND_CODES_V2 = frozenset({310, 320, 325})


def parse_send_header(code: int, ext: Mapping[str, str] | None) -> SendMessageRequestHeader:
    """``AbstractSendMessageProcessor.parseRequestHeader``: V1 and V2 requests as one V1 header."""
    if code in SEND_CODES_V2:
        return SendMessageRequestHeaderV2.from_ext_fields(ext).to_v1()
    return SendMessageRequestHeader.from_ext_fields(ext)


@header
class SendMessageResponseHeader(CommandHeader):
    """Plus ext keys ``MSG_REGION`` and ``TRACE_ON`` set by the broker (B.3)."""

    msg_id: str = req()
    queue_id: int = req("int")
    queue_offset: int = req("long")
    transaction_id: str | None = opt()
    batch_uniq_id: str | None = opt()  # 5.x
    recall_handle: str | None = opt()  # 5.x


@header
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: int = req("long")
    group: str = req()
    delay_level: int = req("int")
    origin_msg_id: str | None = opt()
    origin_topic: str | None = opt()
    unit_mode: bool = opt("bool", default=False)
    max_reconsume_times: int | None = opt("int")


@header
class EndTransactionRequestHeader(CommandHeader):
    producer_group: str = req()
    tran_state_table_offset: int = req("long")
    commit_log_offset: int = req("long")
    commit_or_rollback: int = req("int")  # 0 unknown, 8 commit, 12 rollback
    from_transaction_check: bool = opt("bool", default=False)
    msg_id: str = req()
    transaction_id: str | None = opt()
    topic: str | None = opt()  # 5.x


@header
class CheckTransactionStateRequestHeader(CommandHeader):
    tran_state_table_offset: int = req("long")
    commit_log_offset: int = req("long")
    msg_id: str | None = opt()
    transaction_id: str | None = opt()
    offset_msg_id: str | None = opt()
    topic: str | None = opt()  # 5.x


# --- pulling, offsets, queries (B.3, B.7) ------------------------------------------------------
@header
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str = req()
    topic: str = req()
    queue_id: int = req("int")
    queue_offset: int = req("long")
    max_msg_nums: int = req("int")
    sys_flag: int = req("int")
    commit_offset: int = req("long")
    suspend_timeout_millis: int = req("long")
    subscription: str | None = opt()
    sub_version: int = req("long")
    expression_type: str | None = opt()
    max_msg_bytes: int | None = opt("int")  # 5.x
    request_source: int | None = opt("int")  # 5.x
    proxy_froward_client_id: str | None = opt()  # 5.x, sic
    bname: str | None = opt()


PULL_FLAG_COMMIT_OFFSET = 0x1  # PullSysFlag bits of PullMessageRequestHeader.sys_flag
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
PULL_FLAG_CLASS_FILTER = 0x8


@header
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: int = req("long")
    next_begin_offset: int = req("long")
    min_offset: int = req("long")
    max_offset: int = req("long")
    offset_delta: int | None = opt("long")  # 5.x
    topic_sys_flag: int | None = opt("int")  # 5.x
    group_sys_flag: int | None = opt("int")  # 5.x
    forbidden_type: int | None = opt("int")  # 5.x


@header
class QueryMessageRequestHeader(CommandHeader):
    """Ext key ``_UNIQUE_KEY_QUERY="true"`` marks a unique-key query (A.5, B.3)."""

    topic: str = req()
    key: str = req()
    max_num: int = req("int")
    begin_timestamp: int = req("long")
    end_timestamp: int = req("long")


UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


@header
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int = req("long")
    index_last_update_phyoffset: int = req("long")


@header
class ViewMessageRequestHeader(CommandHeader):
    offset: int = req("long")
    topic: str | None = opt()  # 5.x


@header
class SearchOffsetRequestHeader(CommandHeader):
    topic: str = req()
    queue_id: int = req("int")
    timestamp: int = req("long")
    boundary_type: str | None = opt()  # 5.x: LOWER / UPPER


@header
class SearchOffsetResponseHeader(CommandHeader):
    offset: int = req("long")


@header
class GetMaxOffsetRequestHeader(CommandHeader):
    topic: str = req()
    queue_id: int = req("int")
    committed: bool | None = opt("bool")  # 5.x


@header
class GetMaxOffsetResponseHeader(CommandHeader):
    offset: int = req("long")


@header
class GetMinOffsetRequestHeader(CommandHeader):
    topic: str = req()
    queue_id: int = req("int")


@header
class GetMinOffsetResponseHeader(CommandHeader):
    offset: int = req("long")


@header
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    topic: str = req()
    queue_id: int = req("int")


@header
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int = req("long")


@header
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = req()
    topic: str = req()
    queue_id: int = req("int")
    set_zero_if_not_found: bool | None = opt("bool")  # 5.x


@header
class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: int = req("long")


@header
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = req()
    topic: str = req()
    queue_id: int = req("int")
    commit_offset: int = req("long")
    bname: str | None = opt()  # RpcRequestHeader (A.5): the queue's broker, as mqadmin sends it


@header
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumer_group: str = req()


@header
class UnregisterClientRequestHeader(CommandHeader):
    client_id: str = req(key="clientID")
    producer_group: str | None = opt()
    consumer_group: str | None = opt()


@header
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumer_group: str = req()


# --- admin (B.4, B.5) --------------------------------------------------------------------------
@header
class CreateTopicRequestHeader(CommandHeader):
    topic: str = req()
    default_topic: str = req()
    read_queue_nums: int = req("int")
    write_queue_nums: int = req("int")
    perm: int = req("int")
    topic_filter_type: str = req()  # SINGLE_TAG / MULTI_TAG
    topic_sys_flag: int | None = opt("int")
    order: bool = opt("bool", default=False)
    attributes: str | None = opt()  # 5.x: "+a=b,-c"
    force: bool | None = opt("bool")  # 5.x


@header
class DeleteTopicRequestHeader(CommandHeader):
    topic: str = req()


@header
class GetTopicConfigRequestHeader(CommandHeader):  # 5.x
    topic: str = req()


@header
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str = req()


@header
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    group_name: str = req()
    remove_offset: bool = opt("bool", default=False)  # 4.x name
    clean_offset: bool | None = opt("bool")  # 5.x name


@header
class GetSubscriptionGroupConfigRequestHeader(CommandHeader):  # 5.x
    group: str = req()


@header
class GetTopicStatsInfoRequestHeader(CommandHeader):
    topic: str = req()


@header
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumer_group: str = req()


@header
class GetProducerConnectionListRequestHeader(CommandHeader):
    producer_group: str = req()


@header
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str = req()
    topic: str | None = opt()
    topic_list: str | None = opt()  # 5.x


@header
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and, broker to client, RESET_CONSUMER_CLIENT_OFFSET (220)."""

    topic: str = req()
    group: str = req()
    timestamp: int = req("long")
    is_force: bool = req("bool")
    queue_id: int | None = opt("int")  # 5.x
    offset: int | None = opt("long")  # 5.x


@header
class GetConsumerStatusRequestHeader(CommandHeader):
    topic: str = req()
    group: str = req()
    client_addr: str | None = opt()


@header
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    topic: str = req()


@header
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    topic: str = req()
    group: str = req()


@header
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumer_group: str = req()
    client_id: str = req()
    jstack_enable: bool = opt("bool", default=False)


@header
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    consumer_group: str = req()
    client_id: str | None = opt()
    msg_id: str | None = opt()
    broker_name: str | None = opt()


@header
class CloneGroupOffsetRequestHeader(CommandHeader):
    src_group: str = req()
    dest_group: str = req()
    topic: str | None = opt()
    offline: bool = opt("bool", default=False)


@header
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    stats_name: str = req()
    stats_key: str = req()


@header
class GetConsumeStatsInBrokerHeader(CommandHeader):
    is_order: bool = req("bool")


@header
class QueryConsumeQueueRequestHeader(CommandHeader):
    topic: str | None = opt()
    queue_id: int = opt("int", default=0)
    index: int = opt("long", default=0)
    count: int = opt("int", default=0)
    consumer_group: str | None = opt()


@header
class ResumeCheckHalfMessageRequestHeader(CommandHeader):
    msg_id: str | None = opt()


# --- ACL (4.9.8 ``CreateAccessConfigRequestHeader`` and siblings) ------------------------------
@header
class CreateAccessConfigRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG (50); the permission lists are comma-joined ``name=PERM``."""

    access_key: str = req()
    secret_key: str | None = opt()
    white_remote_address: str | None = opt()
    admin: bool = opt("bool", default=False)
    default_topic_perm: str | None = opt()
    default_group_perm: str | None = opt()
    topic_perms: str | None = opt()
    group_perms: str | None = opt()


@header
class DeleteAccessConfigRequestHeader(CommandHeader):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str = req()


@header
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): comma-separated addresses."""

    global_white_addrs: str = req()
    acl_file_full_path: str | None = opt()
