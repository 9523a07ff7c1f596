"""Subscription groups: updateSubGroup, deleteSubGroup, getConsumerConfig (protocol.md C.2, C.4.7;
requests B.4; bodies B.9)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from formats.names import DLQ_PREFIX, RETRY_PREFIX
from rmqcli.admin.session import AdminSession, master_addr, target_addrs
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode

if TYPE_CHECKING:
    from rmqcli.remoting.json_body import SubscriptionGroupConfig, TopicRouteData


def consuming_groups(session: AdminSession, topic: str, route: TopicRouteData) -> list[str]:
    """``queryTopicConsumeByWho``: QUERY_TOPIC_CONSUME_BY_WHO (300) to the first broker of the
    topic's ``route``; the groups in ``HashSet`` order, none when that broker has no address."""
    from formats.javahash import hashmap_order
    from rmqcli.remoting import json_body as jb

    addr = master_addr(route.broker_datas[0].broker_addrs) if route.broker_datas else None
    if not addr:
        return []
    header = hd.QueryTopicConsumeByWhoRequestHeader(topic=topic)
    reply = session.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header)
    return hashmap_order(jb.decode_or_empty(jb.GroupList, reply.body).group_list)


@dataclass
class SubGroupResult:
    config: SubscriptionGroupConfig
    brokers: list[str]


def sub_group_string(c: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString()`` (C.4.7); 5.1.1's for a config with its keys."""
    b = {True: "true", False: "false"}
    if c.consume_message_orderly is not None:
        return sub_group_string_5(c)
    return (
        f"SubscriptionGroupConfig [groupName={c.group_name}, consumeEnable={b[c.consume_enable]}, "
        f"consumeFromMinEnable={b[c.consume_from_min_enable]}, "
        f"consumeBroadcastEnable={b[c.consume_broadcast_enable]}, retryQueueNums={c.retry_queue_nums}, "
        f"retryMaxTimes={c.retry_max_times}, brokerId={c.broker_id}, "
        f"whichBrokerWhenConsumeSlowly={c.which_broker_when_consume_slowly}, "
        f"notifyConsumerIdsChangedEnable={b[c.notify_consumer_ids_changed_enable]}]"
    )


def sub_group_string_5(c: SubscriptionGroupConfig) -> str:
    """5.1.1's ``SubscriptionGroupConfig.toString()`` (guava's ``toStringHelper``; no brokerId)."""
    from rmqcli.admin.retrypolicy import policy_string

    def t(v: object) -> str:
        return "null" if v is None else ("true" if v is True else "false" if v is False else str(v))

    return (
        f"SubscriptionGroupConfig{{groupName={c.group_name}, consumeEnable={t(c.consume_enable)}, "
        f"consumeFromMinEnable={t(c.consume_from_min_enable)}, "
        f"consumeBroadcastEnable={t(c.consume_broadcast_enable)}, "
        f"consumeMessageOrderly={t(c.consume_message_orderly)}, retryQueueNums={c.retry_queue_nums}, "
        f"retryMaxTimes={c.retry_max_times}, groupRetryPolicy={policy_string(c.group_retry_policy)}, "
        f"whichBrokerWhenConsumeSlowly={c.which_broker_when_consume_slowly}, "
        f"notifyConsumerIdsChangedEnable={t(c.notify_consumer_ids_changed_enable)}, "
        f"groupSysFlag={t(c.group_sys_flag)}, consumeTimeoutMinute={t(c.consume_timeout_minute)}, "
        f"subscriptionTopicSet={t(c.subscription_data_set)}}}"
    )


def update_sub_group(
    session: AdminSession,
    group: str,
    *,
    broker_addr: str | None = None,
    cluster: str | None = None,
    consume_enable: bool = True,
    consume_from_min_enable: bool = False,
    consume_broadcast_enable: bool = False,
    retry_queue_nums: int = 1,
    retry_max_times: int = 16,
    broker_id: int = 0,
    which_broker_when_consume_slowly: int = 1,
    notify_consumer_ids_changed_enable: bool = True,
    consume_message_orderly: bool | None = None,
    group_retry_policy: str | None = None,
) -> SubGroupResult:
    """``updateSubGroup``: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) with the config as body to ``-b``
    or every master of ``-c`` (106 first); mqadmin turns broadcast and from-min off unless given.

    ``consume_message_orderly`` (``-o``) or ``group_retry_policy`` (``-p``, its JSON) make it
    RocketMQ 5.1.1's: the body has 5.1.1's keys (its defaults for the others), as 5.x mqadmin's."""
    from rmqcli.admin.retrypolicy import GROUP_5X_DEFAULTS, PolicyError, parse_policy
    from rmqcli.errors import UsageError
    from rmqcli.remoting import json_body as jb

    v5: dict = {}
    if consume_message_orderly is not None or group_retry_policy is not None:
        policy = dict(GROUP_5X_DEFAULTS["groupRetryPolicy"])
        if group_retry_policy is not None:
            try:
                policy = parse_policy(group_retry_policy.strip())
            except PolicyError as exc:
                raise UsageError(f"-p {group_retry_policy!r}: {exc}") from None
        v5 = {
            "consume_message_orderly": bool(consume_message_orderly),
            "consume_timeout_minute": GROUP_5X_DEFAULTS["consumeTimeoutMinute"],
            "group_retry_policy": policy,
            "group_sys_flag": GROUP_5X_DEFAULTS["groupSysFlag"],
        }

    config = jb.SubscriptionGroupConfig(
        group_name=group.strip(),
        consume_enable=consume_enable,
        consume_from_min_enable=consume_from_min_enable,
        consume_broadcast_enable=consume_broadcast_enable,
        retry_queue_nums=retry_queue_nums,
        retry_max_times=retry_max_times,
        broker_id=broker_id,
        which_broker_when_consume_slowly=which_broker_when_consume_slowly,
        notify_consumer_ids_changed_enable=notify_consumer_ids_changed_enable,
        **v5,
    )
    body = jb.encode(config)
    result = SubGroupResult(config=config, brokers=[])
    for addr in target_addrs(session, broker_addr, cluster):
        session.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        result.brokers.append(addr)
    return result


@dataclass
class DeleteSubGroupResult:
    group: str
    brokers: list[str]
    cluster: str | None = None
    deleted_topics: list[str] = field(default_factory=list)


def delete_sub_group(
    session: AdminSession,
    group: str,
    *,
    broker_addr: str | None = None,
    cluster: str | None = None,
    remove_offset: bool = False,
) -> DeleteSubGroupResult:
    """``deleteSubGroup``: DELETE_SUBSCRIPTIONGROUP (207) to ``-b`` or every master of ``-c``; with
    ``-c`` also deleteTopic of ``%RETRY%G`` and ``%DLQ%G`` (215 to masters, 216 to name servers)."""
    from rmqcli.admin import topic as topic_ops

    group = group.strip()
    header = hd.DeleteSubscriptionGroupRequestHeader(group_name=group, remove_offset=remove_offset)
    result = DeleteSubGroupResult(group=group, brokers=[], cluster=None if broker_addr else cluster)
    for addr in target_addrs(session, broker_addr, cluster):
        session.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header)
        result.brokers.append(addr)
    if not broker_addr and cluster:
        for prefix in (RETRY_PREFIX, DLQ_PREFIX):
            topic_ops.delete_topic(session, prefix + group, cluster)
            result.deleted_topics.append(prefix + group)
    return result


@dataclass
class ConsumerConfigInfo:
    cluster: str | None
    broker_name: str
    config: SubscriptionGroupConfig


def get_consumer_config(session: AdminSession, group: str) -> list[ConsumerConfigInfo]:
    """``getConsumerConfig``: 106, then GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) to each broker; the
    brokers that know the group, in ``brokerAddrTable`` order."""
    from formats.javahash import hashmap_order
    from rmqcli.remoting import json_body as jb

    group = group.strip()
    info = session.cluster_info()
    out = []
    for name in hashmap_order(list(info.broker_addr_table)):
        addr = master_addr(info.broker_addr_table[name].broker_addrs)
        if addr is None:
            continue
        response = session.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        wrapper = jb.decode_or_empty(jb.SubscriptionGroupWrapper, response.body)
        config = wrapper.subscription_group_table.get(group)
        if config is None:
            continue
        cluster = next((c for c, names in info.cluster_addr_table.items() if name in names), None)
        out.append(ConsumerConfigInfo(cluster, name, config))
    return out
