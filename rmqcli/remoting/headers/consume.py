"""Pulling, offsets and queries (PROTOCOL.md B.3, B.7): PULL_MESSAGE and its sysFlag bits,
QUERY_MESSAGE / VIEW_MESSAGE, queue offsets, consumer offsets, client registration."""

from __future__ import annotations

from rmqcli.remoting.headers.base import CommandHeader, header, opt, req


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
