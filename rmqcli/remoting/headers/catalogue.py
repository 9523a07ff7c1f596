"""Every typed custom header, one flat catalogue of declarations in protocol.md's order: the
NameServer's (B.2), the sends (B.3, B.6), pulls, offsets and queries (B.3, B.7), the admin and ACL
requests (B.4, B.5). How a header is made (``header``, ``req``, ``opt``, ``CommandHeader``; A.5) is
``base``; a class gets its ``__init__`` and its decoder on first use, so importing this is cheap."""

from __future__ import annotations

from collections.abc import Mapping

from rmqcli.remoting.headers.base import CommandHeader, header, opt, req

# --- NameServer (B.2): KV config, broker registration, routes, write permission, topics of a cluster --------
# The NameServer's request and response headers (protocol.md B.2): KV config, broker
# registration, routes, write permission, topics of a cluster.


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
class BrokerHeartbeatRequestHeader(CommandHeader):
    """BROKER_HEARTBEAT (904, oneway): a name server reads the cluster and address."""

    cluster_name: str = req()
    broker_addr: str = req()
    broker_name: str = req()
    broker_id: int | None = opt("long")
    epoch: int | None = opt("int")
    max_offset: int | None = opt("long")
    confirm_offset: int | None = opt("long")
    heartbeat_timeout_mills: int | None = opt("long")  # sic: "Mills"
    election_priority: int | None = opt("int")


@header
class GetBrokerMemberGroupRequestHeader(CommandHeader):
    cluster_name: str = req()
    broker_name: str = req()


@header
class QueryDataVersionRequestHeader(CommandHeader):
    broker_name: str = req()
    broker_addr: str = req()
    cluster_name: str = req()
    broker_id: int = req("long")


@header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool = req("bool")


# --- Sending (B.3, B.6): SEND_MESSAGE V1 and V2 (one-letter keys), send-back, transactions ------------------
# Sending headers (protocol.md B.3, B.6): SEND_MESSAGE V1 and V2 (one-letter keys) and their
# response, send-back, transactions; ``parse_send_header`` reads either send as one V1 header.


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


# --- Pulling, offsets and queries (B.3, B.7) ----------------------------------------------------------------
# Pulling, offsets and queries (protocol.md B.3, B.7): PULL_MESSAGE and its sysFlag bits,
# QUERY_MESSAGE / VIEW_MESSAGE, queue offsets, consumer offsets, client registration.


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


# --- POP consumption (5.x: POP_MESSAGE .. POLLING_INFO, 200050-200055; rmqcli.broker.pop) ------------------
# Every POP-family request extends TopicQueueRequestHeader (5.1.1): ``bname``, ``lo``, ``ns``,
# ``nsd``, ``oway`` may come too and are ignored.


@header
class PopMessageRequestHeader(CommandHeader):
    consumer_group: str = req()
    topic: str = req()
    queue_id: int = req("int")  # -1: every read queue
    max_msg_nums: int = req("int")
    invisible_time: int = req("long")
    poll_time: int = req("long")
    born_time: int = req("long")
    init_mode: int = req("int")  # ConsumeInitMode: 0 MIN, 1 MAX
    exp_type: str | None = opt()
    exp: str | None = opt()
    order: bool | None = opt("bool", default=False)
    attempt_id: str | None = opt()


@header
class PopMessageResponseHeader(CommandHeader):
    pop_time: int = req("long")
    invisible_time: int = req("long")
    revive_qid: int = req("int")
    rest_num: int = req("long")
    start_offset_info: str | None = opt()
    msg_offset_info: str | None = opt()
    order_count_info: str | None = opt()


@header
class AckMessageRequestHeader(CommandHeader):
    consumer_group: str = req()
    topic: str = req()
    queue_id: int = req("int")
    extra_info: str = req()
    offset: int = req("long")


@header
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    consumer_group: str = req()
    topic: str = req()
    queue_id: int = req("int")
    extra_info: str = req()
    offset: int = req("long")
    invisible_time: int = req("long")


@header
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    pop_time: int = req("long")
    invisible_time: int = req("long")
    revive_qid: int = req("int")


@header
class PeekMessageRequestHeader(CommandHeader):
    topic: str = req()
    queue_id: int = req("int")
    max_msg_nums: int = req("int")
    consumer_group: str = req()


@header
class NotificationRequestHeader(CommandHeader):
    consumer_group: str = req()
    topic: str = req()
    queue_id: int = req("int")
    poll_time: int = req("long")
    born_time: int = req("long")


@header
class NotificationResponseHeader(CommandHeader):
    has_msg: bool = opt("bool", default=False)


@header
class PollingInfoRequestHeader(CommandHeader):
    consumer_group: str = req()
    topic: str = req()
    queue_id: int = req("int")


@header
class PollingInfoResponseHeader(CommandHeader):
    polling_num: int = opt("int", default=0)


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
    bname: str | None = opt()  # RpcRequestHeader (A.5): the queue's broker, as the 4.9.8 client sends it


@header
class SearchOffsetResponseHeader(CommandHeader):
    offset: int = req("long")


@header
class GetMaxOffsetRequestHeader(CommandHeader):
    topic: str = req()
    queue_id: int = req("int")
    committed: bool | None = opt("bool")  # 5.x
    bname: str | None = opt()  # RpcRequestHeader (A.5): the queue's broker, as the 4.9.8 client sends it


@header
class GetMaxOffsetResponseHeader(CommandHeader):
    offset: int = req("long")


@header
class GetMinOffsetRequestHeader(CommandHeader):
    topic: str = req()
    queue_id: int = req("int")
    bname: str | None = opt()  # RpcRequestHeader (A.5): the queue's broker, as the 4.9.8 client sends it


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


# --- Admin and ACL (B.4, B.5) -------------------------------------------------------------------------------
# Admin headers (protocol.md B.4, B.5): topics, subscription groups, consume stats and
# connections, offset resets, running info, broker stats; and the ACL requests (4.9.8
# ``CreateAccessConfigRequestHeader`` and siblings).


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


# --- ACL ----------------------------------------------------------------------------------------
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
