"""Sending headers (PROTOCOL.md B.3, B.6): SEND_MESSAGE V1 and V2 (one-letter keys) and their
response, send-back, transactions; ``parse_send_header`` reads either send as one V1 header."""

from __future__ import annotations

from collections.abc import Mapping

from rmqcli.remoting.headers.base import CommandHeader, header, opt, req


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
