"""Admin headers (PROTOCOL.md B.4, B.5): topics, subscription groups, consume stats and
connections, offset resets, running info, broker stats; and the ACL requests (4.9.8
``CreateAccessConfigRequestHeader`` and siblings)."""

from __future__ import annotations

from rmqcli.remoting.headers.base import CommandHeader, header, opt, req


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
