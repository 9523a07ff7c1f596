"""Admin requests about subscription groups and their offsets: ``AdminBrokerProcessor`` with
``SubscriptionGroupManager``, ``ConsumerOffsetManager`` and ``ConsumerManager`` (protocol.md B.4).

UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
DELETE_SUBSCRIPTIONGROUP (207, ``removeOffset`` drops the group's offsets), GET_CONSUME_STATS (208),
GET_BROKER_CONSUME_STATS (317), QUERY_TOPIC_CONSUME_BY_WHO (300), CLONE_GROUP_OFFSET (314),
GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45), and 5.x's GET_SUBSCRIPTIONGROUP_CONFIG
(352). Group changes are persisted at once
(``subscriptionGroup.json``, as ``SubscriptionGroupManager.persist``); offset changes with the next
offset flush (every ``flushConsumerOffsetInterval``), as ``ConsumerOffsetManager`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqcli.admin.retrypolicy import GROUP_5X_DEFAULTS, PolicyError, policy_value
from rmqcli.broker.admin.stats import group_get_tps, message_store_time
from rmqcli.broker.names import validate_group, validate_topic
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.store.write.config import subscription_group_config

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

SLAVE_REFUSAL = (
    "Can't modify topic or subscription group from slave broker, please execute it from master broker."
)
GROUP_KEYS = tuple(subscription_group_config(""))  # the 9 properties of a 4.9.x SubscriptionGroupConfig
SUBSCRIPTION_DATA_MAX = 1024  # 5.x ``subscriptionDataSet`` entries kept from one request


# --- the offset table ("topic@group" -> {queueId: offset}) ------------------------------------
def _offset_keys(ctl: BrokerContext) -> list[tuple[str, str]]:
    """(topic, group) of every ``topic@group`` key of the offset table."""
    pairs = []
    for key in ctl.writer.config.consumer_offsets:
        topic, sep, group = key.partition("@")
        if sep:
            pairs.append((topic, group))
    return pairs


def topics_of_group(ctl: BrokerContext, group: str) -> list[str]:
    """``ConsumerOffsetManager.whichTopicByConsumer``."""
    return [topic for topic, owner in _offset_keys(ctl) if owner == group]


def groups_of_topic(ctl: BrokerContext, topic: str) -> list[str]:
    """``ConsumerOffsetManager.whichGroupByTopic``."""
    return [group for name, group in _offset_keys(ctl) if name == topic]


def _offset_wrapper(ctl: BrokerContext, group: str, topic: str, queue_id: int) -> jb.OffsetWrapper:
    broker_offset = max(ctl.store.max_offset(topic, queue_id), 0)
    consumer_offset = max(ctl.offsets.query(group, topic, queue_id), 0)
    wrapper = jb.OffsetWrapper(broker_offset=broker_offset, consumer_offset=consumer_offset)
    if consumer_offset - 1 >= 0:
        last = message_store_time(ctl, topic, queue_id, consumer_offset - 1)
        if last > 0:
            wrapper.last_timestamp = last
    return wrapper


def _subscribed_elsewhere(ctl: BrokerContext, group: str, topic: str) -> bool:
    """True when the group is online with subscriptions, none of them to ``topic`` (skipped then)."""
    info = ctl.clients.consumers.get(group)
    return bool(info and info.subscriptions) and ctl.clients.subscription(group, topic) is None


def _consume_stats(
    ctl: BrokerContext, group: str, topic: str, config: dict, queue_key: str
) -> jb.ConsumeStats:
    stats = jb.ConsumeStats()
    for queue_id in range(int(config[queue_key])):
        mq = jb.MessageQueue(broker_name=ctl.config.broker_name, queue_id=queue_id, topic=topic)
        stats.offset_table[mq] = _offset_wrapper(ctl, group, topic, queue_id)
    stats.consume_tps += group_get_tps(ctl, group, topic)
    return stats


# --- handlers ----------------------------------------------------------------------------------
def update_sub_group(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``updateSubscriptionGroupConfig``: the body's config replaces the group's, persisted. No
    body, or ``null``, changes nothing (4.9.8 answers SUCCESS); a group name that fails
    ``validate_group`` is refused (4.9.8 takes any name; RocketMQ 5 refuses such names too).

    A 4.9.x body gives the 9 keys of 4.9.x; a body with any key RocketMQ 5.1.1 added
    (``consumeMessageOrderly``, ``groupRetryPolicy``, ...; 5.x mqadmin sends them all) gives
    5.1.1's 13, its defaults where missing, as 5.1.1 stores them (``group_config``)."""
    if ctl.config.is_slave:  # validateSlave
        return req.response(RS.SYSTEM_ERROR, SLAVE_REFUSAL)
    decoded = jb.decode(jb.SubscriptionGroupConfig, req.body) if req.body else None
    if decoded is not None:
        problem = validate_group(decoded.group_name)
        if problem:
            return req.response(RS.SYSTEM_ERROR, problem)
        try:
            config = group_config(jb.to_fastjson_value(decoded))
        except PolicyError as exc:
            return req.response(RS.SYSTEM_ERROR, f"groupRetryPolicy: {exc}")
        ctl.writer.config.groups[config["groupName"]] = config
        ctl.writer.config.groups_version.bump(ctl.writer.clock())
        ctl.persist()
    return req.response()


def group_config(given: dict[str, Any]) -> dict[str, Any]:
    """The stored ``SubscriptionGroupConfig`` for a request's (fastjson keys): 4.9.x's keys, and
    5.1.1's when the request has any of them, each with its default when missing; sorted keys as
    fastjson writes a bean."""
    config = subscription_group_config(given.get("groupName", ""))
    config.update({k: given[k] for k in GROUP_KEYS if k in given})
    extra = {k: given[k] for k in (*GROUP_5X_DEFAULTS, "subscriptionDataSet") if given.get(k) is not None}
    if extra:
        config.update(GROUP_5X_DEFAULTS)
        config.update(extra)
        config["groupRetryPolicy"] = policy_value(config["groupRetryPolicy"])
        if config["groupRetryPolicy"] is None:
            del config["groupRetryPolicy"]
        subscriptions = config.get("subscriptionDataSet")
        if isinstance(subscriptions, list):
            config["subscriptionDataSet"] = subscriptions[:SUBSCRIPTION_DATA_MAX]
    return dict(sorted(config.items()))


def group_config_of(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """GET_SUBSCRIPTIONGROUP_CONFIG (352, 5.x): the group's config; SYSTEM_ERROR when unknown."""
    h = req.header(hd.GetSubscriptionGroupConfigRequestHeader)
    config = ctl.writer.config.groups.get(h.group)
    if config is None:
        return req.response(RS.SYSTEM_ERROR, "No group in this broker")
    return req.response(body=jb.encode(jb.from_value(jb.SubscriptionGroupConfig, config)))


def all_sub_groups(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``SubscriptionGroupManager.encode``: ``{"dataVersion", "subscriptionGroupTable"}``."""
    version = ctl.writer.config.groups_version
    wrapper = jb.SubscriptionGroupWrapper(
        data_version=jb.DataVersion(counter=version.counter, timestamp=version.timestamp),
        subscription_group_table={
            name: jb.from_value(jb.SubscriptionGroupConfig, c) for name, c in ctl.writer.config.groups.items()
        },
    )
    return req.response(body=jb.encode(wrapper))


def delete_sub_group(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    if ctl.config.is_slave:  # validateSlave
        return req.response(RS.SYSTEM_ERROR, SLAVE_REFUSAL)
    h = req.header(hd.DeleteSubscriptionGroupRequestHeader)
    if ctl.writer.config.groups.pop(h.group_name, None) is not None:
        ctl.writer.config.groups_version.bump(ctl.writer.clock())
    if h.remove_offset:
        table = ctl.writer.config.consumer_offsets
        for topic in topics_of_group(ctl, h.group_name):
            table.pop(f"{topic}@{h.group_name}", None)
    ctl.persist()
    return req.response()


def consume_stats(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``getConsumeStats``: every read queue of the topic (or of each topic the group has offsets
    for), broker and consumer offsets (negative as 0) and the store time of the last consumed one."""
    h = req.header(hd.GetConsumeStatsRequestHeader)
    group = h.consumer_group
    topics = [h.topic] if h.topic and h.topic.strip() else topics_of_group(ctl, group)
    stats = jb.ConsumeStats()
    for topic in topics:
        config = ctl.topics.get(topic)
        if config is None or _subscribed_elsewhere(ctl, group, topic):
            continue
        one = _consume_stats(ctl, group, topic, config, "readQueueNums")
        stats.offset_table.update(one.offset_table)
        stats.consume_tps += one.consume_tps
    return req.response(body=jb.encode(stats))


def broker_consume_stats(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``fetchAllConsumeStatsInBroker``: per subscription group, the consume stats of each topic it
    has offsets for (write queues; only order topics with ``isOrder``)."""
    h = req.header(hd.GetConsumeStatsInBrokerHeader)
    out = jb.ConsumeStatsList(broker_addr=ctl.addr)
    for group in list(ctl.writer.config.groups):
        per_topic = []
        for topic in topics_of_group(ctl, group):
            config = ctl.topics.get(topic)
            if config is None or (h.is_order and not config.get("order")):
                continue
            if _subscribed_elsewhere(ctl, group, topic):
                continue
            stats = _consume_stats(ctl, group, topic, config, "writeQueueNums")
            out.total_diff += sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
            per_topic.append(stats)
        out.consume_stats_list.append({group: per_topic})
    return req.response(body=jb.encode(out))


def topic_consume_by_who(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``queryTopicConsumeByWho``: online groups subscribed to the topic, and groups with offsets."""
    from formats.javahash import hashmap_order

    h = req.header(hd.QueryTopicConsumeByWhoRequestHeader)
    groups = [g for g, info in ctl.clients.consumers.items() if h.topic in info.subscriptions]
    groups.extend(groups_of_topic(ctl, h.topic))
    return req.response(body=jb.encode(jb.GroupList(group_list=hashmap_order(groups))))


def clone_group_offset(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``cloneGroupOffset``: copy ``topic@src`` to ``topic@dest`` (every topic of src when blank);
    online source groups only for the topics they subscribe, unless ``offline``."""
    h = req.header(hd.CloneGroupOffsetRequestHeader)
    given = bool(h.topic and h.topic.strip())
    problem = validate_group(h.dest_group) or (validate_topic(h.topic) if given else None)
    if problem:  # 4.9.8 checks neither; ``topic@destGroup`` would be persisted
        return req.response(RS.SYSTEM_ERROR, problem)
    topics = [h.topic] if given else topics_of_group(ctl, h.src_group)
    table = ctl.writer.config.consumer_offsets
    for topic in topics:
        if ctl.topics.get(topic) is None:
            continue
        if not h.offline and _subscribed_elsewhere(ctl, h.src_group, topic):
            continue
        source = table.get(f"{topic}@{h.src_group}")
        if source is not None:
            table[f"{topic}@{h.dest_group}"] = dict(source)
            ctl.offsets.changed = True
    return req.response()


def all_consumer_offsets(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``ConsumerOffsetManager.encode`` (what a slave copies): ``{"offsetTable": …}``."""
    table = ctl.writer.config.consumer_offsets
    body = jb.ConsumerOffsetSerializeWrapper(offset_table={k: dict(v) for k, v in table.items()})
    return req.response(body=jb.encode(body))


def all_delay_offsets(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """GET_ALL_DELAY_OFFSET (45): ``ScheduleMessageService.encode``, what a slave copies into its
    ``delayOffset.json``: ``{"offsetTable":{delayLevel:offset}}``."""
    table = dict(sorted(ctl.writer.config.delay_offsets.items()))
    return req.response(body=jb.encode(jb.DelayOffsetSerializeWrapper(offset_table=table)))


HANDLERS = {
    RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: update_sub_group,
    RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: all_sub_groups,
    RC.GET_SUBSCRIPTIONGROUP_CONFIG: group_config_of,
    RC.DELETE_SUBSCRIPTIONGROUP: delete_sub_group,
    RC.GET_CONSUME_STATS: consume_stats,
    RC.GET_BROKER_CONSUME_STATS: broker_consume_stats,
    RC.QUERY_TOPIC_CONSUME_BY_WHO: topic_consume_by_who,
    RC.CLONE_GROUP_OFFSET: clone_group_offset,
    RC.GET_ALL_CONSUMER_OFFSET: all_consumer_offsets,
    RC.GET_ALL_DELAY_OFFSET: all_delay_offsets,
}
